package flux

import (
	"fmt"
	"strings"
)

// Separator is the line ObserveCommand prints between the outputs of its flux commands.
const Separator = "--- fluxfed"

// prelude makes the flux of a MiniCluster's broker container reachable, as a user of the
// container does: it sources the flux-view.sh the MiniCluster's init container writes (PATH,
// PYTHONPATH and LD_LIBRARY_PATH of the flux view, and $fluxsocket, the broker's local URI),
// when it exists, and points FLUX_URI at the socket. Its first argument is the file.
const prelude = `f=$1; shift; if [ -r "$f" ]; then . "$f"; fi; if [ -n "${fluxsocket:-}" ]; then FLUX_URI=$fluxsocket; export FLUX_URI; fi; `

// observeScript prints flux uptime and, once the instance runs, the outputs ParseObservation
// reads, separated by Separator lines. flux uptime is asked again after the jobs, for the
// state of the queue: a job listed is then never read with the queue as it was before the job
// was submitted (an administrator's flux queue stop, then flux submit, while the hub asked).
var observeScript = `u=$(flux uptime) || exit; printf '%s\n' "$u"; case "$u" in *" run "*) ;; *) exit 0 ;; esac; ` +
	`echo '` + Separator + `'; ` + shell(ResourceStatusCommand) + ` || exit; ` +
	`echo '` + Separator + `'; ` + shell(DrainCommand) + ` || exit; ` +
	`echo '` + Separator + `'; ` + shell(JobsCommand) + ` || exit; ` +
	`echo '` + Separator + `'; exec flux uptime`

// shell writes argv as a shell command line; every argument is single-quoted but plain words.
func shell(argv []string) string {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-,") == "" {
			quoted[i] = a
		} else {
			quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(quoted, " ")
}

// viewFile is the file of the MiniCluster's flux view in its mount path.
func viewFile(mountPath string) string { return strings.TrimSuffix(mountPath, "/") + "/flux-view.sh" }

// ObserveCommand is the command the hub runs in the container of a root's lead broker to see
// the instance as rank 0 does: mountPath is the MiniCluster's spec.flux.container.mountPath
// (/mnt/flux by default). Its output is ParseObservation's input.
func ObserveCommand(mountPath string) []string {
	return []string{"sh", "-c", prelude + observeScript, "fluxfed", viewFile(mountPath)}
}

// Command is argv run as a flux command in the container of a root's lead broker, reaching the
// instance as ObserveCommand does: Command(m, "flux", "resource", "undrain", "2-3").
func Command(mountPath string, argv ...string) []string {
	return append([]string{"sh", "-c", prelude + `exec "$@"`, "fluxfed", viewFile(mountPath)}, argv...)
}

// DrainReason is the reason fluxfed gives the ranks it drains; it undrains no others.
const DrainReason = "fluxfed: burst scaling down"

// DrainArgs and UndrainArgs drain ranks for a scale-down and give them back to the scheduler.
func DrainArgs(ranks []int) []string {
	return []string{"flux", "resource", "drain", FormatIDSet(ranks, false), DrainReason}
}

// UndrainArgs gives ranks back to the scheduler.
func UndrainArgs(ranks []int) []string {
	return []string{"flux", "resource", "undrain", FormatIDSet(ranks, false)}
}

// ParseObservation reads the output of ObserveCommand. The queue's state (SubmitDisabled,
// SchedulerStopped) is the second flux uptime's, asked after the jobs.
func ParseObservation(out string) (*View, error) {
	parts := strings.Split(out, Separator+"\n")
	switch len(parts) {
	case 1:
		return NewView(parts[0], "", nil, "")
	case 5:
		v, err := NewView(parts[0], parts[1], []byte(parts[3]), parts[2])
		if err != nil {
			return nil, err
		}
		after, err := ParseUptime(parts[4])
		if err != nil {
			return nil, fmt.Errorf("the flux uptime after the jobs: %w", err)
		}
		v.Uptime.SubmitDisabled, v.Uptime.SchedulerStopped = after.SubmitDisabled, after.SchedulerStopped
		return v, nil
	}
	return nil, fmt.Errorf("the observation has %d parts, want 1 (before state run) or 5: %.300q", len(parts), out)
}

// FollowReady is the line FollowCommand prints once it follows both of the instance's journals:
// from then on, every change of a job's state or of the resources is told by a line.
const FollowReady = "ready"

// FollowedJobEvents are the job events FollowCommand tells: a job waits for resources
// (priority), gets them (alloc), gives them back (free), or is gone (clean). The job manager
// sends no others to it.
var FollowedJobEvents = []string{"priority", "alloc", "free", "clean"}

// followScript follows the job manager's journal (only FollowedJobEvents) and the resource
// journal from now on: it prints FollowReady once both have sent their backlog, then
// "job NAME" or "resource NAME" for each event, and ends with an error when either journal
// ends or standard output is gone. The backlog (the events of the jobs alive and the
// resource eventlog so far) is skipped: it is what the hub reads when it asks.
var followScript = `import os, sys, flux
from flux.constants import FLUX_RPC_STREAMING
h = flux.Flux()
caught = []
def follow(f, journal):
    try:
        r = f.get()
    except OSError as e:
        print(f"flux: the {journal} journal ended: {e.strerror}", file=sys.stderr)
        os._exit(1)
    f.reset()
    if journal not in caught:
        if r.get("id", -1) == -1 and not r["events"]:
            caught.append(journal)
            if len(caught) == 2:
                print("` + FollowReady + `", flush=True)
        return
    for e in r["events"]:
        print(journal, e["name"], flush=True)
h.rpc("job-manager.events-journal", {"allow": {` + allowList() + `}}, 0, FLUX_RPC_STREAMING).then(follow, "job")
h.rpc("resource.journal", {}, 0, FLUX_RPC_STREAMING).then(follow, "resource")
h.reactor_run()
`

func allowList() string {
	entries := make([]string, len(FollowedJobEvents))
	for i, name := range FollowedJobEvents {
		entries[i] = fmt.Sprintf("%q: 1", name)
	}
	return strings.Join(entries, ", ")
}

// FollowArgs is the flux command FollowCommand runs: flux python with followScript.
func FollowArgs() []string { return []string{"flux", "python", "-c", followScript} }

// FollowCommand is the command the hub leaves running in the container of a root's lead broker
// to hear of every change in the instance as it happens (docs/bursting.md): it prints
// FollowReady, then one line per job or resource event, and runs until the instance or the
// exec session ends. A line says that something changed, not what: the hub asks
// (ObserveCommand) to learn what.
func FollowCommand(mountPath string) []string { return Command(mountPath, FollowArgs()...) }
