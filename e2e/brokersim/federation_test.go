package brokersim_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/bursting"
	"github.com/fluxfed/fluxfed/e2e/brokersim"
	"github.com/fluxfed/fluxfed/member/admit"
	"github.com/fluxfed/fluxfed/member/render"
	"github.com/fluxfed/fluxfed/member/render/curve"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// hubCluster is the cluster the root runs in; lead is where the members reach its rank 0 (a
// node address and the NodePort of the lead broker Service).
const hubCluster = "hub"

var lead = bursting.Endpoint{Address: "127.100.0.10", Port: 30093}

// Root manifests of federations of three clusters: the root in the hub, two bursts in two
// member clusters, 24 brokers.
const (
	// nested is fluxfed's default tree: the root's ranks flat under rank 0, every burst a
	// subtree under its first broker.
	nested = `
metadata: {name: lammps, namespace: research, uid: 7f0c3e1a-0000-4000-8000-000000000001}
spec:
  size: 8
  containers: [{image: rockylinux:9, command: lmp -in in.reaxc.hns}]
  flux:
    bursting:
      clusters:
        - {name: burst-a, size: 8, cluster: member-a}
        - {name: burst-b, size: 8, cluster: member-b, namespace: research-burst}
`
	// binomial sizes the groups so that the binomial tree never crosses a cluster but
	// through rank 0: ranks 0-3 in the hub, 4-7 in member-a, 8-23 in member-b.
	binomial = `
metadata: {name: lammps, namespace: research, uid: 7f0c3e1a-0000-4000-8000-000000000002}
spec:
  size: 4
  containers: [{image: rockylinux:9}]
  flux:
    topology: binomial
    bursting:
      clusters:
        - {name: burst-a, size: 4, cluster: member-a}
        - {name: burst-b, size: 16, cluster: member-b}
`
	// flat puts every broker under rank 0: every burst broker crosses to the hub.
	flat = `
metadata: {name: lammps, namespace: research, uid: 7f0c3e1a-0000-4000-8000-000000000003}
spec:
  size: 8
  containers: [{image: rockylinux:9}]
  flux:
    topology: kary:0
    bursting:
      clusters:
        - {name: burst-a, size: 8, cluster: member-a}
        - {name: burst-b, size: 8, cluster: member-b}
`
)

// federation is a rendered federation: every broker pod, and the network of the clusters.
type federation struct {
	root    *fluxv1alpha2.MiniCluster
	plan    *bursting.Plan
	brokers []brokersim.Broker
	network *brokersim.Network
}

// fedOptions change a federation while it is built.
type fedOptions struct {
	// child changes a child MiniCluster as its member stores it, before it is rendered.
	child func(burst string, mc *fluxv1alpha2.MiniCluster)
	// noLead leaves the lead broker's address out of the network.
	noLead bool
}

// newFederation admits root as the hub's API server would, plans it, admits every child as a
// member's API server would, renders every side with the member's own renderers, and lays out
// the network as the clusters do: each cluster resolves the headless Service names of its own
// pods, and every cluster resolves the lead broker's address to rank 0.
func newFederation(tb testing.TB, manifest string, opts fedOptions) *federation {
	tb.Helper()
	root, err := admit.Admit([]byte("apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\n" + manifest))
	require.NoError(tb, err)
	plan, err := bursting.NewPlan(root, lead, "hub")
	require.NoError(tb, err)
	cert := certificate(tb, 7)
	f := &federation{root: root, plan: plan, network: brokersim.NewNetwork()}

	pods := func(mc *fluxv1alpha2.MiniCluster, cluster string) {
		out, err := render.Render(mc)
		require.NoError(tb, err, "rendering %s", mc.Name)
		var hosts []string
		for i := range int(mc.Spec.Size) {
			name := fmt.Sprintf("%s-%d", mc.Name, i)
			hosts = append(hosts, name)
			f.brokers = append(f.brokers, brokersim.Broker{Cluster: cluster, Hostname: name, BrokerTOML: out.BrokerTOML, CurveCert: cert})
		}
		require.NoError(tb, f.network.AddHeadlessService(cluster, mc.Namespace, mc.HeadlessName(), names.DefaultBrokerPort, hosts...))
	}
	pods(root, hubCluster)
	if !opts.noLead {
		require.NoError(tb, f.network.AddLead(brokersim.Lead{
			Address: plan.Lead.Address, Port: int(plan.Lead.Port),
			Target: brokersim.Listener{Cluster: hubCluster, Hostname: root.Name + "-0", Port: names.DefaultBrokerPort},
		}))
	}
	for _, c := range plan.Children {
		data, err := yaml.Marshal(c.MiniCluster)
		require.NoError(tb, err)
		child, err := admit.Admit(data)
		require.NoError(tb, err, "the member refuses child %s", c.Burst)
		if opts.child != nil {
			opts.child(c.Burst, child)
		}
		pods(child, c.Cluster)
	}
	return f
}

