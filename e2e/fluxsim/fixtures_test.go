package fluxsim

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The experiment of shared/flux-fixtures, replayed on the stand-in: the outputs at each step
// must be what real Flux printed, byte for byte, but for what the stand-in does not model (job
// IDs and the job manager's step times, which the test copies from the fixtures) and for the
// runtime of a running job, which depends on the instant of the capture.
const fixtures = "../../flux/testdata/fixtures"

func fixture(t *testing.T, step, file string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtures, step, file))
	require.NoError(t, err)
	return string(data)
}

// fixtureJob is what the stand-in does not model about a job of the experiment.
type fixtureJob struct {
	id                                        uint64
	tSubmit, tDepend, tPriority, tSched, tRun float64
}

var experimentJobs = []fixtureJob{
	{id: 62058921984, tSubmit: 1795445789.9448185, tDepend: 1795445789.9561965, tPriority: 1795445789.967616, tSched: 1795445789.9676502},
	{id: 64172851200, tSubmit: 1795445790.071228, tDepend: 1795445790.0828643, tPriority: 1795445790.09406, tSched: 1795445790.0941036, tRun: 1795445807.1752503},
	{id: 66320334848, tSubmit: 1795445790.1994407, tDepend: 1795445790.2113643, tPriority: 1795445790.2224665, tSched: 1795445790.2224982, tRun: 1795445807.177369},
}

// copyUnmodelled gives the jobs of in the IDs and step times of the experiment.
func copyUnmodelled(in *Instance) {
	for i := range in.Jobs {
		j, f := &in.Jobs[i], experimentJobs[i]
		j.ID, j.TDepend, j.TPriority, j.TSched, j.Cwd = f.id, f.tDepend, f.tPriority, f.tSched, "/home/user"
		if j.TRun != 0 && f.tRun != 0 {
			j.TRun = f.tRun
		}
	}
}

var runtimeRE = regexp.MustCompile(`"runtime": ([0-9.]+)`)

// requireJobs compares a jobs listing with the fixture's, runtimes to the millisecond (Flux reads the clock once per job).
func requireJobs(t *testing.T, want, got string) {
	t.Helper()
	wantRT, gotRT := runtimeRE.FindAllStringSubmatch(want, -1), runtimeRE.FindAllStringSubmatch(got, -1)
	require.Len(t, gotRT, len(wantRT), got)
	for i := range wantRT {
		w, _ := strconv.ParseFloat(wantRT[i][1], 64)
		g, _ := strconv.ParseFloat(gotRT[i][1], 64)
		require.InDelta(t, w, g, 1e-3, "runtime of job %d", i)
	}
	strip := func(s string) string { return runtimeRE.ReplaceAllString(s, `"runtime": R`) }
	require.Equal(t, strip(want), strip(got))
}

