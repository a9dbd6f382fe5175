package flux

import (
	"fmt"
	"time"

	"github.com/fluxfed/fluxfed/internal/text"
)

// Burst is one burst as the on-demand rule sees it: its reserved ranks, its floor and what runs.
type Burst struct {
	Name string
	// Start is its first rank; Reserved how many ranks it has from there.
	Start, Reserved int
	// Floor is the burst's spec size: it never runs fewer brokers.
	Floor int
	// Running is how many of its brokers run now: ranks Start .. Start+Running-1.
	Running int
}

// Step is what the rule decides for one burst.
type Step struct {
	Burst string
	// Size is the number of brokers the burst should run; equal to Running when only Drain or
	// Undrain is asked.
	Size int
	// Undrain are ranks of fluxfed's to give back to the scheduler before they run again;
	// Drain are ranks to drain before the burst shrinks.
	Undrain, Drain []int
	// Reason says why, with the demand.
	Reason string
}

// Idle tracks since when each rank has run no job. The rule never shrinks a burst by a rank
// that ran a job less than the idle time ago.
type Idle map[int]time.Time

// Observe records the ranks of v: an online rank that runs no job is idle since it was first
// seen so; a rank that runs a job, or is not online, has no idle time.
func (idle Idle) Observe(v *View, now time.Time) {
	for r, rank := range v.Ranks {
		if rank.Jobs > 0 || !rank.Online {
			delete(idle, r)
			continue
		}
		if _, ok := idle[r]; !ok {
			idle[r] = now
		}
	}
}

// Decide applies the on-demand rule to the instance v and its bursts, in declared order, and
// returns a step for every burst that must change. idle must have observed v.
//
// Up: when jobs wait for more nodes than the instance can use (online, not drained, not
// excluded, plus the ranks that run but have not joined yet), the missing ranks are taken, in the
// bursts' declared order, first from ranks fluxfed drained that still run (undrained), then from
// each burst's reserved ranks up to its maxSize (ranks fluxfed drained before they stopped are
// undrained before they start again). A burst never runs more than its reservation, and nothing
// grows for demand the whole instance cannot meet beyond its reservations.
//
// While Flux's scheduler is stopped (flux queue stop), nothing grows: waiting jobs wait for the
// administrator, not for nodes; idle bursts shrink as when nothing waits.
//
// Down: only when no job waits for nodes. A burst above its floor whose highest ranks have run no job for
// after is shrunk by those ranks: first they are drained in Flux (reason DrainReason); once Flux
// reports every one of them drained, and none runs a job, the burst runs that many fewer
// brokers. A rank that runs a job is never removed, so no job is killed. Ranks are removed from
// the top because a burst's Job removes its highest indexes.
//
// Each step follows from what Flux reports now, so the rule does not flap: a burst grows only
// for a job that cannot start, and shrinks only after ranks idled for after while nothing waited.
func Decide(v *View, bursts []Burst, idle Idle, now time.Time, after time.Duration) []Step {
	if v == nil || v.Uptime.State != "run" {
		return nil
	}
	d := v.Demand()
	usable := 0
	for _, r := range v.Ranks {
		if r.Usable() {
			usable++
		}
	}
	var steps []Step
	if v.waitsForNodes() {
		// Brokers started but not joined yet count as coming: do not ask for them twice.
		coming := 0
		for _, b := range bursts {
			for r := b.Start; r < b.Start+b.Running && r < len(v.Ranks); r++ {
				if !v.Ranks[r].Online && !ours(v.Ranks[r]) {
					coming++
				}
			}
		}
		missing := min(d.Nodes, len(v.Ranks)) - usable - coming
		for _, b := range bursts {
			if missing <= 0 {
				break
			}
			s := Step{Burst: b.Name, Size: b.Running}
			// Ranks fluxfed drained that still run: undrain them, the cheapest ranks there are.
			for r := b.Start; r < b.Start+b.Running && r < len(v.Ranks) && missing > 0; r++ {
				if ours(v.Ranks[r]) {
					s.Undrain = append(s.Undrain, r)
					missing--
				}
			}
			add := min(missing, b.Reserved-b.Running)
			for r := b.Start + b.Running; r < b.Start+b.Running+add && r < len(v.Ranks); r++ {
				if ours(v.Ranks[r]) {
					s.Undrain = append(s.Undrain, r)
				}
			}
			s.Size += max(add, 0)
			missing -= max(add, 0)
			if s.Size != b.Running || len(s.Undrain) > 0 {
				s.Reason = waitReason(d.Jobs, d.Nodes, usable)
				steps = append(steps, s)
			}
		}
		return steps
	}
	for _, b := range bursts {
		// The highest ranks above the floor that idled long enough.
		keep := b.Start + b.Running
		for keep > b.Start+b.Floor {
			r := keep - 1
			since, ok := idle[r]
			if r >= len(v.Ranks) || v.Ranks[r].Jobs > 0 || !ok || now.Sub(since) < after {
				break
			}
			keep--
		}
		if keep == b.Start+b.Running {
			continue
		}
		s := Step{Burst: b.Name, Size: b.Running}
		drained := true
		for r := keep; r < b.Start+b.Running; r++ {
			switch rank := v.Ranks[r]; {
			case rank.Drain == "":
				s.Drain = append(s.Drain, r)
				drained = false
			case rank.Drain != Drained:
				drained = false
			}
		}
		if drained {
			s.Size = keep - b.Start
		}
		if s.Size != b.Running || len(s.Drain) > 0 {
			s.Reason = fmt.Sprintf("%s, and ranks %s ran no job for %v", nothingWaits(v), FormatIDSet(rangeOf(keep, b.Start+b.Running), false), after)
			steps = append(steps, s)
		}
	}
	return steps
}

