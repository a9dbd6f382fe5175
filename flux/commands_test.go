package flux

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// standIn writes a flux command into dir that prints the fixtures of step for the commands
// ObserveCommand runs, and records every invocation with FLUX_URI in dir/calls.
func standIn(t *testing.T, dir, step string) {
	t.Helper()
	fixtures, err := filepath.Abs(filepath.Join("testdata", "fixtures", step))
	require.NoError(t, err)
	script := `#!/bin/sh
printf '%s|%s\n' "$FLUX_URI" "$*" >>"` + dir + `/calls"
d='` + fixtures + `'
case "$*" in
"uptime") cat "$d/uptime.txt" ;;
"` + strings.Join(ResourceStatusCommand[1:], " ") + `") cat "$d/resource-status.txt" ;;
"` + strings.Join(DrainCommand[1:], " ") + `") cat "$d/drain.txt" ;;
"` + strings.Join(JobsCommand[1:], " ") + `") cat "$d/jobs-pending-running.json"; echo ;;
"resource drain "*|"resource undrain "*) ;;
*) echo "flux: unknown command $*" >&2; exit 1 ;;
esac
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "flux"), []byte(script), 0o755))
}

// TestObserveCommandRunsAsAUserOfTheContainer runs ObserveCommand with sh, as the exec API runs
// it in the lead broker's container: flux comes from the view that flux-view.sh puts on PATH,
// FLUX_URI from its $fluxsocket, and the output reads as the fixtures do.
func TestObserveCommandRunsAsAUserOfTheContainer(t *testing.T) {
	for _, step := range []string{"1-reserved-pending", "3-draining", "4-left"} {
		t.Run(step, func(t *testing.T) {
			mount := filepath.Join(t.TempDir(), "mnt flux") // a blank in the path is quoted
			bin := filepath.Join(mount, "view", "bin")
			require.NoError(t, os.MkdirAll(bin, 0o755))
			standIn(t, bin, step)
			require.NoError(t, os.WriteFile(filepath.Join(mount, "flux-view.sh"), []byte(
				"export PATH=\"$PATH:"+bin+"\"\nexport fluxsocket=\"local://"+mount+"/view/run/flux/local\"\n"), 0o644))

			argv := ObserveCommand(mount + "/")
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = []string{"PATH=/usr/bin:/bin"}
			out, err := cmd.Output()
			require.NoError(t, err)
			got, err := ParseObservation(string(out))
			require.NoError(t, err)
			require.Equal(t, viewOf(t, step), got)

			calls, err := os.ReadFile(filepath.Join(bin, "calls"))
			require.NoError(t, err)
			uri := "local://" + mount + "/view/run/flux/local"
			require.Equal(t, uri+"|uptime\n"+
				uri+"|"+strings.Join(ResourceStatusCommand[1:], " ")+"\n"+
				uri+"|"+strings.Join(DrainCommand[1:], " ")+"\n"+
				uri+"|"+strings.Join(JobsCommand[1:], " ")+"\n"+
				uri+"|uptime\n", string(calls))

			argv = Command(mount, DrainArgs([]int{2, 3})...)
			cmd = exec.Command(argv[0], argv[1:]...)
			cmd.Env = []string{"PATH=/usr/bin:/bin"}
			require.NoError(t, cmd.Run())
			calls, err = os.ReadFile(filepath.Join(bin, "calls"))
			require.NoError(t, err)
			require.True(t, strings.HasSuffix(string(calls), uri+"|resource drain 2-3 "+DrainReason+"\n"), string(calls))
		})
	}
}

// TestObserveCommandBeforeTheInstanceRuns: in state quorum only flux uptime is asked.
func TestObserveCommandBeforeTheInstanceRuns(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "flux"), []byte(
		"#!/bin/sh\n[ \"$*\" = uptime ] || exit 3\necho ' 14:56:45 quorum 3s,  owner root,  depth 0,  size 4'\n"), 0o755))
	argv := ObserveCommand("/nonexistent")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/bin:/bin:" + dir}
	out, err := cmd.Output()
	require.NoError(t, err)
	v, err := ParseObservation(string(out))
	require.NoError(t, err)
	require.Equal(t, &View{Uptime: Uptime{State: "quorum", Size: 4}}, v)

	// A flux that fails fails the command, with its status.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "flux"), []byte("#!/bin/sh\necho 'flux-uptime: Unable to connect' >&2\nexit 1\n"), 0o755))
	cmd = exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/bin:/bin:" + dir}
	_, err = cmd.Output()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, 1, exit.ExitCode())
}

// TestTheQueueIsReadAfterTheJobs: an administrator stops the queue and submits a job while the
// hub asks (the first flux uptime before the stop, the jobs after the submit): the job is read
// with the queue stopped, so nothing grows for it; and started again the other way round.
func TestTheQueueIsReadAfterTheJobs(t *testing.T) {
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join("testdata", "fixtures", "1-reserved-pending", name))
		require.NoError(t, err)
		return string(data)
	}
	// The fixture's instance: two ranks offline, a job that asks for 4 nodes waits.
	uptime, status, drain, jobs := read("uptime.txt"), read("resource-status.txt"), read("drain.txt"), read("jobs-pending-running.json")
	stopped := uptime + "  scheduler stopped\n" // as flux-core 0.88.0 prints it after flux queue stop
	observe := func(before, after string) *View {
		v, err := ParseObservation(strings.Join([]string{before, status, drain, jobs, after}, Separator+"\n"))
		require.NoError(t, err)
		return v
	}
	v := observe(uptime, stopped)
	require.True(t, v.Uptime.SchedulerStopped)
	require.False(t, v.waitsForNodes(), "a job waiting on a stopped queue waits for no node")
	v = observe(stopped, uptime)
	require.False(t, v.Uptime.SchedulerStopped)
	require.True(t, v.waitsForNodes())

	_, err := ParseObservation(strings.Join([]string{uptime, status, drain, jobs, "not uptime"}, Separator+"\n"))
	require.ErrorContains(t, err, "the flux uptime after the jobs")
}

func TestParseObservationErrors(t *testing.T) {
	_, err := ParseObservation("a\n" + Separator + "\nb\n")
	require.ErrorContains(t, err, "has 2 parts")
}
