package fluxsim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/fluxfed/fluxfed/flux"
	"github.com/fluxfed/fluxfed/hostlist"
)

// Job states, as flux jobs prints them. A job leaves the listing once Inactive.
const (
	StateSched    = "SCHED"
	StateRun      = "RUN"
	StateCleanup  = "CLEANUP"
	StateInactive = "INACTIVE"
)

// CleanupSeconds is how long a job that lost a rank stays in CLEANUP, holding its other ranks,
// before it ends: job-exec waits five times its kill-timeout (5 s by default) for the lost
// rank's job shell before it gives up on it, as measured on flux-core 0.88.0
// (e2e/realflux: TestTheStandInPrintsWhatRealFluxPrints).
const CleanupSeconds = 25

// Instance is the state of one simulated Flux instance. Times are seconds since the Unix epoch,
// as Flux gives them.
type Instance struct {
	// Hosts are the instance's hosts in rank order, as its rank 0's bootstrap lists them.
	Hosts []string `json:"hosts"`
	// Quorum is how many ranks must be online for the instance to run (broker.quorum).
	Quorum int `json:"quorum"`
	// Cores is the number of cores of every rank.
	Cores int `json:"cores"`
	// Owner and UserID name the instance owner and the user that submits jobs.
	Owner  string `json:"owner"`
	UserID int    `json:"userid"`
	// Start is broker.starttime; Now, when set, is the time of the last change.
	Start float64 `json:"start"`
	Now   float64 `json:"now"`
	// QuorumSince is when rank 0 came online; the instance runs from when the quorum is reached.
	QuorumSince float64 `json:"quorumSince,omitempty"`
	// Online are the ranks whose brokers joined rank 0, ascending.
	Online []int `json:"online"`
	// Drained holds the ranks drained with flux resource drain, by rank.
	Drained map[int]Drain `json:"drained,omitempty"`
	// Jobs are every job submitted, in submission order.
	Jobs []Job `json:"jobs"`
	// Killed counts the jobs that lost a rank while they ran.
	Killed int `json:"killed"`
	// Seq numbers the jobs.
	Seq uint64 `json:"seq"`
}

// Drain is why and since when a rank is drained.
type Drain struct {
	Time   float64 `json:"time"`
	Reason string  `json:"reason"`
}

// Job is one job of the simulated queue.
type Job struct {
	ID   uint64   `json:"id"`
	Name string   `json:"name"`
	Args []string `json:"args"`
	Cwd  string   `json:"cwd"`
	// NNodes and NTasks are what the job asked for; TasksGiven says -n was given, so that
	// ntasks was not derived from the nodes.
	NNodes     int  `json:"nnodes"`
	NTasks     int  `json:"ntasks"`
	TasksGiven bool `json:"tasksGiven,omitempty"`
	// Seconds is how long the job runs once started.
	Seconds float64 `json:"seconds"`
	State   string  `json:"state"`
	// TSubmit, TRun, TCleanup and TInactive are when the job entered each state; TDepend,
	// TPriority and TSched when it passed the steps between submission and SCHED.
	TSubmit   float64 `json:"t_submit"`
	TDepend   float64 `json:"t_depend"`
	TPriority float64 `json:"t_priority"`
	TSched    float64 `json:"t_sched"`
	TRun      float64 `json:"t_run,omitempty"`
	TCleanup  float64 `json:"t_cleanup,omitempty"`
	TInactive float64 `json:"t_inactive,omitempty"`
	// Ranks are the ranks it runs on, once it runs.
	Ranks []int `json:"ranks,omitempty"`
	// Killed is set when a rank of the job went offline while it ran.
	Killed bool `json:"killed,omitempty"`
}

// New returns an instance of hosts, none online yet, that runs once quorum ranks are.
func New(hosts []string, quorum, cores int, now float64) (*Instance, error) {
	switch {
	case len(hosts) == 0:
		return nil, errors.New("fluxsim: an instance needs hosts")
	case quorum < 1 || quorum > len(hosts):
		return nil, fmt.Errorf("fluxsim: quorum %d is not in 1-%d", quorum, len(hosts))
	case cores < 1:
		return nil, fmt.Errorf("fluxsim: %d cores per rank", cores)
	}
	return &Instance{Hosts: slices.Clone(hosts), Quorum: quorum, Cores: cores, Owner: "root", Start: now, Now: now}, nil
}

// Running reports whether the instance is in state run: rank 0 online with its quorum.
func (in *Instance) Running() bool {
	return slices.Contains(in.Online, 0) && len(in.Online) >= in.Quorum
}

