package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/fleet"
	"github.com/fluxfed/fluxfed/e2e/fluxsim"
	"github.com/fluxfed/fluxfed/flux"
)

// scaleDownAfter is the idle time of the elastic cycle, short for the test.
const scaleDownAfter = 8 * time.Second

// TestAJobGrowsTheBurstsThatShrinkOnceIdle runs the elastic cycle on three clusters, with a
// stand-in Flux that the hub reaches through the exec API as it would reach the real one: a job
// that needs the reserved ranks waits, the hub grows both bursts, their brokers join the running
// instance, the job runs and ends, and once the ranks idled for scaleDownAfter the hub drains
// them and shrinks the bursts back to 0. No job is killed and the root's pods never restart.
// It logs the times the closing note of the elastic-bursting work reports.
func TestAJobGrowsTheBurstsThatShrinkOnceIdle(t *testing.T) {
	ctx := context.Background()
	// The stand-in's directory goes last: until the root is gone, the hub runs flux in it.
	dir := t.TempDir()
	root, ns := applyExample(t, "bursting-on-demand.yaml", func(mc *fluxv1alpha2.MiniCluster) {
		mc.Spec.Flux.Bursting.Scaling.ScaleDownAfter = &metav1.Duration{Duration: scaleDownAfter}
	})
	x, err := shared.StartFlux(ctx, root, dir)
	require.NoError(t, err)
	t.Cleanup(x.Stop)
	t.Cleanup(func() {
		// The hub forgets the root, and stops following its instance, once it is gone.
		if err := shared.Clients["hub"].Delete(ctx, root); client.IgnoreNotFound(err) != nil {
			t.Errorf("deleting the root: %v", err)
			return
		}
		assert.EventuallyWithT(t, func(c *assert.CollectT) {
			require.False(c, get(c, "hub", root.DeepCopy()), "the root is still there")
		}, wait, tick)
	})

	// The instance runs with the root's 2 ranks; the 4 reserved ones are offline.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, get(c, "hub", root))
		f := root.Status.Flux
		require.NotNil(c, f)
		require.Equal(c, fluxv1alpha2.FluxStatus{State: "run", Size: 6, Online: 2}, *f)
		for _, b := range []string{"burst-a", "burst-b"} {
			require.Equal(c, fluxv1alpha2.BurstReserved, burstOf(root, b).Phase, b)
		}
	}, wait, tick, "flux: %v", x.Err())
	rootPods := podUIDs(t, "hub", ns, root.Name)
	require.Len(t, rootPods, 2)

	// A job that needs every reserved rank waits for them.
	submitted := time.Now()
	id, err := x.Exec(ctx, "submit", "-N6", "sleep", "4")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(id, "ƒ"), id)

	var decided, joined time.Time
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, get(c, "hub", root))
		a, b := burstOf(root, "burst-a"), burstOf(root, "burst-b")
		if decided.IsZero() && (a.Size > 0 || b.Size > 0) {
			decided = time.Now()
		}
		require.Equal(c, []int32{2, 2}, []int32{a.Size, b.Size}, "the hub grew both bursts to their reservation")
		require.Equal(c, []int32{2, 2}, []int32{a.Online, b.Online}, "Flux sees every new rank online")
		require.Equal(c, []fluxv1alpha2.BurstPhase{fluxv1alpha2.BurstJoined, fluxv1alpha2.BurstJoined}, []fluxv1alpha2.BurstPhase{a.Phase, b.Phase})
		if joined.IsZero() {
			joined = time.Now()
		}
	}, wait, 100*time.Millisecond, "flux: %v", x.Err())
	allOnline := firstOnline(t, x, 6)
	in, err := x.Instance()
	require.NoError(t, err)
	require.Len(t, in.Jobs, 1)
	job := in.Jobs[0]
	require.NotZero(t, job.TRun, "the job ran once the ranks joined")
	require.Equal(t, []int{0, 1, 2, 3, 4, 5}, job.Ranks)

	// The job ends; the bursts' ranks idle, are drained in Flux, and the bursts shrink to 0.
	var shrunk time.Time
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, get(c, "hub", root))
		for _, b := range []string{"burst-a", "burst-b"} {
			s := burstOf(root, b)
			require.Equal(c, fluxv1alpha2.BurstReserved, s.Phase, b)
			require.Zero(c, s.Size, b)
		}
		for _, m := range []string{"member-a", "member-b"} {
			require.Empty(c, leftovers(c, m, ns), "nothing is left on %s", m)
		}
		shrunk = time.Now()
	}, wait+scaleDownAfter, 100*time.Millisecond, "flux: %v", x.Err())

	in, err = x.Instance()
	require.NoError(t, err)
	job = in.Jobs[0]
	require.Equal(t, fluxsim.StateInactive, job.State)
	require.False(t, job.Killed, "the job ran to its end")
	require.Zero(t, in.Killed, "no job was killed")
	for r := 2; r < 6; r++ {
		require.Equal(t, flux.DrainReason, in.Drained[r].Reason, "rank %d stays drained by fluxfed until it is needed", r)
	}
	require.Equal(t, rootPods, podUIDs(t, "hub", ns, root.Name), "the root's brokers never restarted")
	// Every decision is an event of its own, each burst's too, with the demand or the idle time.
	// The hub records events after it writes the status, in the background: wait for them.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, want := range []struct{ reason, message string }{
			{"BurstScaledUp", "raised burst burst-a from 0 to 2 brokers: 1 job waits for 6 nodes"},
			{"BurstScaledUp", "raised burst burst-b from 0 to 2 brokers: 1 job waits for 6 nodes"},
			{"BurstScaledDown", "drained ranks 2-3 of burst burst-a in Flux before it shrinks: no job waits, and ranks 2-3 ran no job for 8s"},
			{"BurstScaledDown", "drained ranks 4-5 of burst burst-b in Flux before it shrinks"},
			{"BurstScaledDown", "lowered burst burst-a from 2 to 0 brokers"},
			{"BurstScaledDown", "lowered burst burst-b from 2 to 0 brokers"},
		} {
			require.True(c, slices.ContainsFunc(events(t, ns, root.Name, want.reason), func(e corev1.Event) bool {
				return strings.Contains(e.Message, want.message)
			}), "%s %q", want.reason, want.message)
		}
	}, wait, tick)

	ended := floatTime(job.TInactive)
	t.Logf("job waiting -> hub decision: %v", decided.Sub(submitted).Round(10*time.Millisecond))
	t.Logf("decision -> every new rank online in Flux: %v (the hub reported them Joined after %v)",
		allOnline.Sub(decided).Round(10*time.Millisecond), joined.Sub(decided).Round(10*time.Millisecond))
	t.Logf("job end -> bursts shrunk: %v (scaleDownAfter %v, so %v of draining and shrinking)",
		shrunk.Sub(ended).Round(10*time.Millisecond), scaleDownAfter, (shrunk.Sub(ended) - scaleDownAfter).Round(10*time.Millisecond))
	t.Logf("jobs killed: %d", in.Killed)
}

// firstOnline returns when the stand-in instance first had n ranks online.
func firstOnline(t *testing.T, x *fleet.Flux, n int) time.Time {
	t.Helper()
	for _, c := range x.Changes() {
		if len(c.Ranks) == n {
			return c.Time
		}
	}
	t.Fatalf("the instance never had %d ranks online", n)
	return time.Time{}
}

func floatTime(s float64) time.Time {
	return time.Unix(0, int64(s*1e9))
}

// events returns the hub's events of reason about the MiniCluster name, oldest first.
func events(t *testing.T, ns, name, reason string) []corev1.Event {
	var list corev1.EventList
	require.NoError(t, shared.Clients["hub"].List(context.Background(), &list, client.InNamespace(ns)))
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}
