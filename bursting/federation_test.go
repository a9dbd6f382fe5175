package bursting_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/pelletier/go-toml/v2"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/bursting"
	"github.com/fluxfed/fluxfed/e2e/fluxcheck"
	"github.com/fluxfed/fluxfed/hostlist"
	"github.com/fluxfed/fluxfed/member/admit"
	"github.com/fluxfed/fluxfed/member/render"
	"github.com/fluxfed/fluxfed/member/render/curve"
)

const rootCluster = "hub"

var lead = bursting.Endpoint{Address: "127.0.2.10", Port: 30093}

// roots are root manifests as users write them; the test admits them as the hub's API server
// would, so the plans start from what the hub really sees.
var roots = map[string]string{
	"example bursting-root": "", // read from examples/bursting-root.yaml
	"four bursts, one reserved, maxSize above size": `
metadata: {name: flux-sample, namespace: hpc, uid: 9d0c7c1e-0000-4000-8000-000000000002}
spec:
  size: 2
  maxSize: 3
  containers: [{name: app, image: rockylinux:9, command: hostname, runFlux: true}, {name: side, image: busybox, command: sleep infinity}]
  services: [{name: web, image: nginx}]
  flux:
    bursting:
      clusters:
        - {name: burst-0, size: 4, cluster: member-a}
        - {name: burst-1, size: 1}
        - {name: burst-2, size: 3, cluster: member-b, namespace: hpc-burst}
        - {name: 3rd, size: 2, cluster: member-a}
`,
	"binomial tree inside the bursts": `
metadata: {name: r, namespace: hpc}
spec:
  size: 2
  containers: [{image: rockylinux:9}]
  flux:
    topology: binomial
    bursting:
      clusters: [{name: x, size: 4, cluster: member-a}]
`,
	"each burst's hardware": `
metadata: {name: sim, namespace: hpc}
spec:
  size: 2
  maxSize: 3
  containers: [{image: rockylinux:9, command: hostname, resources: {limits: {cpu: 3500m, nvidia.com/gpu: 1}}}]
  flux:
    bursting:
      clusters:
        - {name: gpu, size: 2, maxSize: 4, cluster: member-a, resources: {cores: 48, gpus: 8}}
        - {name: spare, size: 1}
        - {name: cpu, size: 3, cluster: member-b, namespace: hpc-burst, resources: {cores: 128}}
`,
	"minimal service, custom names, a batch job": `
metadata: {name: lammps, namespace: team-a}
spec:
  size: 3
  interactive: false
  network: {headlessName: brokers}
  logging: {zeromq: true}
  containers: [{image: rockylinux:9, batch: true, command: "echo one\necho two", commands: {brokerPre: "echo lead"}}]
  archive: {path: /state/archive}
  flux:
    minimalService: true
    container: {mountPath: /opt/flux}
    scheduler: {simple: true}
    connectTimeout: ""
    bursting:
      clusters:
        - {name: remote, size: 5, cluster: member-a, namespace: team-a-burst}
        - {name: remote-2, size: 2, cluster: member-a, namespace: team-a-burst}
`,
}

func admitRoot(t *testing.T, name, manifest string) *fluxv1alpha2.MiniCluster {
	t.Helper()
	data := []byte("apiVersion: flux-framework.org/v1alpha2\nkind: MiniCluster\n" + manifest)
	if manifest == "" {
		var err error
		data, err = os.ReadFile(filepath.Join("..", "examples", "bursting-root.yaml"))
		require.NoError(t, err)
	}
	mc, err := admit.Admit(data)
	require.NoError(t, err, name)
	return mc
}

