// Package scripts renders the entrypoint ConfigMap of a MiniCluster: the provisioner that the
// flux-view init container runs, one entrypoint per application container and one per
// spec.services container.
//
// The scripts follow the pod contract that package workload builds the pods for: the init
// container fills the volume at spec.flux.container.mountPath (M) with the Flux install (the
// "view"), broker.toml, the hostlist and the CURVE certificate; the container that runs Flux
// encodes R from that hostlist and starts a broker with M/view/etc/flux/config as its config
// directory. Pod index 0 of a root MiniCluster is the lead broker, which runs the job.
//
// Everything from the spec reaches a script as a quoted shell word (see Quote). Snippets that
// are shell code by design (commands.*, preCommand) are stored as quoted strings and run with
// eval at their place, so that no input can change the structure of a script, and the CURVE
// secret key is never printed.
//
// Spec fields these scripts deliberately give no effect, and why:
//   - containers[].cores: the Flux Operator only exposed it to templates that no longer use it;
//     Flux learns the cores from the node (flux R encode --local). Only a MiniCluster that
//     bursts gives it a meaning, in broker.toml (package bursting, ContainerHardware).
//   - containers[].fluxUser and commands.runFluxAsRoot: the Flux Operator's v1alpha2 scripts
//     run Flux as the container's own user and ignore both; so do these. A user that is not root
//     needs sudo, to take over the files the init container installed.
//   - containers[].diagnostics: dropped by the Flux Operator's v1alpha2 scripts.
//   - flux.arch: it chose the build of helper binaries that the Flux Operator downloaded at pod
//     start (wait-fs); these scripts need none (init containers finish before the application
//     containers start, and waiting for the socket is a shell loop).
//   - the flux.container.name and flux.container.workingDir of the init container matter only
//     to package workload.
//
// Fields that shape broker.toml, the certificate or the Job (flux.scheduler, flux.topology,
// flux.brokerConfig, flux.curveCert, flux.minimalService, pod.*, ...) are rendered by the
// packages that own those objects; the topology reaches the brokers here only through
// Inputs.TBONTopo.
package scripts

