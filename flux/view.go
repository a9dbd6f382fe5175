package flux

import (
	"fmt"
	"slices"
)

// Drain states of a rank.
const (
	// Draining: no new work goes to the rank; jobs that run there still do.
	Draining = "draining"
	// Drained: no new work goes to the rank and none runs there: its broker may stop without
	// killing a job.
	Drained = "drained"
)

// Rank is what the instance says of one rank.
type Rank struct {
	// Host is the rank's hostname.
	Host string
	// Online is true when its broker is up and joined.
	Online bool
	// Drain is "", Draining or Drained.
	Drain string
	// Excluded is true for a rank the configuration excludes from scheduling.
	Excluded bool
	// Torpid is true for a rank that does not answer its parent broker: no new work goes there.
	Torpid bool
	// Housekeeping is true while the rank runs the housekeeping command of a job that ended
	// ([job-manager.housekeeping]): the rank is busy for a moment, and free again after.
	Housekeeping bool
	// Jobs is the number of running jobs (RUN or CLEANUP) that hold the rank.
	Jobs int
	// DrainReason is why the rank is drained, when it is.
	DrainReason string
}

// Usable reports whether the scheduler may place new work on the rank: now, or once its
// housekeeping ends, which takes moments and asks for no other rank.
func (r Rank) Usable() bool { return r.Online && r.Drain == "" && !r.Excluded && !r.Torpid }

// View is the instance as its rank 0 sees it: the outputs of flux uptime, ResourceStatusCommand,
// DrainCommand and JobsCommand, read together.
type View struct {
	// Uptime is the instance's state and size.
	Uptime Uptime
	// Ranks holds every rank, by rank: Uptime.Size of them. It is empty until the instance
	// runs: before state run, flux answers nothing about resources.
	Ranks []Rank
	// Jobs are the pending and running jobs, as listed.
	Jobs []Job
}

// NewView reads the four outputs into a View. Every rank of the instance must be in a line of
// the resource status of one of the states that cover the instance (avail, exclude, draining,
// drained, torpid), at most once per state; the housekeeping lines name ranks that are also in
// one of those, as flux resource status lists them. A running job and a drain must name ranks
// that exist.
func NewView(uptime, resourceStatus string, jobs []byte, drain string) (*View, error) {
	u, err := ParseUptime(uptime)
	if err != nil {
		return nil, err
	}
	v := &View{Uptime: u}
	if u.State != "run" {
		return v, nil
	}
	groups, err := ParseResourceStatus(resourceStatus)
	if err != nil {
		return nil, err
	}
	if v.Jobs, err = ParseJobs(jobs); err != nil {
		return nil, err
	}
	drains, err := ParseDrain(drain)
	if err != nil {
		return nil, err
	}
	v.Ranks = make([]Rank, u.Size)
	covered := make([]bool, u.Size)
	listed := map[string][]bool{}
	for _, g := range groups {
		if listed[g.State] == nil {
			listed[g.State] = make([]bool, u.Size)
		}
		for i, r := range g.Ranks {
			if r >= u.Size {
				return nil, fmt.Errorf("flux resource status lists rank %d, but the instance has %d", r, u.Size)
			}
			if listed[g.State][r] {
				return nil, fmt.Errorf("flux resource status lists rank %d as %s twice", r, g.State)
			}
			listed[g.State][r] = true
			rank := &v.Ranks[r]
			if rank.Host != "" && rank.Host != g.Hosts[i] {
				return nil, fmt.Errorf("flux resource status names rank %d both %s and %s", r, rank.Host, g.Hosts[i])
			}
			rank.Host = g.Hosts[i]
			switch g.State {
			case Draining, Drained:
				rank.Drain = g.State
			case "exclude":
				rank.Excluded = true
			case "torpid":
				rank.Torpid = true
			case "housekeeping":
				rank.Housekeeping = true
			}
			if g.State != "housekeeping" && g.State != "allocated" {
				covered[r] = true
				rank.Online = g.Online
			}
		}
	}
	if i := slices.Index(covered, false); i >= 0 {
		return nil, fmt.Errorf("flux resource status does not list rank %d of %d as avail, exclude, draining, drained or torpid", i, u.Size)
	}
	// flux resource status computes avail as every rank that is none of the others, and
	// draining and drained from one drain set; only housekeeping (and allocated) overlap.
	for _, pair := range [][2]string{{"avail", "exclude"}, {"avail", Draining}, {"avail", Drained}, {"avail", "torpid"}, {Draining, Drained}} {
		a, b := listed[pair[0]], listed[pair[1]]
		for r := range u.Size {
			if a != nil && b != nil && a[r] && b[r] {
				return nil, fmt.Errorf("flux resource status lists rank %d as both %s and %s", r, pair[0], pair[1])
			}
		}
	}
	for _, d := range drains {
		for _, r := range d.Ranks {
			if r >= u.Size {
				return nil, fmt.Errorf("flux resource drain lists rank %d, but the instance has %d", r, u.Size)
			}
			v.Ranks[r].DrainReason = d.Reason
		}
	}
	for _, j := range v.Jobs {
		if !j.Running() {
			continue
		}
		for _, r := range j.Ranks {
			if r >= u.Size {
				return nil, fmt.Errorf("job %s runs on rank %d, but the instance has %d", j.ID, r, u.Size)
			}
			v.Ranks[r].Jobs++
		}
	}
	return v, nil
}

// Running reports whether the job holds ranks: it runs, or cleans up after running.
func (j Job) Running() bool { return j.State == "RUN" || j.State == "CLEANUP" }

// Waiting reports whether the job waits for resources (SCHED). Jobs still in DEPEND or
// PRIORITY do not wait for resources yet.
func (j Job) Waiting() bool { return j.State == "SCHED" }

// Demand is what the jobs that wait for resources need.
type Demand struct {
	// Jobs is the number of jobs waiting for resources.
	Jobs int
	// Nodes is the largest number of nodes one of them asked for: the instance must have at
	// least this many usable ranks for every waiting job to be able to start.
	Nodes int
}

// Demand returns what the waiting jobs need.
func (v *View) Demand() Demand {
	var d Demand
	for _, j := range v.Jobs {
		if j.Waiting() {
			d.Jobs++
			d.Nodes = max(d.Nodes, j.Nodes)
		}
	}
	return d
}

// Count is how many ranks of a range are online, draining and drained.
type Count struct {
	Online, Draining, Drained int
}

// Count counts the ranks [start, end) by state; ranks outside the view count as nothing.
func (v *View) Count(start, end int) Count {
	var c Count
	for r := max(start, 0); r < min(end, len(v.Ranks)); r++ {
		rank := v.Ranks[r]
		if rank.Online {
			c.Online++
		}
		switch rank.Drain {
		case Draining:
			c.Draining++
		case Drained:
			c.Drained++
		}
	}
	return c
}