// TestFederationRendersAndJoins plans every root, admits every child as a member's API server
// would, renders the root and every child with the member's own renderers, and checks the
// broker.toml of every pod of every side together with fluxcheck: the same hosts and parents
// everywhere, every parent reachable from the broker's cluster, one certificate.
func TestFederationRendersAndJoins(t *testing.T) {
	cert, err := curve.Generate(bytes.NewReader(bytes.Repeat([]byte{7}, curve.KeySize)), curve.Metadata{Key: "name", Value: "test"})
	require.NoError(t, err)
	certFile := curve.File(cert)

	for name, manifest := range roots {
		t.Run(name, func(t *testing.T) {
			root := admitRoot(t, name, manifest)
			plan, err := bursting.NewPlan(root, lead, "hub-a")
			require.NoError(t, err)
			require.NotEmpty(t, plan.Children)

			var configs []fluxcheck.HostConfig
			pods := func(mc *fluxv1alpha2.MiniCluster, toml []byte, cluster string) {
				for i := range int(mc.Spec.Size) {
					configs = append(configs, fluxcheck.HostConfig{
						Hostname: fmt.Sprintf("%s-%d", mc.Name, i), BrokerTOML: toml, CurveCert: certFile, Cluster: cluster,
					})
				}
			}
			rendered, err := render.Render(root)
			require.NoError(t, err)
			pods(root, rendered.BrokerTOML, rootCluster)
			want := int(root.Spec.Size)

			headless := map[string]string{} // cluster/namespace/service -> MiniCluster
			services := 0
			for _, c := range plan.Children {
				child := admitChild(t, c)
				out, err := render.Render(child)
				require.NoError(t, err, "the member renders child %s", c.Burst)
				if diff := cmp.Diff(c.Layout, out.Layout, cmpopts.IgnoreUnexported(bursting.Layout{})); diff != "" {
					t.Errorf("child %s: the member lays the admitted child out differently (-plan +member):\n%s", c.Burst, diff)
				}
				for _, o := range out.Objects {
					if o.Kind.Kind != "Service" {
						continue
					}
					svc, ok := o.Apply.(interface{ GetName() *string })
					require.True(t, ok, "%T has no name", o.Apply)
					services++
					key := c.Cluster + "/" + c.Namespace + "/" + *svc.GetName()
					require.NotContains(t, headless, key, "children %s and %s would share a Service", headless[key], c.Burst)
					headless[key] = c.Burst
				}
				pods(child, out.BrokerTOML, c.Cluster)
				want += int(c.MiniCluster.Spec.Size)
			}
			require.Len(t, headless, len(plan.Children))
			require.Equal(t, len(plan.Children), services)
			require.Len(t, configs, want)
			require.NoError(t, fluxcheck.Check(configs))
		})
	}
}

// TestFederationCheckSeesADisagreement shows that the check above is not vacuous: a child
// whose tree differs from the root's (flat instead of one subtree per burst) fails it.
func TestFederationCheckSeesADisagreement(t *testing.T) {
	cert, err := curve.Generate(bytes.NewReader(bytes.Repeat([]byte{7}, curve.KeySize)))
	require.NoError(t, err)
	root := admitRoot(t, "example", roots["example bursting-root"])
	plan, err := bursting.NewPlan(root, lead, "hub-a")
	require.NoError(t, err)
	rendered, err := render.Render(root)
	require.NoError(t, err)
	configs := []fluxcheck.HostConfig{{Hostname: root.Name + "-0", BrokerTOML: rendered.BrokerTOML, CurveCert: curve.File(cert), Cluster: rootCluster}}
	child := admitChild(t, plan.Children[0])
	child.Spec.Flux.Topology = "kary:0"
	out, err := render.Render(child)
	require.NoError(t, err)
	configs = append(configs, fluxcheck.HostConfig{Hostname: child.Name + "-1", BrokerTOML: out.BrokerTOML, CurveCert: curve.File(cert), Cluster: plan.Children[0].Cluster})
	require.ErrorContains(t, fluxcheck.Check(configs), string(fluxcheck.RuleSameParents))
}

// admitChild sends the child through the CRD's schema and CEL rules, as the member's API
// server does when the hub applies it, and returns what the member stores.
func admitChild(t *testing.T, c bursting.Child) *fluxv1alpha2.MiniCluster {
	t.Helper()
	data, err := yaml.Marshal(c.MiniCluster)
	require.NoError(t, err)
	stored, err := admit.Admit(data)
	require.NoError(t, err, "the member's API server refuses child %s:\n%s", c.Burst, data)
	require.Equal(t, c.MiniCluster.Labels, stored.Labels)
	require.Equal(t, c.MiniCluster.Annotations, stored.Annotations)
	require.Equal(t, c.Namespace, stored.Namespace)
	return stored
}

