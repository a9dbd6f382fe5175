package scripts

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// This file is the entrypoint of the container that runs Flux (flux.sh.tmpl): the flux start
// of its broker, its options and its environment. job.go is the lead broker's job.

type fluxScript struct {
	common
	view
	Follower            bool
	ResourcesFromConfig bool
	HasJob              bool
	Timed               bool
	CompleteWorkers     bool
	Hostlist            string
	OutputDir           string
	Env                 []envVar
	JobScript           string
	JobScriptDelimiter  string
	BatchScript         string
	Archive             string
	Start               []string
	BrokerOptions       []string
	LeadOptions         []string
	InitialProgram      []string
	// LeadRestarts is how many times the lead broker starts again after it exited before its
	// work ended: spec.backoffLimit.
	LeadRestarts int32
}

// Paths inside M that the scripts share.
const (
	jobScriptPath   = "/fluxfed/job-script"
	batchScriptPath = "/fluxfed/batch.sh"
	// jobStatusPath holds the exit status of the lead broker's job once it ended. The pod's
	// volume outlives its containers, so a lead container that starts again knows.
	jobStatusPath = "/fluxfed/job-status"
	// cronDirPath is the brokers' cron.directory, which the provisioner creates empty. It is
	// not the view's etc/flux/system/cron.d: flux-core installs kvs-backup.cron there, a
	// nightly flux dump of the KVS that nobody asked for.
	cronDirPath = "/fluxfed/cron.d"
)

func fluxScriptData(mc *fluxv1alpha2.MiniCluster, i int, in Inputs) (fluxScript, error) {
	c := &mc.Spec.Containers[i]
	spec := &mc.Spec
	field := fmt.Sprintf("spec.containers[%d]", i)
	d := fluxScript{
		common: newCommon(mc, names.ContainerName(mc, i),
			hook{"init", c.Commands.Init},
			hook{"preCommand", c.PreCommand},
			hook{"pre", c.Commands.Pre},
			hook{"brokerPre", c.Commands.BrokerPre},
			hook{"workerPre", c.Commands.WorkerPre},
			hook{"post", c.Commands.Post},
		),
		view:                newView(mc),
		Follower:            in.Follower,
		ResourcesFromConfig: in.ResourcesFromConfig,
		Timed:               spec.Logging.Timed,
		CompleteWorkers:     spec.Flux.CompleteWorkers,
		Hostlist:            in.Hostlist,
		OutputDir:           c.Logs,
	}
	if d.OutputDir == "" {
		d.OutputDir = DefaultOutputDir
	}
	m := d.MountPath

	env, err := fluxEnvironment(spec.Flux.Environment)
	if err != nil {
		return d, err
	}
	d.Env = env

	prefix, err := splitWords(c.Commands.Prefix)
	if err != nil {
		return d, fmt.Errorf("%s.commands.prefix: %w", field, err)
	}

	// Every broker: [time] [prefix] flux start [--wrap=...] <options>.
	if d.Timed {
		d.Start = append(d.Start, "/usr/bin/time", "-f", "FLUXTIME fluxstart wall time %E")
	}
	d.Start = append(d.Start, prefix...)
	d.Start = append(d.Start, "flux", "start")
	if spec.Flux.Wrap != "" {
		d.Start = append(d.Start, "--wrap="+spec.Flux.Wrap)
	}
	d.BrokerOptions = brokerOptions(mc, m, in)

	// commands.script is written on every pod, a burst child's included: the job's tasks run it
	// on whichever nodes they land on.
	script := c.Commands.Script
	if script != "" {
		d.JobScript = script
		d.JobScriptDelimiter = heredocDelimiter("FLUXFED_SCRIPT_EOF", script)
	}
	if in.Follower {
		return d, nil
	}
	d.Archive = spec.Archive.Path
	d.LeadRestarts = mc.BackoffLimit()

	// The lead broker's initial program, if any.
	command := c.Command
	batch := c.Batch || c.BatchRaw
	switch {
	case spec.Interactive, script == "" && command == "", batch && command == "":
		// Without a job the lead broker runs no initial program and keeps the instance up
		// until someone runs flux shutdown.
		d.LeadOptions = []string{"-Sbroker.rc2_none=1"}
		return d, nil
	}
	d.HasJob = true

	var inner []string
	if d.Timed {
		inner = append(inner, "/usr/bin/time", "-f", "FLUXTIME fluxsubmit wall time %E")
	}
	inner = append(inner, prefix...)

	if batch {
		d.BatchScript = batchScript(command, c.BatchRaw, d.OutputDir)
		flags, err := jobFlags(mc, field)
		if err != nil {
			return d, err
		}
		// flux batch returns once the batch job is submitted; waiting for every waitable job
		// makes the initial program, and so the MiniCluster, end with the jobs' status.
		inner = append(inner, "bash", "-c", `flux batch "$@" && flux job wait --all`, "fluxfed-batch")
		inner = append(inner, flags...)
		inner = append(inner, "--flags", "waitable", m+batchScriptPath)
		d.InitialProgram = recordingStatus(m, inner)
		return d, nil
	}

	var job []string
	if script != "" {
		if strings.HasPrefix(script, "#!") {
			job = []string{m + jobScriptPath}
		} else {
			job = []string{"bash", m + jobScriptPath}
		}
	} else {
		// The command line keeps its shell meaning (quotes, variables, pipes) in every task.
		job = []string{"bash", "-c", command}
	}

	if c.Launcher {
		inner = append(inner, job...)
		d.InitialProgram = recordingStatus(m, inner)
		return d, nil
	}
	submit := []string{"flux", "submit"}
	if spec.Flux.SubmitCommand != "" {
		if submit, err = splitWords(spec.Flux.SubmitCommand); err != nil {
			return d, fmt.Errorf("spec.flux.submitCommand: %w", err)
		}
		if len(submit) == 0 {
			submit = []string{"flux", "submit"}
		}
	}
	flags, err := jobFlags(mc, field)
	if err != nil {
		return d, err
	}
	inner = append(inner, submit...)
	inner = append(inner, flags...)
	inner = append(inner, "--quiet", "--watch")
	inner = append(inner, job...)
	d.InitialProgram = recordingStatus(m, inner)
	return d, nil
}

