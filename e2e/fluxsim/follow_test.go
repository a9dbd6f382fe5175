package fluxsim

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fluxfed/fluxfed/flux"
)

// lines collects what a follower prints.
type lines struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lines) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Split(strings.TrimSuffix(l.buf.String(), "\n"), "\n")
}

// TestTheFollowerTellsEachChangeOfTheInstance runs the stand-in's follower, as the hub runs it
// through the stand-in flux, on an instance that other commands change: it tells a job that
// waits, ranks that join, the job that then runs and, by itself, its end, and a drain.
func TestTheFollowerTellsEachChangeOfTheInstance(t *testing.T) {
	dir := t.TempDir()
	in, err := New([]string{"r-0", "r-1", "b-0"}, 2, 2, Now())
	require.NoError(t, err)
	require.NoError(t, Create(dir, in))
	var out, stderr lines
	require.Equal(t, 1, Main(dir, flux.FollowArgs()[1:], &out, &stderr), "no broker runs yet")
	require.Equal(t, []string{"flux-python: ERROR: Unable to connect to Flux: the stand-in instance does not exist yet"}, stderr.get())

	require.NoError(t, SetOnline(dir, []int{0, 1}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Follow(ctx, dir, &out) }()
	defer func() {
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	}()
	want := []string{flux.FollowReady}
	expect := func(more ...string) {
		t.Helper()
		want = append(want, more...)
		require.EventuallyWithT(t, func(c *assert.CollectT) { require.Equal(c, want, out.get()) }, 10*time.Second, 20*time.Millisecond)
	}
	expect()

	var stdout strings.Builder
	require.Equal(t, 0, Main(dir, []string{"submit", "-N3", "sleep", "1"}, &stdout, &stderr))
	expect("job priority")
	require.NoError(t, SetOnline(dir, []int{0, 1, 2}))
	expect("resource online", "job alloc")
	expect("job free", "job clean") // a second later, with no command run
	require.Equal(t, 0, Main(dir, []string{"resource", "drain", "2", "fluxfed: burst scaling down"}, &stdout, &stderr))
	expect("resource drain")
	require.Equal(t, 0, Main(dir, []string{"submit", "-N1", "true"}, &stdout, &stderr))
	expect("job priority", "job alloc", "job free", "job clean")
}

// TestChangesTellsWhatRealFluxTells: the lines of each step of a job, and of the resources.
func TestChangesTellsWhatRealFluxTells(t *testing.T) {
	in, err := New([]string{"r-0", "r-1"}, 1, 1, 100)
	require.NoError(t, err)
	require.NoError(t, in.SetOnline([]int{0}, 100))
	snap := func() *Instance {
		c := *in
		c.Online = append([]int(nil), in.Online...)
		c.Jobs = append([]Job(nil), in.Jobs...)
		c.Drained = map[int]Drain{}
		for r, d := range in.Drained {
			c.Drained[r] = d
		}
		return &c
	}
	before := snap()
	_, err = in.Submit([]string{"sleep", "10"}, 2, 0, "/", 101)
	require.NoError(t, err)
	require.Equal(t, []string{"job priority"}, Changes(before, snap()), "a job waits")
	before = snap()
	require.NoError(t, in.SetOnline([]int{0, 1}, 102))
	require.Equal(t, []string{"resource online", "job alloc"}, Changes(before, snap()), "a rank joins, the job runs")
	before = snap()
	require.NoError(t, in.SetOnline([]int{0}, 103))
	require.Equal(t, []string{"resource offline"}, Changes(before, snap()), "a rank leaves, the job is cleaned up")
	before = snap()
	in.Advance(103 + CleanupSeconds)
	require.Equal(t, []string{"job free", "job clean"}, Changes(before, snap()), "the job is gone")
	before = snap()
	require.NoError(t, in.Drain([]int{1}, "x", false, 200))
	require.NoError(t, in.Drain([]int{0}, "y", false, 200))
	require.Equal(t, []string{"resource drain"}, Changes(before, snap()))
	before = snap()
	require.NoError(t, in.Undrain([]int{0, 1}, 201))
	require.Equal(t, []string{"resource undrain"}, Changes(before, snap()))
}
