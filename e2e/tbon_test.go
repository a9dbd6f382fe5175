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
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/brokersim"
	"github.com/fluxfed/fluxfed/member"
	"github.com/fluxfed/fluxfed/member/render"
	"github.com/fluxfed/fluxfed/member/render/curve"
)

// side is one MiniCluster of the federation as it runs: where, and its Running pods.
type side struct {
	cluster string
	mc      *fluxv1alpha2.MiniCluster
	pods    []corev1.Pod
	toml    []byte
	cert    []byte
}

// liveFederation reads, from the clusters, every Running broker pod of root and its children,
// with the broker.toml and certificate its MiniCluster's reconciler rendered for it.
func liveFederation(t *testing.T, root *fluxv1alpha2.MiniCluster) []side {
	t.Helper()
	ctx := context.Background()
	sides := []side{{cluster: "hub", mc: root}}
	for _, b := range root.Spec.Flux.Bursting.Clusters {
		child := &fluxv1alpha2.MiniCluster{ObjectMeta: metav1.ObjectMeta{Namespace: root.Namespace, Name: b.Name}}
		require.True(t, get(t, b.Cluster, child))
		sides = append(sides, side{cluster: b.Cluster, mc: child})
	}
	for i := range sides {
		s := &sides[i]
		c := shared.Clients[s.cluster]
		var pods corev1.PodList
		require.NoError(t, c.List(ctx, &pods, client.InNamespace(s.mc.Namespace),
			client.MatchingLabels{batchv1.JobNameLabel: render.JobName(s.mc)}))
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				s.pods = append(s.pods, p)
			}
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.mc.Namespace, Name: render.ConfigMapName(s.mc)}}
		require.True(t, get(t, s.cluster, cm))
		s.toml = []byte(cm.Data[render.KeyBrokerTOML])
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.mc.Namespace, Name: render.CurveSecretName(s.mc)}}
		require.True(t, get(t, s.cluster, secret))
		s.cert = secret.Data[render.KeyCurveCert]
	}
	return sides
}

// network routes the federation's names as the clusters would: inside each cluster, the names
// a pod's headless Service (its subdomain) gives it; across clusters, only the lead broker's
// advertised node address and NodePort, to rank 0.
func network(t *testing.T, root *fluxv1alpha2.MiniCluster, sides []side) *brokersim.Network {
	t.Helper()
	n := brokersim.NewNetwork()
	for _, s := range sides {
		bySubdomain := map[string][]string{}
		for _, p := range s.pods {
			bySubdomain[p.Spec.Subdomain] = append(bySubdomain[p.Spec.Subdomain], p.Spec.Hostname)
		}
		for subdomain, hosts := range bySubdomain {
			require.NoError(t, n.AddHeadlessService(s.cluster, s.mc.Namespace, subdomain, render.DefaultBrokerPort, hosts...))
		}
	}
	lead := root.Status.LeadBroker
	require.NotNil(t, lead)
	require.NoError(t, n.AddLead(brokersim.Lead{Address: lead.Address, Port: int(lead.Port),
		Target: brokersim.Listener{Cluster: "hub", Hostname: root.Name + "-0", Port: render.DefaultBrokerPort}}))
	return n
}

// brokers returns one stand-in per Running pod; change, when set, may alter a side's config.
func brokers(sides []side, change func(s side, toml, cert []byte) ([]byte, []byte)) []brokersim.Broker {
	var out []brokersim.Broker
	for _, s := range sides {
		toml, cert := s.toml, s.cert
		if change != nil {
			toml, cert = change(s, toml, cert)
		}
		for _, p := range s.pods {
			out = append(out, brokersim.Broker{Cluster: s.cluster, Hostname: p.Spec.Hostname, BrokerTOML: toml, CurveCert: cert})
		}
	}
	return out
}

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
	ns := namespace(t)
	root := example(t, "bursting-root.yaml")
	root.Namespace = ns
	root.Spec.Size = 4
	root.Spec.Flux.Bursting.Clusters[0].Size = 9
	root.Spec.Flux.Bursting.Clusters[1].Size = 8
	require.NoError(t, shared.Clients["hub"].Create(ctx, root))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, get(c, "hub", root))
		require.True(c, meta.IsStatusConditionTrue(root.Status.Conditions, fluxv1alpha2.ConditionReady))
		require.True(c, meta.IsStatusConditionTrue(root.Status.Conditions, fluxv1alpha2.ConditionBurstsReady))
	}, wait, tick)
	sides := liveFederation(t, root)
	n := network(t, root, sides)

	res := join(t, brokers(sides, nil), n)
	require.Empty(t, res.Failures)
	require.Len(t, res.Hosts, 21)
	require.True(t, res.Complete(), "missing: %v", res.Missing())
	require.Equal(t, root.Name+"-0", res.Root)
	t.Logf("%d brokers in 3 clusters joined rank 0 in %v (every rank answered rank 0 after %v)", len(res.Reachable), res.JoinTime, res.Elapsed)

	t.Run("a burst with another certificate", func(t *testing.T) {
		other, err := curve.Generate(rand.Reader)
		require.NoError(t, err)
		res := join(t, brokers(sides, func(s side, toml, cert []byte) ([]byte, []byte) {
			if s.mc.Name == "burst-b" {
				return toml, curve.File(other)
			}
			return toml, cert
		}), n)
		f, ok := res.FailureOf("burst-b-0")
		require.True(t, ok)
		require.Equal(t, brokersim.ReasonCertificate, f.Reason, f.Error())
		require.False(t, res.Complete())
	})

	t.Run("a hostlist in another order", func(t *testing.T) {
		res := join(t, brokers(sides, func(s side, toml, cert []byte) ([]byte, []byte) {
			if s.mc.Name != "burst-b" {
				return toml, cert
			}
			reordered := s.mc.DeepCopy()
			c := reordered.Spec.Flux.Bursting.Clusters
			reordered.Spec.Flux.Bursting.Clusters = []fluxv1alpha2.Burst{c[1], c[0]}
			rendered, err := member.Render(reordered)
			require.NoError(t, err)
			return rendered.BrokerTOML, cert
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
		res := join(t, brokers(sides, func(_ side, toml, cert []byte) ([]byte, []byte) {
			edited := parents.ReplaceAllString(string(toml), "")
			edited = strings.Replace(edited, "[tbon]\n", "[tbon]\ntopo = \"kary:1\"\n", 1)
			return []byte(edited), cert
		}), n)
		f, ok := res.FailureOf("burst-a-0")
		require.True(t, ok)
		require.Equal(t, brokersim.ReasonUnresolved, f.Reason, f.Error())
		require.Contains(t, f.Detail, fmt.Sprintf("%s-3", root.Name), "its parent is the root's last broker")
	})
}