// brokerOptions are the options of flux start shared by every broker of the MiniCluster.
func brokerOptions(mc *fluxv1alpha2.MiniCluster, m string, in Inputs) []string {
	spec := &mc.Spec
	root := m + "/view"
	opts := []string{
		// The config path goes to the broker through -o, which every flux start accepts (its own
		// -c is recent); -o splits its value at commas, hence no comma in the mount path.
		"-o", "--config-path=" + root + "/etc/flux/config",
		"-Scron.directory=" + m + cronDirPath,
		"-Sstatedir=" + root + "/var/lib/flux",
	}
	if !spec.Flux.DisableSocket {
		// A fixed socket in the shared volume lets the other containers and users reach the
		// broker (flux-view.sh); flux.disableSocket leaves both to Flux.
		opts = append(opts,
			"-Srundir="+root+"/run/flux",
			"-Slocal-uri=local://"+root+"/run/flux/local")
	}
	level := DefaultLogLevel
	if spec.Flux.LogLevel != nil {
		level = int(*spec.Flux.LogLevel)
	}
	if spec.Logging.Quiet {
		level = 0 // as the Flux Operator: quiet leaves only the job's own output
	}
	// log-stderr-mode=local makes a failing follower print its own error instead of sending
	// it to rank 0, which it may never have reached.
	opts = append(opts, "-Slog-stderr-mode=local", "-Slog-stderr-level="+strconv.Itoa(level))
	timeout := DefaultConnectTimeout
	if spec.Flux.ConnectTimeout != nil {
		timeout = *spec.Flux.ConnectTimeout
	}
	if timeout != "" {
		opts = append(opts, "-Stbon.connect_timeout="+timeout)
	}
	if in.Quorum > 0 {
		opts = append(opts, "-Sbroker.quorum="+strconv.Itoa(in.Quorum))
	}
	if in.TBONTopo != "" {
		opts = append(opts, "-Stbon.topo="+in.TBONTopo)
	}
	if spec.Logging.Zeromq {
		opts = append(opts, "-Stbon.zmqdebug=1")
	}
	return opts
}

type envVar struct {
	Name  string
	Value string
}

func fluxEnvironment(env map[string]string) ([]envVar, error) {
	names := make([]string, 0, len(env))
	for name := range env {
		if !envName.MatchString(name) {
			return nil, fmt.Errorf("spec.flux.environment: %q is not a valid variable name", name)
		}
		if strings.HasPrefix(name, "fluxfed_") {
			return nil, fmt.Errorf("spec.flux.environment: %q uses the prefix fluxfed_, which the entrypoint scripts reserve", name)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	vars := make([]envVar, len(names))
	for i, name := range names {
		vars[i] = envVar{Name: name, Value: env[name]}
	}
	return vars, nil
}
