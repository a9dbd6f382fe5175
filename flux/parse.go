package flux

import (
	"encoding/json"
	"fmt"
	"iter"
	"strconv"
	"strings"

	"github.com/fluxfed/fluxfed/hostlist"
)

// maxOutput bounds the output a parser reads: a root of 65536 ranks prints far less in every
// format here, and a hub must not hold a runaway command's output.
const maxOutput = 8 << 20

func tooLong(what string, n int) error {
	if n > maxOutput {
		return fmt.Errorf("%s: %d bytes of output, more than the %d read", what, n, maxOutput)
	}
	return nil
}

// Uptime is what flux uptime says of the instance.
type Uptime struct {
	// State is the broker state of rank 0: "run" once the instance works; "quorum" while it
	// waits for its first brokers; others while it starts or stops (join, init, cleanup,
	// shutdown, finalize, goodbye, exit).
	State string
	// Size is the number of ranks of the instance, reserved ones included.
	Size int
	// Drained is the number of ranks drained or draining, and Offline those not online; both
	// are only counted in state run.
	Drained, Offline int
	// SubmitDisabled and SchedulerStopped report the second line: every queue is disabled
	// (flux queue disable: no job can be submitted), or stopped (flux queue stop: jobs are
	// accepted and wait, none is given resources).
	SubmitDisabled, SchedulerStopped bool
}

// ParseUptime parses the output of flux uptime.
func ParseUptime(out string) (Uptime, error) {
	if err := tooLong("flux uptime", len(out)); err != nil {
		return Uptime{}, err
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) > 2 || lines[0] == "" {
		return Uptime{}, fmt.Errorf("flux uptime: want one or two lines, got %q", out)
	}
	bad := func(reason string) error { return fmt.Errorf("flux uptime: %s in %q", reason, lines[0]) }
	fields := strings.Split(strings.TrimPrefix(lines[0], " "), ",  ")
	if len(fields) < 4 {
		return Uptime{}, bad("want time, state and duration, owner, depth and size")
	}
	head := strings.Fields(fields[0])
	if len(head) != 3 {
		return Uptime{}, bad("want the time, the broker state and its duration first")
	}
	u := Uptime{State: head[1]}
	if !isWord(u.State) {
		return Uptime{}, bad("the broker state is not a word")
	}
	if !strings.HasPrefix(fields[1], "owner ") || !strings.HasPrefix(fields[2], "depth ") {
		return Uptime{}, bad("want owner and depth")
	}
	size, ok := strings.CutPrefix(fields[3], "size ")
	if !ok {
		return Uptime{}, bad("want the size")
	}
	var err error
	if u.Size, err = count(size); err != nil {
		return Uptime{}, bad("size " + err.Error())
	}
	for _, f := range fields[4:] {
		n, what, _ := strings.Cut(f, " ")
		v, err := count(n)
		if err != nil {
			return Uptime{}, bad(fmt.Sprintf("%q: %v", f, err))
		}
		switch what {
		case "drained":
			u.Drained = v
		case "offline":
			u.Offline = v
		default:
			return Uptime{}, bad(fmt.Sprintf("unknown count %q", f))
		}
	}
	if len(lines) == 2 {
		for f := range strings.SplitSeq(strings.TrimPrefix(lines[1], "  "), ",  ") {
			switch f {
			case "submit disabled":
				u.SubmitDisabled = true
			case "scheduler stopped", "scheduler disabled":
				// flux-core 0.88.0 prints "scheduler stopped" (src/cmd/builtin/uptime.c); older
				// releases said "scheduler disabled" for the same state.
				u.SchedulerStopped = true
			default:
				return Uptime{}, fmt.Errorf("flux uptime: unknown %q in the second line %q", f, lines[1])
			}
		}
	}
	return u, nil
}

// lines yields the lines of out that are not empty.
func lines(out string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for line := range strings.SplitSeq(out, "\n") {
			if line != "" && !yield(line) {
				return
			}
		}
	}
}

// count parses a non-negative count no larger than a rank.
func count(s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a count", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > maxRank {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return n, nil
}

