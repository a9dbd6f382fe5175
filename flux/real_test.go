package flux_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fluxfed/fluxfed/e2e/realflux"
	"github.com/fluxfed/fluxfed/flux"
)

// observe runs the command the hub runs in a lead broker's container against inst, as the hub
// runs it (there is no flux-view.sh here: FLUX_URI comes from the environment), and reads it.
func observe(t *testing.T, inst *realflux.Instance) *flux.View {
	t.Helper()
	out, err := inst.Command(flux.ObserveCommand("/mnt/flux")...)
	require.NoError(t, err)
	v, err := flux.ParseObservation(out)
	require.NoError(t, err, "what real flux printed:\n%s", out)
	return v
}

// TestTheHubReadsWhatRealFluxPrints puts a real flux-core instance in the states the hub meets
// and reads it with the hub's own command and parsers: idle, ranks in housekeeping after a job
// (listed under both avail and housekeeping), a rank drained, the queue stopped and submission
// disabled, jobs waiting for more nodes than are free.
func TestTheHubReadsWhatRealFluxPrints(t *testing.T) {
	inst := realflux.StartInstance(t, 4, `
[job-manager.housekeeping]
command = ["sleep", "8"]
`)
	v := observe(t, inst)
	require.Equal(t, "run", v.Uptime.State)
	require.Equal(t, 4, v.Uptime.Size)
	require.Len(t, v.Ranks, 4)
	for r, rank := range v.Ranks {
		require.True(t, rank.Usable(), "rank %d: %+v", r, rank)
		require.NotEmpty(t, rank.Host)
	}

	// A job of two nodes ends; its ranks go through housekeeping, which takes 8 s here.
	inst.Flux(t, "run", "-N2", "true")
	v = observe(t, inst)
	var housekeeping []int
	for r, rank := range v.Ranks {
		if rank.Housekeeping {
			housekeeping = append(housekeeping, r)
		}
		require.True(t, rank.Usable(), "a rank in housekeeping is free again in a moment: rank %d", r)
	}
	require.Len(t, housekeeping, 2, "the job's two ranks are in housekeeping")

	inst.Flux(t, "resource", "drain", "3", flux.DrainReason)
	inst.Flux(t, "queue", "stop")
	inst.Flux(t, "queue", "disable", "--message=maintenance")
	v = observe(t, inst)
	require.True(t, v.Uptime.SchedulerStopped)
	require.True(t, v.Uptime.SubmitDisabled)
	require.Equal(t, flux.Drained, v.Ranks[3].Drain)
	require.Equal(t, flux.DrainReason, v.Ranks[3].DrainReason)
	require.False(t, v.Ranks[3].Usable())

	// Jobs wait while the queue is stopped; none is given resources.
	inst.Flux(t, "queue", "enable")
	inst.Flux(t, "submit", "-N4", "true")
	inst.Flux(t, "submit", "-N1", "true")
	require.Eventually(t, func() bool { return observe(t, inst).Demand().Jobs == 2 }, time.Minute, 100*time.Millisecond)
	v = observe(t, inst)
	require.Equal(t, flux.Demand{Jobs: 2, Nodes: 4}, v.Demand())
	burst := []flux.Burst{{Name: "b", Start: 3, Reserved: 1, Running: 1}}
	require.Empty(t, flux.Decide(v, burst, flux.Idle{}, time.Now(), time.Hour), "nothing grows while the queue is stopped")

	// Started again, the scheduler still runs neither: rank 3 is drained, so the 4-node job
	// waits for nodes, and sched-simple runs jobs in order. Now the rule acts: it gives back the
	// rank it drained.
	inst.Flux(t, "queue", "start")
	v = observe(t, inst)
	require.False(t, v.Uptime.SchedulerStopped)
	require.Equal(t, flux.Demand{Jobs: 2, Nodes: 4}, v.Demand())
	steps := flux.Decide(v, burst, flux.Idle{}, time.Now(), time.Hour)
	require.Len(t, steps, 1, "jobs wait for nodes again")
	require.Equal(t, []int{3}, steps[0].Undrain)
	require.True(t, strings.HasPrefix(steps[0].Reason, "2 jobs wait, one for 4 nodes"), steps[0].Reason)
	inst.Flux(t, flux.UndrainArgs(steps[0].Undrain)[1:]...)
	require.Eventually(t, func() bool { return observe(t, inst).Demand().Jobs == 0 }, time.Minute, 100*time.Millisecond,
		"both jobs run once the rank is given back")
}
