package flux_test

import (
	"bufio"
	"fmt"
	"os/exec"
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

// follower runs the command the hub leaves running in a lead broker's container against inst,
// and returns the lines it prints as they come, and its end (its error) once it ended.
func follower(t *testing.T, inst *realflux.Instance) (<-chan string, <-chan error) {
	t.Helper()
	argv := flux.FollowCommand("/mnt/flux")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = inst.Env()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines, ended := make(chan string, 100), make(chan error, 1)
	go func() {
		scan := bufio.NewScanner(out)
		for scan.Scan() {
			lines <- scan.Text()
		}
		err := cmd.Wait()
		ended <- fmt.Errorf("%w: %s", err, stderr.String())
	}()
	return lines, ended
}

// next returns the lines the follower prints until it is quiet for a second.
func next(t *testing.T, lines <-chan string) []string {
	t.Helper()
	var got []string
	for {
		select {
		case l := <-lines:
			got = append(got, l)
		case <-time.After(time.Second):
			return got
		}
	}
}

// TestTheFollowerTellsEveryChangeOfRealFlux runs the hub's follower against real flux-core: it
// says it is ready, tells nothing of what happened before (a job that runs), then one line per
// step of each job and per change of the resources, and ends, saying why, when the job
// manager's journal ends.
func TestTheFollowerTellsEveryChangeOfRealFlux(t *testing.T) {
	inst := realflux.StartInstance(t, 2, "")
	inst.Flux(t, "submit", "sleep", "300")
	lines, ended := follower(t, inst)
	select {
	case l := <-lines:
		require.Equal(t, flux.FollowReady, l, "the first line")
	case err := <-ended:
		require.FailNow(t, "the follower ended", "%v", err)
	case <-time.After(time.Minute):
		require.FailNow(t, "the follower never said it was ready")
	}
	require.Empty(t, next(t, lines), "what happened before it started")

	inst.Flux(t, "run", "-N1", "true")
	require.Equal(t, []string{"job priority", "job alloc", "job free", "job clean"}, next(t, lines), "a job that ran at once")
	inst.Flux(t, "resource", "drain", "1", flux.DrainReason)
	inst.Flux(t, "submit", "-N2", "true")
	require.Equal(t, []string{"resource drain", "job priority"}, next(t, lines), "a rank drained, a job waits for it")
	inst.Flux(t, "cancel", "--all")
	require.ElementsMatch(t, []string{"job clean", "job free", "job clean"}, next(t, lines), "both jobs canceled")
	inst.Flux(t, "resource", "undrain", "1")
	require.Equal(t, []string{"resource undrain"}, next(t, lines))

	inst.Flux(t, "module", "remove", "job-manager")
	select {
	case err := <-ended:
		require.ErrorContains(t, err, "exit status 1: flux: the job journal ended: No data available")
	case <-time.After(time.Minute):
		require.FailNow(t, "the follower outlived the job manager")
	}
}