// inCluster returns the indexes of the brokers of cluster.
func (f *federation) inCluster(cluster string) []int {
	var out []int
	for i, b := range f.brokers {
		if b.Cluster == cluster {
			out = append(out, i)
		}
	}
	return out
}

func (f *federation) run(tb testing.TB) *brokersim.Result {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := brokersim.Run(ctx, f.brokers, f.network)
	require.NoError(tb, err)
	require.False(tb, res.TimedOut, "the run did not settle:\n%v", res.Err())
	return res
}

func certificate(tb testing.TB, seed byte) []byte {
	tb.Helper()
	c, err := curve.Generate(bytes.NewReader(bytes.Repeat([]byte{seed}, curve.KeySize)), curve.Metadata{Key: "name", Value: "brokersim"})
	require.NoError(tb, err)
	return curve.File(c)
}

func rankRange(from, to int) []int {
	var out []int
	for r := from; r < to; r++ {
		out = append(out, r)
	}
	return out
}

// TestFederationJoins runs every broker of federations of three clusters and checks that
// rank 0 hears of every rank and reaches every rank through the tree.
func TestFederationJoins(t *testing.T) {
	for name, manifest := range map[string]string{"nested": nested, "binomial": binomial, "flat": flat} {
		t.Run(name, func(t *testing.T) {
			f := newFederation(t, manifest, fedOptions{})
			require.Len(t, f.brokers, 24)
			require.Len(t, f.plan.Children, 2)
			res := f.run(t)
			require.NoError(t, res.Err())
			require.Equal(t, "lammps-0", res.Root)
			require.Equal(t, rankRange(0, 24), res.Online)
			require.Equal(t, rankRange(0, 24), res.Reachable)
			require.Empty(t, res.Failures)
			t.Logf("%d brokers in 3 clusters joined in %v (%v with the requests from rank 0)", len(f.brokers), res.JoinTime, res.Elapsed)
		})
	}
}