func isWord(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// ResourceGroup is one line of flux resource status: ranks in one state.
type ResourceGroup struct {
	// State is avail, exclude, draining, drained, or another word flux adds; without the '*'.
	State string
	// Online is false for ranks whose broker is not online ('*' after the state, '✗').
	Online bool
	// Ranks and Hosts are the group's ranks and their hostnames, in order.
	Ranks []int
	Hosts []string
}

// ResourceStatusCommand is the flux resource status invocation ParseResourceStatus reads.
var ResourceStatusCommand = []string{"flux", "resource", "status", "-n", "-o", "{state} {up} {nnodes} {ranks} {nodelist}"}

// ParseResourceStatus parses the output of ResourceStatusCommand.
func ParseResourceStatus(out string) ([]ResourceGroup, error) {
	if err := tooLong("flux resource status", len(out)); err != nil {
		return nil, err
	}
	var groups []ResourceGroup
	for line := range lines(out) {
		bad := func(reason string) error { return fmt.Errorf("flux resource status: %s in %q", reason, line) }
		f := strings.Split(line, " ")
		if len(f) != 5 {
			return nil, bad("want state, up, nnodes, ranks and nodelist")
		}
		g := ResourceGroup{}
		state, offline := strings.CutSuffix(f[0], "*")
		g.State = state
		if !isWord(state) {
			return nil, bad("the state is not a word")
		}
		switch f[1] {
		case "✔":
			g.Online = true
		case "✗":
		default:
			return nil, bad("up is neither ✔ nor ✗")
		}
		if offline == g.Online {
			return nil, bad("the state's '*' and up disagree")
		}
		n, err := count(f[2])
		if err != nil {
			return nil, bad("nnodes " + err.Error())
		}
		if g.Ranks, err = ParseIDSet(f[3]); err != nil {
			return nil, bad(err.Error())
		}
		if g.Hosts, err = hostlist.Expand(f[4]); err != nil {
			return nil, bad(err.Error())
		}
		if len(g.Ranks) != n || len(g.Hosts) != n {
			return nil, bad(fmt.Sprintf("%d nodes, but %d ranks and %d hosts", n, len(g.Ranks), len(g.Hosts)))
		}
		groups = append(groups, g)
	}
	return groups, nil
}

// Job is one job of flux jobs --json.
type Job struct {
	// ID is the job's ID in F58 ("ƒ2dYwCQX").
	ID string
	// State is DEPEND, PRIORITY or SCHED while it waits (SCHED: for resources), RUN while it
	// runs, CLEANUP after it ran.
	State string
	// Nodes is the number of nodes it asked for; 0 when it asked for tasks or cores only.
	Nodes int
	// Tasks is the number of tasks it asked for.
	Tasks int
	// Ranks are the ranks it runs on, once it runs.
	Ranks []int
	// Submitted is when it was submitted, in seconds since the epoch.
	Submitted float64
}

// JobsCommand is the flux jobs invocation ParseJobs reads: every user's pending and running jobs.
var JobsCommand = []string{"flux", "jobs", "-A", "--json", "-f", "pending,running"}

// ParseJobs parses the output of JobsCommand.
func ParseJobs(out []byte) ([]Job, error) {
	if err := tooLong("flux jobs", len(out)); err != nil {
		return nil, err
	}
	var doc struct {
		Jobs *[]struct {
			JobID   string   `json:"jobid"`
			State   string   `json:"state"`
			NNodes  *int     `json:"nnodes"`
			NTasks  *int     `json:"ntasks"`
			Ranks   *string  `json:"ranks"`
			TSubmit *float64 `json:"t_submit"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("flux jobs --json: %w", err)
	}
	if doc.Jobs == nil {
		return nil, fmt.Errorf("flux jobs --json: no jobs array in %.200q", out)
	}
	jobs := make([]Job, 0, len(*doc.Jobs))
	for i, j := range *doc.Jobs {
		bad := func(reason string) error { return fmt.Errorf("flux jobs --json: job %d (%q): %s", i, j.JobID, reason) }
		if j.JobID == "" || !isUpperWord(j.State) {
			return nil, bad("no jobid or state")
		}
		job := Job{ID: j.JobID, State: j.State}
		if j.NNodes != nil {
			if job.Nodes = *j.NNodes; job.Nodes < 0 || job.Nodes > maxRank {
				return nil, bad(fmt.Sprintf("nnodes %d is out of range", job.Nodes))
			}
		}
		if j.NTasks != nil {
			if job.Tasks = *j.NTasks; job.Tasks < 0 {
				return nil, bad(fmt.Sprintf("ntasks %d is negative", job.Tasks))
			}
		}
		if j.Ranks != nil {
			ranks, err := ParseIDSet(*j.Ranks)
			if err != nil {
				return nil, bad(err.Error())
			}
			job.Ranks = ranks
		}
		if j.TSubmit != nil {
			job.Submitted = *j.TSubmit
		}
		jobs = append(jobs, job)
	}
	return jobs, nil
}

func isUpperWord(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}

// OverlayRank is one line of flux overlay status --no-pretty --no-ghost.
type OverlayRank struct {
	Rank int
	Host string
	// Status is full, partial, degraded, offline or lost.
	Status string
	// Detail follows the status, for example "administrative shutdown" after a clean leave.
	Detail string
}

// OverlayStatusCommand is the flux overlay status invocation ParseOverlayStatus reads.
var OverlayStatusCommand = []string{"flux", "overlay", "status", "--no-pretty", "--no-ghost"}

// ParseOverlayStatus parses the output of OverlayStatusCommand.
func ParseOverlayStatus(out string) ([]OverlayRank, error) {
	if err := tooLong("flux overlay status", len(out)); err != nil {
		return nil, err
	}
	var ranks []OverlayRank
	for line := range lines(out) {
		bad := func(reason string) error { return fmt.Errorf("flux overlay status: %s in %q", reason, line) }
		rank, rest, ok := strings.Cut(line, " ")
		if !ok {
			return nil, bad("want a rank, a host and a status")
		}
		host, rest, ok := strings.Cut(rest, ": ")
		if !ok || host == "" || strings.ContainsAny(host, " :") {
			return nil, bad("want '<host>: ' after the rank")
		}
		r, err := count(rank)
		if err != nil {
			return nil, bad("rank " + err.Error())
		}
		status, detail, _ := strings.Cut(rest, " ")
		switch status {
		case "full", "partial", "degraded", "offline", "lost":
		default:
			return nil, bad(fmt.Sprintf("unknown status %q", status))
		}
		ranks = append(ranks, OverlayRank{Rank: r, Host: host, Status: status, Detail: detail})
	}
	return ranks, nil
}

// Drain is one line of flux resource drain: ranks drained for one reason.
type Drain struct {
	// Since is when the ranks were drained, in seconds since the epoch.
	Since float64
	// State is draining (jobs still run there) or drained; Online is false when it had a '*'.
	State  string
	Online bool
	Ranks  []int
	Hosts  []string
	Reason string
}

// DrainCommand is the flux resource drain invocation ParseDrain reads.
var DrainCommand = []string{"flux", "resource", "drain", "-n", "-o", "{timestamp} {state} {ranks} {nodelist} {reason}"}

// ParseDrain parses the output of DrainCommand.
func ParseDrain(out string) ([]Drain, error) {
	if err := tooLong("flux resource drain", len(out)); err != nil {
		return nil, err
	}
	var drains []Drain
	for line := range lines(out) {
		bad := func(reason string) error { return fmt.Errorf("flux resource drain: %s in %q", reason, line) }
		f := strings.SplitN(line, " ", 5)
		if len(f) < 4 {
			return nil, bad("want timestamp, state, ranks, nodelist and reason")
		}
		d := Drain{}
		var err error
		if d.Since, err = strconv.ParseFloat(f[0], 64); err != nil {
			return nil, bad("the timestamp is not a number")
		}
		state, offline := strings.CutSuffix(f[1], "*")
		d.State, d.Online = state, !offline
		if state != "draining" && state != "drained" {
			return nil, bad(fmt.Sprintf("unknown state %q", f[1]))
		}
		if d.Ranks, err = ParseIDSet(f[2]); err != nil {
			return nil, bad(err.Error())
		}
		if d.Hosts, err = hostlist.Expand(f[3]); err != nil {
			return nil, bad(err.Error())
		}
		if len(d.Hosts) != len(d.Ranks) {
			return nil, bad(fmt.Sprintf("%d ranks but %d hosts", len(d.Ranks), len(d.Hosts)))
		}
		if len(f) == 5 {
			d.Reason = f[4]
		}
		drains = append(drains, d)
	}
	return drains, nil
}
