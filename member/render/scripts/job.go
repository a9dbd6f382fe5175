package scripts

import (
	"fmt"
	"strconv"
	"strings"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// This file is the lead broker's job: the flux submit or flux batch it runs as its initial
// program, and the exit status it records for the MiniCluster's status.

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

// recordingStatus returns the initial program that runs job and keeps its exit status in the
// pod's volume under mount path m (recordStatus).
func recordingStatus(m string, job []string) []string {
	return append([]string{"bash", "-c", recordStatus, "fluxfed-job", m + jobStatusPath}, job...)
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