// TestFederationFailsToJoin breaks federations the ways a hub could, and checks that the
// brokers concerned do not join, for the reason a real broker would not.
func TestFederationFailsToJoin(t *testing.T) {
	tests := []struct {
		name     string
		manifest string
		opts     fedOptions
		// brokers changes the brokers after rendering.
		brokers func(t *testing.T, f *federation)
		// want maps every failing host to its reason; every other rank must be reachable.
		want map[string]brokersim.Reason
		// detail is part of the detail of the failure of host detailOf.
		detailOf, detail string
	}{
		{
			name:     "a burst with another certificate",
			manifest: nested,
			brokers: func(t *testing.T, f *federation) {
				other := certificate(t, 9)
				for _, i := range f.inCluster("member-b") {
					f.brokers[i].CurveCert = other
				}
			},
			want:     rest(map[string]brokersim.Reason{"burst-b-0": brokersim.ReasonCertificate}, "burst-b", brokersim.ReasonOrphaned),
			detailOf: "burst-b-0", detail: "the CURVE handshake with its parent 127.100.0.10 (rank 0) at tcp://127.100.0.10:30093 failed, so the two hold different certificates",
		},
		{
			name:     "a child with the bursts in another order",
			manifest: nested,
			opts: fedOptions{child: func(burst string, mc *fluxv1alpha2.MiniCluster) {
				if burst == "burst-b" {
					c := mc.Spec.Flux.Bursting.Clusters
					mc.Spec.Flux.Bursting.Clusters = []fluxv1alpha2.Burst{c[1], c[0]}
				}
			}},
			want:     rest(map[string]brokersim.Reason{"burst-b-0": brokersim.ReasonHostname}, "burst-b", brokersim.ReasonOrphaned),
			detailOf: "burst-b-0", detail: "rejecting connection from burst-b-0 (rank 8): burst-a-0 is configured as rank 8: mismatched config?",
		},
		{
			name:     "a topology whose parents lie in another cluster",
			manifest: flat,
			brokers: func(t *testing.T, f *federation) {
				// kary:1 is a chain: the first broker of each burst hangs below the last broker
				// of the group before it. The plan refuses it, so the rendered flat tree is
				// turned into one, as a -Stbon.topo or a hand-edited file would.
				for i := range f.brokers {
					toml := string(f.brokers[i].BrokerTOML)
					require.Contains(t, toml, `topo = "kary:0"`)
					f.brokers[i].BrokerTOML = []byte(strings.Replace(toml, `topo = "kary:0"`, `topo = "kary:1"`, 1))
				}
			},
			want: rest(rest(map[string]brokersim.Reason{
				"burst-a-0": brokersim.ReasonUnresolved,
				"burst-b-0": brokersim.ReasonUnresolved,
			}, "burst-a", brokersim.ReasonOrphaned), "burst-b", brokersim.ReasonOrphaned),
			detailOf: "burst-a-0",
			detail:   "connecting to its parent lammps-7 (rank 7) at tcp://lammps-7.burst-a.research.svc.cluster.local:8050: lammps-7.burst-a.research.svc.cluster.local:8050 does not resolve from cluster member-a",
		},
		{
			name:     "a flat root side and nested burst sides",
			manifest: flat,
			opts: fedOptions{child: func(_ string, mc *fluxv1alpha2.MiniCluster) {
				mc.Spec.Flux.Topology = "" // the bursts nest, the root does not know
			}},
			// Every rank shows up online, but rank 0 routes to the nested ranks directly.
			want:     rest(rest(map[string]brokersim.Reason{}, "burst-a", brokersim.ReasonUnreachable), "burst-b", brokersim.ReasonUnreachable),
			detailOf: "burst-a-1",
			detail:   "lammps-0 (rank 0) routes rank 9 through its child rank 9 (burst-a-1) in its topology kary:0, and rank 9 never joined it",
		},
		{
			name:     "a nested root side and flat burst sides",
			manifest: nested,
			opts: fedOptions{child: func(_ string, mc *fluxv1alpha2.MiniCluster) {
				mc.Spec.Flux.Topology = "kary:0"
			}},
			want:     rest(rest(map[string]brokersim.Reason{}, "burst-a", brokersim.ReasonNotChild), "burst-b", brokersim.ReasonNotChild),
			detailOf: "burst-a-1",
			detail:   "rejecting connection from burst-a-1 (rank 9): rank 9 is not a child of rank 0: mismatched config? (in its topology custom (the default), rank 9's parent is 8)",
		},
		{
			name:     "the lead broker not exposed",
			manifest: nested,
			opts:     fedOptions{noLead: true},
			want: rest(rest(map[string]brokersim.Reason{
				"burst-a-0": brokersim.ReasonUnresolved,
				"burst-b-0": brokersim.ReasonUnresolved,
			}, "burst-a", brokersim.ReasonOrphaned), "burst-b", brokersim.ReasonOrphaned),
			detailOf: "burst-b-0", detail: "127.100.0.10:30093 does not resolve from cluster member-b",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFederation(t, tt.manifest, tt.opts)
			if tt.brokers != nil {
				tt.brokers(t, f)
			}
			res := f.run(t)
			t.Logf("%v", res.Err())
			require.False(t, res.Complete())
			got := map[string]brokersim.Reason{}
			for _, fl := range res.Failures {
				require.NotContains(t, got, fl.Host, "two failures of %s:\n%v", fl.Host, res.Err())
				got[fl.Host] = fl.Reason
			}
			require.Equal(t, tt.want, got, "%v", res.Err())
			fl, ok := res.FailureOf(tt.detailOf)
			require.True(t, ok)
			require.Contains(t, fl.Detail, tt.detail)
			require.ElementsMatch(t, keys(tt.want), res.Missing(), "every other rank is reachable")
		})
	}
}

// rest sets reason for the brokers of an 8-broker burst but its first.
func rest(m map[string]brokersim.Reason, burst string, reason brokersim.Reason) map[string]brokersim.Reason {
	for i := 1; i < 8; i++ {
		m[fmt.Sprintf("%s-%d", burst, i)] = reason
	}
	return m
}

func keys[V any](m map[string]V) []string {
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	return out
}