import (
	"bytes"
	"embed"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"unicode"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hostlist"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// Inputs are the values the scripts need beyond the MiniCluster itself, computed by the caller
// from the federation layout.
type Inputs struct {
	// Hostlist is the RFC 29 hostlist the brokers bootstrap with; it is also in the flux
	// ConfigMap (names.KeyHostlist), from which the pods encode R. The scripts use it to warn
	// when a pod started with a different one.
	Hostlist string
	// Quorum is the number of brokers rank 0 waits for before it starts the job
	// (-Sbroker.quorum); 0 leaves it unset, as on a burst child.
	Quorum int
	// Follower is true on a burst child: rank 0 lives in another MiniCluster, so every pod
	// runs a follower broker and none runs the job.
	Follower bool
	// TBONTopo, when set, is passed to every broker as -Stbon.topo. Leave it empty when
	// broker.toml already fixes the tree (parent keys); both sides of a federation must agree.
	TBONTopo string
	// ResourcesFromConfig is true when broker.toml describes the instance's resources itself
	// ([resource] config, see brokerconf.ResourcesFromConfig): the entrypoint then encodes no R.
	ResourcesFromConfig bool
}

// ProvisionerKey is the ConfigMap key of the script the flux-view init container runs.
const ProvisionerKey = "provision.sh"

// ContainerKey returns the ConfigMap key of the entrypoint of the application container
// (spec.containers) with this name.
func ContainerKey(name string) string { return "container-" + name + ".sh" }

// ServiceKey returns the ConfigMap key of the entrypoint of the spec.services container with
// this name.
func ServiceKey(name string) string { return "service-" + name + ".sh" }

// Defaults of the spec that the schema fills in; the renderers apply them too, so that a
// MiniCluster that was not defaulted by an API server renders the same.
const (
	// DefaultOutputDir is where batch jobs write their output when containers[].logs is empty.
	DefaultOutputDir = "/tmp/fluxout"
	// DefaultConnectTimeout is spec.flux.connectTimeout when it is not set at all.
	DefaultConnectTimeout = "5s"
	// DefaultLogLevel is spec.flux.logLevel when it is not set.
	DefaultLogLevel = 6
)

// ProvisionerCommand returns the command of the flux-view init container.
func ProvisionerCommand() []string {
	return []string{"/bin/sh", names.EntrypointMountPath + "/" + ProvisionerKey}
}

// ContainerCommand returns the command of spec.containers[i]. The container that runs Flux,
// and every other container with a command, runs its rendered entrypoint; a container with
// noWrapEntrypoint runs its command with /bin/sh -c; one without a command keeps its image's
// entrypoint (nil).
func ContainerCommand(mc *fluxv1alpha2.MiniCluster, i int) []string {
	c := &mc.Spec.Containers[i]
	switch {
	case isFluxContainer(mc, i):
		return []string{"/bin/bash", names.EntrypointMountPath + "/" + ContainerKey(names.ContainerName(mc, i))}
	case c.Command == "":
		return nil
	case c.NoWrapEntrypoint:
		return []string{"/bin/sh", "-c", c.Command}
	default:
		return []string{"/bin/bash", names.EntrypointMountPath + "/" + ContainerKey(names.ContainerName(mc, i))}
	}
}

// ServiceCommand returns the command of spec.services[i], with the same rules as
// ContainerCommand for a container that does not run Flux.
func ServiceCommand(mc *fluxv1alpha2.MiniCluster, i int) []string {
	c := &mc.Spec.Services[i]
	switch {
	case c.Command == "":
		return nil
	case c.NoWrapEntrypoint:
		return []string{"/bin/sh", "-c", c.Command}
	default:
		return []string{"/bin/bash", names.EntrypointMountPath + "/" + ServiceKey(c.Name)}
	}
}

func isFluxContainer(mc *fluxv1alpha2.MiniCluster, i int) bool {
	return mc.FluxContainer() == &mc.Spec.Containers[i]
}

//go:embed templates/*.tmpl
var templateFS embed.FS

// templates are parsed once; a template error is a bug in this package, found by any test.
var templates = template.Must(template.New("scripts").Funcs(template.FuncMap{
	"q":     Quote,
	"words": quoteWords,
	"c":     commentValue,
}).Option("missingkey=error").ParseFS(templateFS, "templates/*.tmpl"))

// commentValue returns s for a comment of a script: double-quoted with Go's escapes, so that a
// newline (or any other control character) from the spec cannot end the comment and start a
// command. Nothing else is special in a comment.
func commentValue(s string) string { return strconv.Quote(s) }

// envName is what a shell accepts as a variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Render returns the data of the entrypoint ConfigMap (names.EntrypointConfigMapName): the
// provisioner under ProvisionerKey, an entrypoint under ContainerKey for the container that
// runs Flux and for every other container that runs a wrapped command (see ContainerCommand),
// and one under ServiceKey for every spec.services container with a wrapped command. It
// returns an error for a spec the schema admits but no script can honour.
func Render(mc *fluxv1alpha2.MiniCluster, in Inputs) (map[string]string, error) {
	data, err := render(mc, in)
	if err != nil {
		return nil, err
	}
	// A NUL cannot be part of a shell script: bash drops it and dash refuses the file as binary.
	// The schema refuses it in paths; anywhere else it has no meaning either.
	for _, key := range slices.Sorted(maps.Keys(data)) {
		if strings.ContainsRune(data[key], 0) {
			return nil, fmt.Errorf("rendering %s: a value of the spec contains a NUL character, which no shell script can hold", key)
		}
	}
	return data, nil
}

func render(mc *fluxv1alpha2.MiniCluster, in Inputs) (map[string]string, error) {
	if err := checkInputs(mc, in); err != nil {
		return nil, err
	}
	flux := mc.FluxContainer()
	if flux == nil {
		return nil, fmt.Errorf("spec.containers: no container runs Flux")
	}
	data := map[string]string{}
	prov, err := execute("provision.sh.tmpl", provisionerData(mc))
	if err != nil {
		return nil, err
	}
	data[ProvisionerKey] = prov

	seen := map[string]bool{}
	for i := range mc.Spec.Containers {
		name := names.ContainerName(mc, i)
		if seen[name] {
			return nil, fmt.Errorf("spec.containers[%d]: container name %q is used twice (the container that runs Flux is named after the MiniCluster when it has no name)", i, name)
		}
		seen[name] = true
		cmd := ContainerCommand(mc, i)
		if len(cmd) == 0 || cmd[0] != "/bin/bash" {
			continue // the image's entrypoint, or noWrapEntrypoint
		}
		var script string
		if isFluxContainer(mc, i) {
			d, err := fluxScriptData(mc, i, in)
			if err != nil {
				return nil, err
			}
			script, err = execute("flux.sh.tmpl", d)
			if err != nil {
				return nil, err
			}
		} else {
			script, err = execute("sidecar.sh.tmpl", sidecarData(mc, i))
			if err != nil {
				return nil, err
			}
		}
		data[ContainerKey(name)] = script
	}
	for i := range mc.Spec.Services {
		if cmd := ServiceCommand(mc, i); len(cmd) == 0 || cmd[0] != "/bin/bash" {
			continue
		}
		script, err := execute("service.sh.tmpl", serviceData(mc, i))
		if err != nil {
			return nil, err
		}
		data[ServiceKey(mc.Spec.Services[i].Name)] = script
	}
	return data, nil
}

func checkInputs(mc *fluxv1alpha2.MiniCluster, in Inputs) error {
	if mc.Name == "" {
		return fmt.Errorf("metadata.name is empty")
	}
	if strings.TrimSpace(in.Hostlist) == "" {
		return fmt.Errorf("the hostlist is empty")
	}
	if strings.ContainsAny(in.Hostlist, " \t\r\n") {
		return fmt.Errorf("hostlist %q contains blanks", in.Hostlist)
	}
	if _, err := hostlist.Parse(in.Hostlist); err != nil {
		return fmt.Errorf("hostlist %q: %w", in.Hostlist, err)
	}
	if in.Quorum < 0 {
		return fmt.Errorf("quorum %d is negative", in.Quorum)
	}
	// Broker options and attributes reach the broker through flux start, which splits broker
	// options at commas.
	if strings.Contains(names.MountPath(mc), ",") {
		return fmt.Errorf("spec.flux.container.mountPath %q: a comma cannot be passed to the broker", names.MountPath(mc))
	}
	// The schema refuses white space in the mount path too; a MiniCluster stored before it did
	// would start a lead broker whose rc1 fails, and restarts, forever: flux-core loads the
	// crontabs of the cron directory (under the mount path) with a shell command that splits
	// their paths at blanks.
	if strings.ContainsFunc(names.MountPath(mc), unicode.IsSpace) {
		return fmt.Errorf("spec.flux.container.mountPath %q: Flux's startup scripts split paths at white space", names.MountPath(mc))
	}
	if strings.Contains(mc.Spec.Archive.Path, ",") {
		return fmt.Errorf("spec.archive.path %q: a comma cannot be passed to the broker", mc.Spec.Archive.Path)
	}
	return nil
}

func execute(name string, data any) (string, error) {
	var b bytes.Buffer
	if err := templates.ExecuteTemplate(&b, name, data); err != nil {
		return "", fmt.Errorf("rendering %s: %w", name, err)
	}
	return b.String(), nil
}

// hook is a snippet from the spec, stored in the script as fluxfed_<Var>.
type hook struct {
	Var  string
	Code string
}

type envVar struct {
	Name  string
	Value string
}

// common holds what every script template needs.
type common struct {
	MiniCluster string
	Container   string
	Strict      bool
	Quiet       bool
	Hooks       []hook
	HookSet     map[string]bool
}

func newCommon(mc *fluxv1alpha2.MiniCluster, container string, hooks ...hook) common {
	c := common{
		MiniCluster: mc.Name,
		Container:   container,
		Strict:      mc.Spec.Logging.Strict,
		Quiet:       mc.Spec.Logging.Quiet,
		HookSet:     map[string]bool{},
	}
	for _, h := range hooks {
		// Every hook the template may ask about is in the set, so that a misspelt one is a
		// template error instead of a silently skipped snippet.
		c.HookSet[h.Var] = false
		if strings.TrimSpace(h.Code) == "" {
			continue
		}
		c.Hooks = append(c.Hooks, h)
		c.HookSet[h.Var] = true
	}
	return c
}

// view holds what the scripts of broker-pod containers need to find Flux.
type view struct {
	// Sidecar is set for a container that does not run Flux, where a view that cannot be
	// staged is a warning instead of an error.
	Sidecar bool
	View    bool
	// Fluxion is false with flux.scheduler.simple: the view's Fluxion modules and commands are
	// still found, but its rc and modprobe files, which would load it, are not.
	Fluxion    bool
	MountPath  string
	ViewRoot   string
	PythonPath string
}

func newView(mc *fluxv1alpha2.MiniCluster) view {
	m := names.MountPath(mc)
	return view{
		View:       !mc.Spec.Flux.Container.Disable,
		Fluxion:    !mc.Spec.Flux.Scheduler.Simple,
		MountPath:  m,
		ViewRoot:   m + "/view",
		PythonPath: mc.Spec.Flux.Container.PythonPath,
	}
}

type provisioner struct {
	view
	MiniCluster     string
	Container       string
	Quiet           bool
	ConfigMountPath string
	CurveMountPath  string
	KeyBrokerTOML   string
	KeyHostlist     string
	KeyCurveCert    string
	FluxViewSh      string
}

func provisionerData(mc *fluxv1alpha2.MiniCluster) provisioner {
	name := mc.Spec.Flux.Container.Name
	if name == "" {
		name = "flux-view"
	}
	v := newView(mc)
	return provisioner{
		view:            v,
		MiniCluster:     mc.Name,
		Container:       name,
		Quiet:           mc.Spec.Logging.Quiet,
		ConfigMountPath: names.ConfigMountPath,
		CurveMountPath:  names.CurveMountPath,
		KeyBrokerTOML:   names.KeyBrokerTOML,
		KeyHostlist:     names.KeyHostlist,
		KeyCurveCert:    names.KeyCurveCert,
		FluxViewSh:      fluxViewSh(mc, v),
	}
}

// viewEnvPath is the file, under the mount path, where the entrypoint writes the variables that
// tell flux-core where the view's other packages (Fluxion) are, for flux-view.sh to source.
const viewEnvPath = "/fluxfed/view-env.sh"

// fluxViewSh is the file users source to use the instance from a shell in a broker pod, as
// with the Flux Operator: '. M/flux-view.sh && flux proxy $fluxsocket bash'.
func fluxViewSh(mc *fluxv1alpha2.MiniCluster, v view) string {
	var b strings.Builder
	b.WriteString("# Source this file to use the MiniCluster's Flux from a shell in this pod, then\n")
	b.WriteString("# connect to the instance with: flux proxy \"$fluxsocket\" bash\n")
	fmt.Fprintf(&b, "fluxfed_viewroot=%s\n", Quote(v.ViewRoot))
	if v.View {
		b.WriteString("export PATH=\"${PATH:+$PATH:}$fluxfed_viewroot/bin\"\n")
		if v.PythonPath != "" {
			fmt.Fprintf(&b, "export PYTHONPATH=\"${PYTHONPATH:+$PYTHONPATH:}\"%s\n", Quote(v.PythonPath))
		} else {
			b.WriteString("for fluxfed_site in \"$fluxfed_viewroot\"/lib/python3*/site-packages; do\n")
			b.WriteString("\tif [ -d \"$fluxfed_site\" ]; then export PYTHONPATH=\"${PYTHONPATH:+$PYTHONPATH:}$fluxfed_site\"; fi\n")
			b.WriteString("done\nunset fluxfed_site\n")
		}
		b.WriteString("export LD_LIBRARY_PATH=\"${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$fluxfed_viewroot/lib\"\n")
		// Where flux-core finds Fluxion in the view, as the entrypoint found it (view-env).
		fmt.Fprintf(&b, "if [ -r %[1]s ]; then . %[1]s; fi\n", Quote(v.MountPath+viewEnvPath))
	}
	if !mc.Spec.Flux.DisableSocket {
		b.WriteString("export fluxsocket=\"local://$fluxfed_viewroot/run/flux/local\"\n")
	}
	return b.String()
}

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

// JobStatusMessage is the termination message of the lead broker's container once its job
// ended, with the job's exit status; the MiniCluster's status reads it back.
const JobStatusMessage = "the job exited with status %d"

// recordStatus is the lead broker's initial program around the job: it runs the job (its
// arguments after the status file) and writes the job's exit status to the status file, which
// a job stopped by a signal never reaches. It writes it only if the broker still answers: when
// the broker dies (a crash), this program outlives it, and flux submit --watch, having lost its
// broker, exits 0 although the job never ended (flux-core 0.88.0). A status left unwritten
// means a job that did not end: the lead starts its broker again, or fails.
const recordStatus = `fluxfed_job_rc=0; "${@:2}" || fluxfed_job_rc=$?; ` +
	`if flux getattr rank >/dev/null 2>&1; then printf '%s\n' "$fluxfed_job_rc" >"$1.new" && mv -f "$1.new" "$1"; ` +
	`else echo "fluxfed: the broker went away before the job ended; its status is not recorded" >&2; fi; exit "$fluxfed_job_rc"`

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

// recordingStatus returns the initial program that runs job and keeps its exit status in the
// pod's volume under mount path m (recordStatus).
func recordingStatus(m string, job []string) []string {
	return append([]string{"bash", "-c", recordStatus, "fluxfed-job", m + jobStatusPath}, job...)
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

// jobFlags are the node and task counts, flux.optionFlags and the debug verbosity of the
// lead broker's flux submit or flux batch. The counts follow the spec: tasks defaults to 1
// (-n 1), tasks larger than size gives -N <size> -n <tasks>, and tasks 0 gives -N <size>.
func jobFlags(mc *fluxv1alpha2.MiniCluster, field string) ([]string, error) {
	size := max(mc.Spec.Size, 1)
	tasks := int32(1)
	if mc.Spec.Tasks != nil {
		tasks = *mc.Spec.Tasks
	}
	n := strconv.Itoa(int(size))
	var flags []string
	switch {
	case tasks == 0:
		flags = []string{"-N", n}
	case tasks > size:
		flags = []string{"-N", n, "-n", strconv.Itoa(int(tasks))}
	default:
		flags = []string{"-n", strconv.Itoa(int(tasks))}
	}
	opts, err := splitWords(mc.Spec.Flux.OptionFlags)
	if err != nil {
		return nil, fmt.Errorf("spec.flux.optionFlags (for %s): %w", field, err)
	}
	flags = append(flags, opts...)
	if mc.Spec.Logging.Debug {
		flags = append(flags, "-vvv")
	}
	return flags, nil
}

// batchScript is the script the lead broker gives to flux batch. Each non-blank line of the
// command is one job, submitted with its output in outputDir/job-<n>.{out,err}, numbered from 0
// in the order given; batchRaw keeps the command as it is, for scripts that call Flux
// themselves.
func batchScript(command string, raw bool, outputDir string) string {
	var b strings.Builder
	if !strings.HasPrefix(command, "#!") {
		b.WriteString("#!/bin/bash\n")
	}
	if raw {
		b.WriteString(command)
		if !strings.HasSuffix(command, "\n") {
			b.WriteString("\n")
		}
		return b.String()
	}
	n := 0
	for _, line := range strings.Split(command, "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#!") {
			continue
		}
		fmt.Fprintf(&b, "flux submit --flags waitable %s %s %s\n",
			Quote(fmt.Sprintf("--error=%s/job-%d.err", outputDir, n)),
			Quote(fmt.Sprintf("--output=%s/job-%d.out", outputDir, n)),
			line)
		n++
	}
	b.WriteString("flux queue idle\n")
	b.WriteString("flux jobs -a\n")
	return b.String()
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

type sidecar struct {
	common
	view
	Command    string
	Socket     bool
	SocketPath string
	WaitSocket bool
}

func sidecarData(mc *fluxv1alpha2.MiniCluster, i int) sidecar {
	c := &mc.Spec.Containers[i]
	v := newView(mc)
	v.Sidecar = true
	return sidecar{
		common: newCommon(mc, names.ContainerName(mc, i),
			hook{"init", c.Commands.Init},
			hook{"servicePre", c.Commands.ServicePre},
			hook{"post", c.Commands.Post},
		),
		view:       v,
		Command:    c.Command,
		Socket:     !mc.Spec.Flux.DisableSocket,
		SocketPath: v.ViewRoot + "/run/flux/local",
		WaitSocket: !mc.Spec.Flux.NoWaitSocket,
	}
}

type service struct {
	common
	Command string
}

func serviceData(mc *fluxv1alpha2.MiniCluster, i int) service {
	c := &mc.Spec.Services[i]
	return service{
		common: newCommon(mc, c.Name,
			hook{"init", c.Commands.Init},
			hook{"servicePre", c.Commands.ServicePre},
			hook{"post", c.Commands.Post},
		),
		Command: c.Command,
	}
}
