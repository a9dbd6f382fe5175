//go:build realpods

package realpodlane

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/fleet"
	"github.com/fluxfed/fluxfed/e2e/lanetest"
)

// scaleDownAfter is the idle time of the on-demand root, short for the test.
const scaleDownAfter = 10 * time.Second

// testOnDemand runs the on-demand cycle on real pods with the hub's default settings: a root of
// two brokers with two bursts reserved at 0 (up to 2 brokers each) gets a job that needs every
// reserved rank; the hub grows both bursts, their brokers join from the members' real pods, the
// job runs and ends, and once idle the bursts are drained and shrunk to 0.
func testOnDemand(t *testing.T, f *fleet.Fleet) {
	ctx := context.Background()
	hubClient := f.Clients["hub"]
	const ns = "on-demand"
	require.NoError(t, hubClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	describeOnFailure(t, hubClient, ns)
	for _, m := range f.Members {
		describeOnFailure(t, f.Clients[m.Name], ns)
	}
	root := lanetest.OnDemandBursts(realMiniCluster("on-demand", ns, 2, "hostname").Interactive().Expose(hubAddress.String()), scaleDownAfter).Obj()
	created := time.Now()
	require.NoError(t, hubClient.Create(ctx, root))
	t.Cleanup(func() { _ = hubClient.Delete(context.Background(), root) })
	got := &fluxv1alpha2.MiniCluster{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, hubClient.Get(ctx, client.ObjectKeyFromObject(root), got))
		require.NotNil(c, got.Status.Flux)
		require.Equal(c, fluxv1alpha2.FluxStatus{State: "run", Size: 6, Online: 2}, *got.Status.Flux)
	}, busyWait, time.Second)
	t.Logf("The on-demand root runs on its two ranks, as the hub reads it, %s after its creation", time.Since(created).Round(100*time.Millisecond))

	cycle := lanetest.Cycle{Clients: f.Clients, Root: root, Wait: busyWait, Tick: time.Second, ScaleDownAfter: scaleDownAfter,
		FluxIn: func(ctx context.Context, t require.TestingT, args ...string) (string, error) {
			return fluxIn(ctx, t, f, root, args...)
		}}
	at := cycle.Run(t, func() time.Time {
		_, err := fluxIn(ctx, t, f, root, "submit", "-N6", "sleep", "4")
		require.NoError(t, err)
		return time.Now()
	})
	t.Logf("On-demand cycle on real pods, the hub's default settings (load average %s): %s", loadAverage(), lanetest.Timeline(at))
}