// NextDown returns when Decide will next shrink a burst of v if nothing changes meanwhile: the
// earliest time the highest running rank above a burst's floor will have idled for after. It
// reports false when no shrink is coming (a job waits, or no such rank idles).
func NextDown(v *View, bursts []Burst, idle Idle, after time.Duration) (time.Time, bool) {
	if v == nil || v.Uptime.State != "run" || v.waitsForNodes() {
		return time.Time{}, false
	}
	var next time.Time
	for _, b := range bursts {
		top := b.Start + b.Running - 1
		if b.Running <= b.Floor || top >= len(v.Ranks) || v.Ranks[top].Jobs > 0 {
			continue
		}
		if since, ok := idle[top]; ok && (next.IsZero() || since.Add(after).Before(next)) {
			next = since.Add(after)
		}
	}
	return next, !next.IsZero()
}

// waitsForNodes reports whether jobs wait for nodes: some wait for resources, and the scheduler
// runs. While it is stopped (flux queue stop), jobs wait for the administrator instead.
func (v *View) waitsForNodes() bool { return v.Demand().Jobs > 0 && !v.Uptime.SchedulerStopped }

// nothingWaits says why a burst may shrink: no job waits, or those that wait do not wait for
// nodes.
func nothingWaits(v *View) string {
	if d := v.Demand(); d.Jobs > 0 {
		return fmt.Sprintf("the queue is stopped: %s for the administrator, not for nodes", text.Count(d.Jobs, "job waits", "jobs wait"))
	}
	return "no job waits"
}

// ours reports whether fluxfed drained the rank.
func ours(r Rank) bool { return r.Drain != "" && r.DrainReason == DrainReason }

func rangeOf(start, end int) []int {
	ids := make([]int, 0, end-start)
	for r := start; r < end; r++ {
		ids = append(ids, r)
	}
	return ids
}

// waitReason says why a burst grows: how many jobs wait, how many nodes the largest of them
// asks for, and how many ranks can run jobs now.
func waitReason(jobs, nodes, usable int) string {
	waiting := text.Count(jobs, "job waits", "jobs wait")
	if jobs != 1 {
		waiting += ", one"
	}
	can := "can run them"
	if jobs == 1 {
		can = "can run it"
	}
	return fmt.Sprintf("%s for %s, and %s %s", waiting, text.Count(nodes, "node", "nodes"), text.Count(usable, "rank", "ranks"), can)
}
