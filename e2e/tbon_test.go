package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/brokersim"
	"github.com/fluxfed/fluxfed/e2e/fleet"
	"github.com/fluxfed/fluxfed/member/render"
	"github.com/fluxfed/fluxfed/member/render/curve"
)

func join(t *testing.T, bs []brokersim.Broker, n *brokersim.Network) *brokersim.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := brokersim.Run(ctx, bs, n)
	require.NoError(t, err)
	return res
}

// TestTheFederationsOverlayJoins runs a stand-in broker for every Running pod of a federation of
// three clusters and 21 brokers, with the config each cluster's reconciler rendered, and checks
// that rank 0 sees every rank join; then that a burst with another certificate, a hostlist in
// another order, or a topology whose parent lies in another cluster does not join.
func TestTheFederationsOverlayJoins(t *testing.T) {
	ctx := context.Background()
	root, _ := applyExample(t, "bursting-root.yaml", func(mc *fluxv1alpha2.MiniCluster) {
		mc.Spec.Size = 4
		mc.Spec.Flux.Bursting.Clusters[0].Size = 9
		mc.Spec.Flux.Bursting.Clusters[1].Size = 8
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, get(c, "hub", root))
		require.True(c, meta.IsStatusConditionTrue(root.Status.Conditions, fluxv1alpha2.ConditionReady))
		require.True(c, meta.IsStatusConditionTrue(root.Status.Conditions, fluxv1alpha2.ConditionBurstsReady))
	}, wait, tick)
	sides, err := shared.Federation(ctx, root)
	require.NoError(t, err)
	n, err := fleet.Network(root, sides)
	require.NoError(t, err)

	res := join(t, fleet.Brokers(sides, nil), n)
	require.Empty(t, res.Failures)
	require.Len(t, res.Hosts, 21)
	require.True(t, res.Complete(), "missing: %v", res.Missing())
	require.Equal(t, root.Name+"-0", res.Root)
	t.Logf("%d brokers in 3 clusters joined rank 0 in %v (every rank answered rank 0 after %v)", len(res.Reachable), res.JoinTime, res.Elapsed)

	t.Run("a burst with another certificate", func(t *testing.T) {
		other, err := curve.Generate(rand.Reader)
		require.NoError(t, err)
		res := join(t, fleet.Brokers(sides, func(s fleet.Side) ([]byte, []byte) {
			if s.MiniCluster.Name == "burst-b" {
				return s.BrokerTOML, curve.File(other)
			}
			return s.BrokerTOML, s.CurveCert
		}), n)
		f, ok := res.FailureOf("burst-b-0")
		require.True(t, ok)
		require.Equal(t, brokersim.ReasonCertificate, f.Reason, f.Error())
		require.False(t, res.Complete())
	})

	t.Run("a hostlist in another order", func(t *testing.T) {
		res := join(t, fleet.Brokers(sides, func(s fleet.Side) ([]byte, []byte) {
			if s.MiniCluster.Name != "burst-b" {
				return s.BrokerTOML, s.CurveCert
			}
			reordered := s.MiniCluster.DeepCopy()
			c := reordered.Spec.Flux.Bursting.Clusters
			reordered.Spec.Flux.Bursting.Clusters = []fluxv1alpha2.Burst{c[1], c[0]}
			rendered, err := render.Render(reordered)
			require.NoError(t, err)
			return rendered.BrokerTOML, s.CurveCert
		}), n)
		f, ok := res.FailureOf("burst-b-0")
		require.True(t, ok)
		require.Equal(t, brokersim.ReasonHostname, f.Reason, f.Error())
	})

	t.Run("a topology whose parent lies in another cluster", func(t *testing.T) {
		// kary:1 chains every rank under the one before: burst-a-0 would hang below the root's
		// last broker, which no member can reach. The plan refuses it; a hand-edited config
		// (parent keys dropped, the topology set) would not.
		parents := regexp.MustCompile(`, parent = "[^"]*"`)
		res := join(t, fleet.Brokers(sides, func(s fleet.Side) ([]byte, []byte) {
			edited := parents.ReplaceAllString(string(s.BrokerTOML), "")
			edited = strings.Replace(edited, "[tbon]\n", "[tbon]\ntopo = \"kary:1\"\n", 1)
			return []byte(edited), s.CurveCert
		}), n)
		f, ok := res.FailureOf("burst-a-0")
		require.True(t, ok)
		require.Equal(t, brokersim.ReasonUnresolved, f.Reason, f.Error())
		require.Contains(t, f.Detail, fmt.Sprintf("%s-3", root.Name), "its parent is the root's last broker")
	})
}
