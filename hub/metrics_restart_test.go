package hub_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hub"
	"github.com/fluxfed/fluxfed/internal/metrics"
)

// TestARestartedHubReportsTheFluxSeriesItRecorded restarts the hub while a root's Flux instance
// is slow to answer, then does not answer at all: the fluxfed_flux_* series are there from the
// start, as status.flux recorded them, and stay so, the instance not answering, instead of
// vanishing until its next answer.
func TestARestartedHubReportsTheFluxSeriesItRecorded(t *testing.T) {
	f := startFederation(t, hub.Options{FluxInterval: 300 * time.Millisecond}, "member-a")
	ctx := context.Background()
	ns := f.namespace(t)
	root := newRoot(ns, "remembered", fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 1, MaxSize: 2})
	require.NoError(t, f.hub.Client.Create(ctx, root))
	f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstApplied)

	// A job waits for 5 nodes; the root's ranks 0 and 1 and burst-a's first rank are online.
	hosts := []string{"remembered-0", "remembered-1", "remembered-2", "remembered-3", "burst-a-0", "burst-a-1"}
	instance(t, f.execs.standInFlux(t, ns), hosts, fluxState{online: map[int]bool{0: true, 1: true, 4: true}, pending: 5})
	runningLead(t, f, root, "remembered")
	seen := fluxv1alpha2.FluxStatus{State: "run", Size: 6, Online: 3, PendingJobs: 1, PendingNodes: 5}
	rootLabels := map[string]string{metrics.LabelNamespace: ns, metrics.LabelRoot: "remembered"}
	requireFluxSeries := func(t require.TestingT, answering float64) {
		s := scrapeRegistry(t)
		requireSeries(t, s, "fluxfed_flux_ranks", rootLabels, 6)
		requireSeries(t, s, "fluxfed_flux_ranks_online", rootLabels, 3)
		requireSeries(t, s, "fluxfed_flux_pending_jobs", rootLabels, 1)
		requireSeries(t, s, "fluxfed_flux_pending_nodes", rootLabels, 5)
		requireSeries(t, s, "fluxfed_flux_answering", rootLabels, answering)
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st := f.root(c, root).Status.Flux
		require.NotNil(c, st)
		require.Equal(c, seen, *st)
		requireFluxSeries(c, 1)
	}, wait, tick)

	// The hub stops; a new one starts with no series at all, as a new process does. Its
	// questions to the instance hang until released, then fail.
	f.stopHub()
	metrics.ForgetRoot(ns, "remembered")
	require.Empty(t, scrapeRegistry(t).of(rootLabels))
	asked, release := make(chan struct{}, 1), make(chan struct{})
	f.opts.Exec = func(ctx context.Context, _, _, _ string, _ []string) ([]byte, error) {
		select {
		case asked <- struct{}{}:
		default:
		}
		select {
		case <-release:
			return nil, errors.New("command terminated with exit code 1: flux-uptime: Unable to connect to Flux")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.startHub(t)
	select {
	case <-asked:
	case <-time.After(wait):
		require.FailNow(t, "the restarted hub never asked the root's Flux instance")
	}
	// Asked, and no answer yet: the series are those status.flux recorded.
	require.EventuallyWithT(t, func(c *assert.CollectT) { requireFluxSeries(c, 1) }, wait, tick)

	// The instance does not answer: the ranks last seen stay, status.flux says why it is not
	// asked, and the series say it does not answer.
	close(release)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st := f.root(c, root).Status.Flux
		require.NotNil(c, st)
		require.Contains(c, st.Message, "Unable to connect to Flux")
		withoutMessage := *st
		withoutMessage.Message = ""
		require.Equal(c, seen, withoutMessage, "the fields last seen are kept")
		requireFluxSeries(c, 0)
	}, wait, tick)
}