// TestChildrenRunNoJob checks, on the rendered entrypoint, that a child's brokers are followers
// that submit nothing, whatever the root's container runs.
func TestChildrenRunNoJob(t *testing.T) {
	root := admitRoot(t, "batch", roots["minimal service, custom names, a batch job"])
	plan, err := bursting.NewPlan(root, lead, "hub-a")
	require.NoError(t, err)
	for _, c := range plan.Children {
		out, err := render.Render(admitChild(t, c))
		require.NoError(t, err)
		script := out.Scripts["container-"+c.Burst+".sh"]
		require.NotEmpty(t, script, "scripts: %v", keys(out.Scripts))
		require.Contains(t, script, "every pod\n# here runs a follower broker and nothing else")
		require.NotContains(t, script, "fluxfed_initial_program")
		require.NotContains(t, script, "flux batch")
		require.NotContains(t, script, "echo lead")
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestFederationDescribesEachBurstsHardware plans a root whose groups of ranks have different
// hardware, renders the root and every child as the members would, and checks on every side
// that the [resource] config entries expand to exactly that side's bootstrap hosts, rank for
// rank, and give every rank the same cores, GPUs and property as every other side.
func TestFederationDescribesEachBurstsHardware(t *testing.T) {
	root := admitRoot(t, "hardware", roots["each burst's hardware"])
	plan, err := bursting.NewPlan(root, lead, "hub-a")
	require.NoError(t, err)
	require.Len(t, plan.Children, 2)

	type rank struct {
		Cores, GPUs string
		Properties  []string
	}
	// What every side must say of every rank (rank 0 aside, which a child names by the lead
	// address): the root's 3 ranks from its container (3.5 cpu is 4 cores), then each burst's.
	var want []rank
	add := func(n int, r rank) {
		for range n {
			want = append(want, r)
		}
	}
	add(3, rank{Cores: "0-3", GPUs: "0", Properties: []string{"sim"}})
	add(4, rank{Cores: "0-47", GPUs: "0-7", Properties: []string{"gpu"}})
	add(1, rank{Cores: "0-3", GPUs: "0", Properties: []string{"spare"}})
	add(3, rank{Cores: "0-127", Properties: []string{"cpu"}})

	sides := []*fluxv1alpha2.MiniCluster{root}
	for _, c := range plan.Children {
		sides = append(sides, admitChild(t, c))
	}
	for _, mc := range sides {
		t.Run(mc.Name, func(t *testing.T) {
			out, err := render.Render(mc)
			require.NoError(t, err)
			var doc struct {
				Bootstrap struct{ Hosts []struct{ Host string } }
				Resource  struct {
					Path   string
					Config []struct {
						Hosts, Cores string
						GPUs         string `toml:"gpus"`
						Properties   []string
					}
				}
			}
			require.NoError(t, toml.Unmarshal(out.BrokerTOML, &doc))
			var bootstrap []string
			for _, e := range doc.Bootstrap.Hosts {
				hosts, err := hostlist.Expand(e.Host)
				require.NoError(t, err)
				bootstrap = append(bootstrap, hosts...)
			}
			require.Equal(t, out.Layout.Hosts, bootstrap)

			require.Empty(t, doc.Resource.Path)
			var hosts []string
			var got []rank
			for _, e := range doc.Resource.Config {
				expanded, err := hostlist.Expand(e.Hosts)
				require.NoError(t, err)
				hosts = append(hosts, expanded...)
				for range expanded {
					got = append(got, rank{Cores: e.Cores, GPUs: e.GPUs, Properties: e.Properties})
				}
			}
			require.Equal(t, bootstrap, hosts, "the resource config hosts are the bootstrap hosts, rank for rank")
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the ranks' hardware (-want +got):\n%s", diff)
			}
			if mc.IsBurstChild() {
				require.Equal(t, lead.Address, hosts[0], "a child names rank 0 by the lead address")
			}
			for key, script := range out.Scripts {
				require.NotContains(t, script, "flux R encode", "%s encodes R, which broker.toml describes", key)
			}
		})
	}
}
