package flux

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDecideOnTheFixtures applies the on-demand rule to the recorded instance: root-[0-1] and a
// burst burst-0 whose 2 ranks (2-3) are reserved.
func TestDecideOnTheFixtures(t *testing.T) {
	t0 := time.Unix(1795445800, 0)
	const after = 5 * time.Minute
	burst := func(floor, running int) []Burst {
		return []Burst{{Name: "burst-0", Start: 2, Reserved: 2, Floor: floor, Running: running}}
	}
	noJobs := func(v *View) {
		v.Jobs = nil
		v.Ranks[0].Jobs, v.Ranks[1].Jobs, v.Ranks[2].Jobs, v.Ranks[3].Jobs = 0, 0, 0, 0
	}
	drainedByUs := func(state string, online bool) func(*View) {
		return func(v *View) {
			for r := 2; r < 4; r++ {
				v.Ranks[r].Drain, v.Ranks[r].DrainReason, v.Ranks[r].Online = state, DrainReason, online
			}
		}
	}
	tests := []struct {
		name   string
		step   string
		edit   func(*View)
		bursts []Burst
		// idleFor is how long the ranks have been idle when the rule is applied.
		idleFor time.Duration
		want    []Step
	}{{
		name: "a job waits for the reserved ranks: grow to the reservation", step: "1-reserved-pending", bursts: burst(0, 0),
		want: []Step{{Burst: "burst-0", Size: 2, Reason: "3 jobs wait, one for 4 nodes, and 2 ranks can run them"}},
	}, {
		name: "the brokers started and have not joined yet: nothing more", step: "1-reserved-pending", bursts: burst(0, 2),
	}, {
		name: "one broker runs: one more", step: "1-reserved-pending", bursts: burst(0, 1),
		edit: func(v *View) { v.Ranks[2].Online = true },
		want: []Step{{Burst: "burst-0", Size: 2, Reason: "3 jobs wait, one for 4 nodes, and 3 ranks can run them"}},
	}, {
		name: "more nodes than the instance has: no more than the reservation", step: "1-reserved-pending", bursts: burst(0, 0),
		edit: func(v *View) { v.Jobs[0].Nodes = 100 },
		want: []Step{{Burst: "burst-0", Size: 2, Reason: "3 jobs wait, one for 100 nodes, and 2 ranks can run them"}},
	}, {
		name: "ranks fluxfed drained and stopped are undrained as they start again", step: "1-reserved-pending", bursts: burst(0, 0),
		edit: drainedByUs(Drained, false),
		want: []Step{{Burst: "burst-0", Size: 2, Undrain: []int{2, 3}, Reason: "3 jobs wait, one for 4 nodes, and 2 ranks can run them"}},
	}, {
		name: "ranks fluxfed drained that still run are undrained, not started again", step: "1-reserved-pending", bursts: burst(0, 2),
		edit: drainedByUs(Drained, true),
		want: []Step{{Burst: "burst-0", Size: 2, Undrain: []int{2, 3}, Reason: "3 jobs wait, one for 4 nodes, and 2 ranks can run them"}},
	}, {
		name: "ranks someone else drained are left drained", step: "1-reserved-pending", bursts: burst(0, 2),
		edit: func(v *View) {
			drainedByUs(Drained, true)(v)
			v.Ranks[2].DrainReason, v.Ranks[3].DrainReason = "bad memory", "bad memory"
		},
	}, {
		name: "jobs run on the burst: nothing", step: "2-joined-running", bursts: burst(0, 2), idleFor: time.Hour,
	}, {
		name: "idle, but not for long enough: nothing", step: "2-joined-running", bursts: burst(0, 2), edit: noJobs, idleFor: after - time.Second,
	}, {
		name: "idle long enough: drain first", step: "2-joined-running", bursts: burst(0, 2), edit: noJobs, idleFor: after,
		want: []Step{{Burst: "burst-0", Size: 2, Drain: []int{2, 3}, Reason: "no job waits, and ranks 2-3 ran no job for 5m0s"}},
	}, {
		name: "drained: shrink", step: "2-joined-running", bursts: burst(0, 2), idleFor: after,
		edit: func(v *View) { noJobs(v); drainedByUs(Drained, true)(v) },
		want: []Step{{Burst: "burst-0", Size: 0, Reason: "no job waits, and ranks 2-3 ran no job for 5m0s"}},
	}, {
		name: "still draining: wait", step: "2-joined-running", bursts: burst(0, 2), idleFor: after,
		edit: func(v *View) { noJobs(v); drainedByUs(Draining, true)(v) },
	}, {
		name: "never below the floor", step: "2-joined-running", bursts: burst(1, 2), edit: noJobs, idleFor: after,
		want: []Step{{Burst: "burst-0", Size: 2, Drain: []int{3}, Reason: "no job waits, and ranks 3 ran no job for 5m0s"}},
	}, {
		name: "at the floor: nothing", step: "2-joined-running", bursts: burst(2, 2), edit: noJobs, idleFor: time.Hour,
	}, {
		name: "a job on the top rank keeps the ranks below it too", step: "3-draining", bursts: burst(0, 2), idleFor: time.Hour,
		edit: func(v *View) { v.Jobs = v.Jobs[:1]; v.Ranks[2].Jobs = 0 },
	}, {
		name: "a job waits: nothing shrinks, draining ranks come back", step: "3-draining", bursts: burst(0, 2), idleFor: time.Hour,
		edit: func(v *View) { v.Jobs = append(v.Jobs, Job{ID: "f9", State: "SCHED", Nodes: 4}) },
		want: []Step{{Burst: "burst-0", Size: 2, Undrain: []int{2, 3}, Reason: "1 job waits for 4 nodes, and 2 ranks can run it"}},
	}, {
		name: "the queue is stopped: waiting jobs grow nothing", step: "1-reserved-pending", bursts: burst(0, 0),
		edit: func(v *View) { v.Uptime.SchedulerStopped = true },
	}, {
		name: "the queue is stopped: idle ranks drain although jobs wait", step: "2-joined-running", bursts: burst(0, 2), idleFor: after,
		edit: func(v *View) {
			noJobs(v)
			v.Uptime.SchedulerStopped = true
			v.Jobs = []Job{{ID: "f9", State: "SCHED", Nodes: 4}}
		},
		want: []Step{{Burst: "burst-0", Size: 2, Drain: []int{2, 3},
			Reason: "the queue is stopped: 1 job waits for the administrator, not for nodes, and ranks 2-3 ran no job for 5m0s"}},
	}, {
		name: "a rank in housekeeping counts as one that can run jobs", step: "1-reserved-pending", bursts: burst(0, 0),
		edit: func(v *View) { v.Ranks[1].Housekeeping = true },
		want: []Step{{Burst: "burst-0", Size: 2, Reason: "3 jobs wait, one for 4 nodes, and 2 ranks can run them"}},
	}, {
		name: "a torpid rank does not", step: "1-reserved-pending", bursts: burst(0, 0),
		edit: func(v *View) { v.Ranks[1].Torpid = true },
		want: []Step{{Burst: "burst-0", Size: 2, Reason: "3 jobs wait, one for 4 nodes, and 1 rank can run them"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := viewOf(t, tt.step)
			if tt.edit != nil {
				tt.edit(v)
			}
			idle := Idle{}
			idle.Observe(v, t0)
			require.Equal(t, tt.want, Decide(v, tt.bursts, idle, t0.Add(tt.idleFor), after))
		})
	}
}

func TestIdleObserve(t *testing.T) {
	t0 := time.Unix(100, 0)
	idle := Idle{}
	v := viewOf(t, "2-joined-running")
	idle.Observe(v, t0)
	require.Empty(t, idle, "every rank runs a job")
	v.Ranks[3].Jobs = 0
	idle.Observe(v, t0)
	idle.Observe(v, t0.Add(time.Minute))
	require.Equal(t, Idle{3: t0}, idle, "idle since first seen idle")
	v.Ranks[3].Online = false
	idle.Observe(v, t0)
	require.Empty(t, idle, "a rank that is not online has no idle time")
	require.Nil(t, Decide(&View{Uptime: Uptime{State: "quorum"}}, nil, idle, t0, time.Minute))
}

func TestNextDown(t *testing.T) {
	t0 := time.Unix(100, 0)
	const after = time.Minute
	idleView := func() *View {
		v := viewOf(t, "2-joined-running")
		v.Jobs = nil
		for r := range v.Ranks {
			v.Ranks[r].Jobs = 0
		}
		return v
	}
	tests := []struct {
		name   string
		edit   func(*View)
		bursts []Burst
		want   time.Time
	}{{
		name: "the top rank above the floor idles: due after the idle time", bursts: []Burst{{Name: "b", Start: 2, Reserved: 2, Running: 2}},
		want: t0.Add(after),
	}, {
		name: "a burst at its floor never shrinks", bursts: []Burst{{Name: "b", Start: 2, Reserved: 2, Floor: 2, Running: 2}},
	}, {
		name: "the top rank runs a job: the rule waits for it", bursts: []Burst{{Name: "b", Start: 2, Reserved: 2, Running: 2}},
		edit: func(v *View) { v.Ranks[3].Jobs = 1 },
	}, {
		name: "a job waits: nothing shrinks", bursts: []Burst{{Name: "b", Start: 2, Reserved: 2, Running: 2}},
		edit: func(v *View) { v.Jobs = []Job{{ID: "f1", State: "SCHED", Nodes: 1}} },
	}, {
		name: "jobs wait on a stopped queue: the rule shrinks as if none did", bursts: []Burst{{Name: "b", Start: 2, Reserved: 2, Running: 2}},
		edit: func(v *View) {
			v.Jobs = []Job{{ID: "f1", State: "SCHED", Nodes: 1}}
			v.Uptime.SchedulerStopped = true
		},
		want: t0.Add(after),
	}, {
		name: "nothing runs above the floor", bursts: []Burst{{Name: "b", Start: 2, Reserved: 2}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := idleView()
			if tt.edit != nil {
				tt.edit(v)
			}
			idle := Idle{}
			idle.Observe(v, t0)
			got, ok := NextDown(v, tt.bursts, idle, after)
			require.Equal(t, !tt.want.IsZero(), ok)
			require.Equal(t, tt.want, got)
			if ok {
				require.Empty(t, Decide(v, tt.bursts, idle, got.Add(-time.Nanosecond), after), "not before it is due")
				require.NotEmpty(t, Decide(v, tt.bursts, idle, got, after), "Decide acts when it is due")
			}
		})
	}
}

func TestWaitReason(t *testing.T) {
	tests := []struct {
		jobs, nodes, usable int
		want                string
	}{
		{1, 1, 0, "1 job waits for 1 node, and 0 ranks can run it"},
		{1, 6, 2, "1 job waits for 6 nodes, and 2 ranks can run it"},
		{2, 4, 1, "2 jobs wait, one for 4 nodes, and 1 rank can run them"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, waitReason(tt.jobs, tt.nodes, tt.usable))
	}
}