// Size is the number of ranks.
func (in *Instance) Size() int { return len(in.Hosts) }

// Advance brings the instance to now: the jobs that ended meanwhile end when they ended, and
// the queue is scheduled at each of those times. A time before the last change counts as the
// last change.
func (in *Instance) Advance(now float64) {
	if now < in.Now {
		now = in.Now
	}
	for {
		j, at := in.nextEnd()
		if j == nil || at > now {
			break
		}
		in.end(j, at)
		in.schedule(at)
	}
	in.schedule(now)
	in.Now = now
}

// nextEnd returns the job that ends first, and when.
func (in *Instance) nextEnd() (*Job, float64) {
	var first *Job
	at := math.Inf(1)
	for i := range in.Jobs {
		j := &in.Jobs[i]
		var t float64
		switch j.State {
		case StateRun:
			t = j.TRun + j.Seconds
		case StateCleanup:
			t = j.TCleanup + CleanupSeconds
		default:
			continue
		}
		if t < at {
			first, at = j, t
		}
	}
	return first, at
}

// end makes j inactive at t.
func (in *Instance) end(j *Job, t float64) {
	j.State, j.TInactive = StateInactive, t
}

// schedule starts, at t, the jobs at the head of the queue that the free ranks can run, first
// come first served: a job that cannot run blocks those behind it, as sched-simple's default
// policy does.
func (in *Instance) schedule(t float64) {
	if !in.Running() {
		return
	}
	for i := range in.Jobs {
		j := &in.Jobs[i]
		if j.State != StateSched {
			continue
		}
		free := in.free()
		if len(free) < j.NNodes {
			return
		}
		j.State, j.TRun, j.Ranks = StateRun, t, free[:j.NNodes]
	}
}

// free returns the online ranks that are neither drained nor held by a job, ascending.
func (in *Instance) free() []int {
	held := in.held()
	var out []int
	for _, r := range in.Online {
		if _, drained := in.Drained[r]; !drained && !held[r] {
			out = append(out, r)
		}
	}
	return out
}

// held returns the ranks that a running or cleaning-up job holds.
func (in *Instance) held() map[int]bool {
	out := map[int]bool{}
	for _, j := range in.Jobs {
		if j.State == StateRun || j.State == StateCleanup {
			for _, r := range j.Ranks {
				out[r] = true
			}
		}
	}
	return out
}

// SetOnline says, at now, which ranks joined rank 0. A running job that loses a rank is
// killed and counted in Killed: it ends at once when it lost every rank, and otherwise stays in
// CLEANUP, holding its other ranks, for CleanupSeconds.
func (in *Instance) SetOnline(ranks []int, now float64) error {
	ranks = slices.Clone(ranks)
	slices.Sort(ranks)
	ranks = slices.Compact(ranks)
	for _, r := range ranks {
		if r < 0 || r >= in.Size() {
			return fmt.Errorf("fluxsim: rank %d is not in 0-%d", r, in.Size()-1)
		}
	}
	in.Advance(now)
	if slices.Contains(ranks, 0) && !slices.Contains(in.Online, 0) {
		in.QuorumSince = in.Now
	}
	for i := range in.Jobs {
		j := &in.Jobs[i]
		if j.State != StateRun {
			continue
		}
		lost := 0
		for _, r := range j.Ranks {
			if !slices.Contains(ranks, r) {
				lost++
			}
		}
		switch {
		case lost == 0:
			continue
		case lost == len(j.Ranks):
			// Nothing of it is left to clean up: it ends at once.
			j.State, j.TInactive = StateInactive, in.Now
		default:
			j.State, j.TCleanup = StateCleanup, in.Now
		}
		j.Killed = true
		in.Killed++
	}
	in.Online = ranks
	in.schedule(in.Now)
	return nil
}