func TestTheStandInReplaysTheFixtures(t *testing.T) {
	const start = 1795445775.0 // broker.starttime: 14:56:15 UTC
	in, err := New([]string{"root-0", "root-1", "burst-0-0", "burst-0-1"}, 2, 2, start)
	require.NoError(t, err)
	require.NoError(t, in.SetOnline([]int{0, 1}, start+1))

	// 1: three jobs wait for the reserved ranks; the head of the queue blocks the others.
	for i, cmd := range [][]string{{"hostname"}, {"sleep", "100"}, {"sleep", "100"}} {
		nnodes, ntasks := []int{4, 3, 1}[i], []int{0, 3, 0}[i]
		_, err := in.Submit(cmd, nnodes, ntasks, "/home/user", experimentJobs[i].tSubmit)
		require.NoError(t, err)
	}
	copyUnmodelled(in)
	step := "1-reserved-pending"
	require.Equal(t, fixture(t, step, "uptime.txt"), in.Uptime(start+30.2, time.UTC), step)
	require.Equal(t, fixture(t, step, "resource-status.txt"), in.ResourceStatus(), step)
	require.Equal(t, fixture(t, step, "drain.txt"), in.DrainList(), step)
	require.Equal(t, fixture(t, step, "jobs-pending-running.json"), in.JobsJSON(start+30.2, "root"), step)

	// 2: the burst's brokers join; the 4-node job runs and ends, the other two run.
	require.NoError(t, in.SetOnline([]int{0, 1, 2, 3}, 1795445807.1752503))
	in.Advance(1795445812.0953)
	copyUnmodelled(in)
	step = "2-joined-running"
	require.Equal(t, StateInactive, in.Jobs[0].State)
	require.Equal(t, fixture(t, step, "uptime.txt"), in.Uptime(start+37.09, time.UTC), step)
	require.Equal(t, fixture(t, step, "resource-status.txt"), in.ResourceStatus(), step)
	require.Equal(t, fixture(t, step, "drain.txt"), in.DrainList(), step)
	requireJobs(t, fixture(t, step, "jobs-pending-running.json"), in.JobsJSON(1795445807.177369+4.917971611022949, "root"))

	// 3: the burst's ranks are drained while their jobs run.
	require.NoError(t, in.Drain([]int{2, 3}, "fluxfed: burst scaling down", false, 1795445812.5))
	step = "3-draining"
	require.Equal(t, fixture(t, step, "uptime.txt"), in.Uptime(start+38.2, time.UTC), step)
	require.Equal(t, fixture(t, step, "resource-status.txt"), in.ResourceStatus(), step)
	require.Equal(t, fixture(t, step, "drain.txt"), in.DrainList(), step)
	requireJobs(t, fixture(t, step, "jobs-pending-running.json"), in.JobsJSON(1795445807.177369+6.488499164581299, "root"))
	require.Zero(t, in.Killed)

	// 4: the burst's brokers stop while their jobs still run: both jobs are killed.
	require.NoError(t, in.SetOnline([]int{0, 1}, 1795445814.120613))
	step = "4-left"
	require.Equal(t, fixture(t, step, "uptime.txt"), in.Uptime(start+43.2, time.UTC), step)
	require.Equal(t, fixture(t, step, "resource-status.txt"), in.ResourceStatus(), step)
	require.Equal(t, fixture(t, step, "drain.txt"), in.DrainList(), step)
	requireJobs(t, fixture(t, step, "jobs-pending-running.json"), in.JobsJSON(1795445814.2, "root"))
	require.Equal(t, 2, in.Killed)

	// Then: undrained while offline, a new 4-node job waits, the brokers rejoin, and it runs
	// once the killed job is cleaned up (CleanupSeconds after the ranks were lost).
	require.NoError(t, in.Undrain([]int{2, 3}, 1795445820))
	j, err := in.Submit([]string{"hostname"}, 4, 0, "/home/user", 1795445821)
	require.NoError(t, err)
	require.NoError(t, in.SetOnline([]int{0, 1, 2, 3}, 1795445826))
	in.Advance(1795445830)
	require.Equal(t, StateSched, in.Jobs[len(in.Jobs)-1].State, "the job waits for the ranks the killed job holds")
	cleaned := 1795445814.120613 + CleanupSeconds
	in.Advance(cleaned + 1)
	last := in.Jobs[len(in.Jobs)-1]
	require.Equal(t, j.ID, last.ID)
	require.Equal(t, StateInactive, last.State)
	require.Equal(t, []int{0, 1, 2, 3}, last.Ranks)
	require.InDelta(t, cleaned, last.TRun, 1e-6)
}

func TestF58(t *testing.T) {
	for id, want := range map[uint64]string{
		0: "ƒ1", 57: "ƒz", 58: "ƒ21",
		62058921984: "ƒ2dYwCQX", 64172851200: "ƒ2gmjduy", 66320334848: "ƒ2k3W3z7",
	} {
		require.Equal(t, want, f58(id), "%d", id)
	}
}

func TestFSD(t *testing.T) {
	for d, want := range map[float64]string{
		0: "0s", 0.05: "50ms", 0.1: "0.1s", 30.2: "30s", 37.6: "38s", 59.9: "60s",
		75: "1.2m", 3599: "60m", 5400: "1.5h", 86400: "1d", 200000: "2.3d",
	} {
		require.Equal(t, want, fsd(d), "%v", d)
	}
}
