package fluxsim

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fluxfed/fluxfed/flux"
)

// flx runs the stand-in's Main on dir and returns stdout, stderr and the exit status.
func flx(dir string, args ...string) (string, string, int) {
	var out, errOut bytes.Buffer
	code := Main(dir, args, &out, &errOut)
	return out.String(), errOut.String(), code
}

func TestMainAnswersOnlyOnceRankZeroIsOnline(t *testing.T) {
	dir := t.TempDir()
	_, stderr, code := flx("", "uptime")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, EnvDir)

	_, stderr, code = flx(dir, "uptime")
	require.Equal(t, 1, code)
	require.Equal(t, "flux-uptime: ERROR: "+errNoInstance.Error()+"\n", stderr)

	in, err := New([]string{"lead-0", "lead-1", "b-0", "b-1"}, 2, 4, Now())
	require.NoError(t, err)
	require.NoError(t, Create(dir, in))
	_, _, code = flx(dir, "uptime")
	require.Equal(t, 1, code, "rank 0 is not online yet")

	require.NoError(t, SetOnline(dir, []int{0}))
	out, _, code := flx(dir, "uptime")
	require.Zero(t, code)
	require.Contains(t, out, " quorum ", "one rank of a quorum of 2")
}

func TestMainRunsTheCommandsOfTheHub(t *testing.T) {
	dir := t.TempDir()
	in, err := New([]string{"lead-0", "lead-1", "b-0", "b-1"}, 2, 4, Now())
	require.NoError(t, err)
	require.NoError(t, Create(dir, in))
	require.NoError(t, SetOnline(dir, []int{0, 1}))

	id, stderr, code := flx(dir, "submit", "-N3", "-n", "3", "sleep", "600")
	require.Zero(t, code, stderr)
	require.True(t, strings.HasPrefix(id, "ƒ"), id)

	out, stderr, code := flx(dir, "jobs", "-A", "--json", "-f", "pending,running")
	require.Zero(t, code, stderr)
	jobs, err := flux.ParseJobs([]byte(out))
	require.NoError(t, err)
	require.Len(t, jobs, 1)

	_, stderr, code = flx(dir, "resource", "drain", "2-3", "fluxfed:", "burst", "scaling", "down")
	require.Zero(t, code, stderr)
	out, _, _ = flx(dir, flux.DrainCommand[1:]...)
	require.Regexp(t, `^\d+\.0 drained\* 2-3 b-\[0-1\] fluxfed: burst scaling down\n$`, out)
	_, stderr, code = flx(dir, "resource", "drain", "1-3", "again")
	require.Equal(t, 1, code)
	require.Equal(t, "flux-resource: ERROR: [Errno 17] ranks 2-3 already drained\nflux-resource: INFO: Use --force to overwrite existing drain reason\n", stderr)
	_, stderr, code = flx(dir, "resource", "drain", "-f", "3", "again")
	require.Zero(t, code, stderr)
	_, stderr, code = flx(dir, "resource", "drain", "-f", "3", "fluxfed: burst scaling down")
	require.Zero(t, code, stderr)
	_, stderr, code = flx(dir, "resource", "undrain", "1-2")
	require.Equal(t, 1, code)
	require.Equal(t, "flux-resource: ERROR: rank 1 not drained\n", stderr)
	out, _, _ = flx(dir, flux.DrainCommand[1:]...)
	require.Regexp(t, `^\d+\.0 drained\* 2-3 b-\[0-1\] fluxfed: burst scaling down\n$`, out, "refused, nothing changed")
	_, stderr, code = flx(dir, "resource", "undrain", "b-[0-1]")
	require.Zero(t, code, stderr)
	out, _, _ = flx(dir, flux.DrainCommand[1:]...)
	require.Empty(t, out)

	require.NoError(t, SetOnline(dir, []int{0, 1, 2}))
	got, err := Read(dir)
	require.NoError(t, err)
	require.Equal(t, StateRun, got.Jobs[0].State)
	require.Equal(t, []int{0, 1, 2}, got.Jobs[0].Ranks)

	for _, bad := range [][]string{
		{"jobs"}, {"resource", "status"}, {"resource", "list"}, {"submit", "-N0", "true"},
		{"submit", "-N9", "true"}, {"submit", "-x", "true"}, {"submit", "-N"}, {"resource", "drain", "7", "r"},
		{"resource", "undrain"}, {"kvs", "get", "x"},
	} {
		_, stderr, code := flx(dir, bad...)
		require.Equal(t, 1, code, "%q", bad)
		require.True(t, strings.HasPrefix(stderr, "flux-"+bad[0]+": ERROR: "), "%q: %s", bad, stderr)
	}
	after, err := Read(dir)
	require.NoError(t, err)
	require.Len(t, after.Jobs, 1, "refused commands changed nothing")
}

// TestTheHubsObservationReadsTheStandIn runs the command the hub runs in a lead broker's
// container, as kwok runs it (sh on this machine, the stand-in first on PATH), and parses it as
// the hub does.
func TestTheHubsObservationReadsTheStandIn(t *testing.T) {
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "flux"), "../cmd/flux")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	dir := t.TempDir()
	in, err := New([]string{"lead-0", "lead-1", "b-0", "b-1"}, 2, 4, Now())
	require.NoError(t, err)
	require.NoError(t, Create(dir, in))
	require.NoError(t, SetOnline(dir, []int{0, 1}))
	run := func(argv []string) string {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), EnvDir+"="+dir)
		out, err := cmd.Output()
		require.NoError(t, err)
		return string(out)
	}
	run(flux.Command("/mnt/flux", "flux", "submit", "-N4", "sleep", "60"))
	view, err := flux.ParseObservation(run(flux.ObserveCommand("/mnt/flux")))
	require.NoError(t, err)
	require.Equal(t, 4, view.Uptime.Size)
	require.Equal(t, flux.Count{Online: 2}, view.Count(0, 4))
	require.Equal(t, flux.Demand{Jobs: 1, Nodes: 4}, view.Demand())
}