// Submit queues a job at now and returns it. args is the command; a `sleep N` command runs N
// seconds. nnodes is at least 1; ntasks 0 means one per node.
func (in *Instance) Submit(args []string, nnodes, ntasks int, cwd string, now float64) (Job, error) {
	switch {
	case len(args) == 0:
		return Job{}, errors.New("job command and arguments are missing")
	case nnodes < 1:
		return Job{}, fmt.Errorf("the number of nodes (%d) must be at least 1", nnodes)
	case nnodes > in.Size():
		return Job{}, fmt.Errorf("unsatisfiable request: %d nodes requested, the instance has %d", nnodes, in.Size())
	case ntasks != 0 && ntasks < nnodes:
		return Job{}, fmt.Errorf("number of slots to allocate (%d) must be >= number of nodes (%d)", ntasks, nnodes)
	}
	in.Advance(now)
	j := Job{
		Name: pathBase(args[0]), Args: slices.Clone(args), Cwd: cwd,
		NNodes: nnodes, NTasks: ntasks, TasksGiven: ntasks != 0,
		State: StateSched, TSubmit: in.Now,
		// The job manager takes about this long through its steps.
		TDepend: in.Now + 0.0113, TPriority: in.Now + 0.0226, TSched: in.Now + 0.0227,
	}
	if !j.TasksGiven {
		j.NTasks = nnodes
	}
	if pathBase(args[0]) == "sleep" && len(args) > 1 {
		if s, err := strconv.ParseFloat(args[1], 64); err == nil && s >= 0 && !math.IsInf(s, 0) {
			j.Seconds = s
		}
	}
	in.Seq++
	j.ID = fluid(in.Now-in.Start, in.Seq)
	in.Jobs = append(in.Jobs, j)
	in.schedule(in.Now)
	return in.Jobs[len(in.Jobs)-1], nil
}

// fluid makes a job ID as Flux's FLUID generator lays it out: milliseconds since the instance
// started above 24 bits of generator and sequence.
func fluid(elapsed float64, seq uint64) uint64 {
	if elapsed < 0 {
		elapsed = 0
	}
	return uint64(elapsed*1000)<<24 | seq&0x3ff
}

func parseIDs(s string) ([]int, error) { return flux.ParseIDSet(s) }

func expand(s string) ([]string, error) { return hostlist.Expand(s) }

func pathBase(s string) string {
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// Drain drains ranks at now with reason; their running jobs go on. As flux resource drain
// without --force, it refuses, changing nothing, when a rank is drained already; with force, it
// gives drained ranks the new reason and keeps the time they were drained.
func (in *Instance) Drain(ranks []int, reason string, force bool, now float64) error {
	if err := in.check(ranks); err != nil {
		return err
	}
	if !force {
		var again []int
		for _, r := range ranks {
			if _, drained := in.Drained[r]; drained {
				again = append(again, r)
			}
		}
		if len(again) > 0 {
			return &Refusal{Errno: int(syscall.EEXIST), Message: fmt.Sprintf("%s %s already drained", plural("rank", len(again)), flux.FormatIDSet(again, false)),
				Info: "Use --force to overwrite existing drain reason"}
		}
	}
	in.Advance(now)
	if in.Drained == nil {
		in.Drained = map[int]Drain{}
	}
	for _, r := range ranks {
		d, ok := in.Drained[r]
		if !ok {
			d.Time = math.Floor(in.Now)
		}
		d.Reason = reason
		in.Drained[r] = d
	}
	return nil
}

// Undrain gives ranks back to the scheduler at now. As flux resource undrain, it refuses,
// changing nothing, when a rank is not drained.
func (in *Instance) Undrain(ranks []int, now float64) error {
	if err := in.check(ranks); err != nil {
		return err
	}
	var not []int
	for _, r := range ranks {
		if _, drained := in.Drained[r]; !drained {
			not = append(not, r)
		}
	}
	if len(not) > 0 {
		return &Refusal{Message: fmt.Sprintf("%s %s not drained", plural("rank", len(not)), flux.FormatIDSet(not, false))}
	}
	in.Advance(now)
	for _, r := range ranks {
		delete(in.Drained, r)
	}
	in.schedule(in.Now)
	return nil
}

// plural is word, with an s for n other than 1, as Flux's messages name ranks.
func plural(word string, n int) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func (in *Instance) check(ranks []int) error {
	if len(ranks) == 0 {
		return errors.New("no targets")
	}
	for _, r := range ranks {
		if r < 0 || r >= in.Size() {
			return fmt.Errorf("rank %d is not in the instance (0-%d)", r, in.Size()-1)
		}
	}
	return nil
}

// Ranks resolves targets as flux resource drain takes them: an idset of ranks ("2-3") or a
// hostlist of the instance's hosts ("burst-0-[0-1]").
func (in *Instance) Ranks(targets string) ([]int, error) {
	if ids, err := parseIDs(targets); err == nil {
		return ids, nil
	}
	hosts, err := expand(targets)
	if err != nil {
		return nil, fmt.Errorf("%s: not an idset or a hostlist", targets)
	}
	var out []int
	for _, h := range hosts {
		r := slices.Index(in.Hosts, h)
		if r < 0 {
			return nil, fmt.Errorf("%s: host %s is not in the instance", targets, h)
		}
		out = append(out, r)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
