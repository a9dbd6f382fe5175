package hub_test

import (
	"context"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hub"
	"github.com/fluxfed/fluxfed/internal/metrics"
)

// scraped is what the manager's metrics endpoint would serve now: controller-runtime's registry.
type scraped []*dto.MetricFamily

func scrapeRegistry(t require.TestingT) scraped {
	families, err := ctrlmetrics.Registry.Gather()
	require.NoError(t, err)
	return families
}

// value returns the value of the series of name whose labels include labels (a histogram's
// sample count), and whether there is one.
func (s scraped) value(name string, labels map[string]string) (float64, bool) {
	for _, mf := range s {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			switch {
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// of returns the names of fluxfed's series whose labels include labels.
func (s scraped) of(labels map[string]string) []string {
	var out []string
	for _, mf := range s {
		if !strings.HasPrefix(mf.GetName(), "fluxfed_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m, labels) {
				out = append(out, mf.GetName())
			}
		}
	}
	return out
}

func hasLabels(m *dto.Metric, labels map[string]string) bool {
	found := 0
	for _, l := range m.GetLabel() {
		if v, ok := labels[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			found++
		}
	}
	return found == len(labels)
}

// requireSeries requires the series of name with labels to be there with value want.
func requireSeries(t require.TestingT, s scraped, name string, labels map[string]string, want float64) {
	got, ok := s.value(name, labels)
	require.True(t, ok, "no series %s%v", name, labels)
	require.Equal(t, want, got, "%s%v", name, labels)
}

// TestTheHubsMetricsFollowABurst scrapes fluxfed's series after a root bursts onto two members,
// one on demand: they say what the root's status says; a member that stops answering is
// NotReady and its burst Unreachable; a root deleted meanwhile is pending cleanup; once it is
// gone, none of its series is left.
func TestTheHubsMetricsFollowABurst(t *testing.T) {
	f := startFederation(t, hub.Options{FluxInterval: 300 * time.Millisecond, CleanupTimeout: time.Hour}, "member-a", "member-b")
	ctx := context.Background()
	ns := f.namespace(t)
	a, b := f.members["member-a"], f.members["member-b"]
	root := newRoot(ns, "measured",
		fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 0, MaxSize: 2},
		fluxv1alpha2.Burst{Name: "burst-b", Cluster: "member-b", Size: 1})
	root.Spec.Flux.Bursting.Scaling = &fluxv1alpha2.Scaling{Mode: fluxv1alpha2.ScalingOnDemand, ScaleDownAfter: &metav1.Duration{Duration: time.Hour}}
	require.NoError(t, f.hub.Client.Create(ctx, root))
	f.waitBurst(t, root, "burst-b", fluxv1alpha2.BurstApplied)

	// A job waits for 4 nodes; the root's 2 ranks and burst-b's are online: burst-a is raised to
	// 1 broker.
	hosts := []string{"measured-0", "measured-1", "measured-2", "measured-3", "burst-a-0", "burst-a-1", "burst-b-0"}
	dir := f.execs.standInFlux(t, ns)
	instance(t, dir, hosts, fluxState{online: map[int]bool{0: true, 1: true, 6: true}, pending: 4})
	runningLead(t, f, root, "measured")
	rootLabels := map[string]string{metrics.LabelNamespace: ns, metrics.LabelRoot: "measured"}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		child := a.child(c, ns, "burst-a")
		require.NotNil(c, child)
		require.Equal(c, int32(1), child.Spec.Size)
		st := f.root(c, root).Status
		require.NotNil(c, st.Flux)
		require.Equal(c, fluxv1alpha2.FluxStatus{State: "run", Size: 7, Online: 3, PendingJobs: 1, PendingNodes: 4}, *st.Flux)
		require.Equal(c, fluxv1alpha2.BurstApplied, burstStatus(f.root(c, root), "burst-a").Phase)

		s := scrapeRegistry(c)
		for _, phase := range metrics.BurstPhases {
			want := 0.0
			if phase == fluxv1alpha2.BurstApplied {
				want = 2 // no pod runs here: both children are applied, none ready
			}
			requireSeries(c, s, "fluxfed_bursts", with(rootLabels, metrics.LabelPhase, string(phase)), want)
		}
		requireSeries(c, s, "fluxfed_flux_ranks", rootLabels, 7)
		requireSeries(c, s, "fluxfed_flux_ranks_online", rootLabels, 3)
		requireSeries(c, s, "fluxfed_flux_pending_jobs", rootLabels, 1)
		requireSeries(c, s, "fluxfed_flux_pending_nodes", rootLabels, 4)
		requireSeries(c, s, "fluxfed_flux_answering", rootLabels, 1)
		requireSeries(c, s, "fluxfed_scale_decisions_total", with(rootLabels, metrics.LabelBurst, "burst-a", metrics.LabelDirection, metrics.DirectionUp), 1)
		_, down := s.value("fluxfed_scale_decisions_total", with(rootLabels, metrics.LabelDirection, metrics.DirectionDown))
		require.False(c, down, "nothing was scaled down")
		_, pending := s.value("fluxfed_cleanup_pending", rootLabels)
		require.False(c, pending)
		for _, m := range []string{"member-a", "member-b"} {
			requireSeries(c, s, "fluxfed_member_health", map[string]string{metrics.LabelMember: m, metrics.LabelHealth: metrics.HealthReady}, 1)
			requireSeries(c, s, "fluxfed_member_health", map[string]string{metrics.LabelMember: m, metrics.LabelHealth: metrics.HealthNotReady}, 0)
			requireSeries(c, s, "fluxfed_orphans", map[string]string{metrics.LabelMember: m}, 0)
			pushes, ok := s.value("fluxfed_push_duration_seconds", map[string]string{metrics.LabelMember: m})
			require.True(c, ok)
			require.Positive(c, pushes, "the pushes to %s were timed", m)
		}
	}, wait, tick)

	// member-b stops answering: it is NotReady and its burst Unreachable.
	b.proxy.Cut()
	f.waitBurst(t, root, "burst-b", fluxv1alpha2.BurstUnreachable)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		s := scrapeRegistry(c)
		requireSeries(c, s, "fluxfed_member_health", map[string]string{metrics.LabelMember: "member-b", metrics.LabelHealth: metrics.HealthNotReady}, 1)
		requireSeries(c, s, "fluxfed_member_health", map[string]string{metrics.LabelMember: "member-b", metrics.LabelHealth: metrics.HealthReady}, 0)
		requireSeries(c, s, "fluxfed_bursts", with(rootLabels, metrics.LabelPhase, string(fluxv1alpha2.BurstUnreachable)), 1)
		requireSeries(c, s, "fluxfed_bursts", with(rootLabels, metrics.LabelPhase, string(fluxv1alpha2.BurstApplied)), 1)
	}, wait, tick)

	// Deleted while member-b is down: the root waits for it.
	require.NoError(t, f.hub.Client.Delete(ctx, root))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Nil(c, a.child(c, ns, "burst-a"))
		requireSeries(c, scrapeRegistry(c), "fluxfed_cleanup_pending", rootLabels, 1)
	}, wait, tick)

	// member-b answers again: the root's children there go, then the root, and its series.
	b.proxy.Restore(t)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, apierrors.IsNotFound(f.hub.Client.Get(ctx, client.ObjectKeyFromObject(root), &fluxv1alpha2.MiniCluster{})))
		require.Empty(c, scrapeRegistry(c).of(map[string]string{metrics.LabelNamespace: ns}), "no series of a root that is gone")
	}, wait, tick)
	require.Nil(t, b.child(t, ns, "burst-b"))
	requireSeries(t, scrapeRegistry(t), "fluxfed_member_health", map[string]string{metrics.LabelMember: "member-b", metrics.LabelHealth: metrics.HealthReady}, 1)
}

// with returns labels and the given name-value pairs.
func with(labels map[string]string, pairs ...string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		out[k] = v
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		out[pairs[i]] = pairs[i+1]
	}
	return out
}
