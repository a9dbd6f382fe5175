package brokerconf

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/bursting"
	"github.com/fluxfed/fluxfed/hostlist"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func renderTOML(t *testing.T, mc *fluxv1alpha2.MiniCluster) []byte {
	t.Helper()
	l, err := bursting.NewLayout(mc)
	require.NoError(t, err)
	got, err := BrokerTOML(mc, l)
	require.NoError(t, err)
	return got
}

func TestBrokerTOMLGolden(t *testing.T) {
	for _, f := range v1alpha2test.Federations() {
		for i, m := range f.Members {
			name := f.Name
			if i > 0 {
				name += "." + m.MiniCluster.Name
			}
			t.Run(name, func(t *testing.T) {
				got := renderTOML(t, m.MiniCluster)
				path := filepath.Join("testdata", name+".toml")
				if *update {
					require.NoError(t, os.MkdirAll("testdata", 0o755))
					require.NoError(t, os.WriteFile(path, got, 0o644))
				}
				want, err := os.ReadFile(path)
				require.NoError(t, err, "run go test -update to create %s", path)
				require.Equal(t, string(want), string(got))

				// It is TOML, and rendering is deterministic.
				var doc map[string]any
				require.NoError(t, toml.Unmarshal(got, &doc))
				require.Equal(t, string(got), string(renderTOML(t, m.MiniCluster)))
			})
		}
	}
}

// TestBrokerTOMLHosts checks the hosts array against the layout directly: every rank in order,
// parent keys exactly where the layout has parents, and the lead broker's entry on a child.
func TestBrokerTOMLHosts(t *testing.T) {
	for _, f := range v1alpha2test.Federations() {
		for _, m := range f.Members {
			mc := m.MiniCluster
			if mc.Spec.Flux.BrokerConfig != "" {
				continue
			}
			t.Run(f.Name+"/"+mc.Name, func(t *testing.T) {
				l, err := bursting.NewLayout(mc)
				require.NoError(t, err)
				out, err := BrokerTOML(mc, l)
				require.NoError(t, err)
				var doc struct {
					Bootstrap struct {
						DefaultPort int `toml:"default_port"`
						Hosts       []struct {
							Host, Bind, Connect, Parent string
						}
					}
					Tbon struct{ Topo string }
				}
				require.NoError(t, toml.Unmarshal(out, &doc))
				require.Equal(t, 8050, doc.Bootstrap.DefaultPort)
				require.Equal(t, l.Topology, doc.Tbon.Topo)
				var hosts []string
				for _, e := range doc.Bootstrap.Hosts {
					expanded, err := hostlist.Expand(e.Host)
					require.NoError(t, err)
					for _, h := range expanded {
						r := len(hosts)
						hosts = append(hosts, h)
						if p, ok := l.Parents[r]; ok {
							require.Equal(t, l.Hosts[p], e.Parent, "parent of %s", h)
						} else {
							require.Empty(t, e.Parent, "parent of %s", h)
						}
						if r == 0 && l.LeadAddress != "" {
							require.Equal(t, "tcp://127.0.2.10:31050", e.Connect)
							require.Equal(t, "tcp://eth0:31050", e.Bind)
						} else {
							require.Empty(t, e.Connect+e.Bind, "bind and connect of %s", h)
						}
					}
				}
				require.Equal(t, l.Hosts, hosts)
			})
		}
	}
}

func TestBrokerTOMLBrokerConfig(t *testing.T) {
	mc := v1alpha2test.FederationRoot("a", 1).Obj()
	mc.Spec.Flux.BrokerConfig = "anything at all\n"
	got, err := BrokerTOML(mc, nil)
	require.NoError(t, err)
	require.Equal(t, "anything at all\n", string(got))
}

func TestBrokerTOMLErrors(t *testing.T) {
	layout := func(mc *fluxv1alpha2.MiniCluster) *bursting.Layout {
		l, err := bursting.NewLayout(v1alpha2test.FederationRoot(mc.Name, 1).Obj())
		require.NoError(t, err)
		return l
	}
	tests := []struct {
		name   string
		mc     *fluxv1alpha2.MiniCluster
		layout *bursting.Layout
		want   string
	}{
		{name: "no MiniCluster", want: "no MiniCluster"},
		{name: "no layout", mc: v1alpha2test.FederationRoot("a", 1).Obj(), want: "no layout"},
		{name: "empty layout", mc: v1alpha2test.FederationRoot("a", 1).Obj(), layout: &bursting.Layout{}, want: "no layout"},
		{name: "no namespace", mc: func() *fluxv1alpha2.MiniCluster {
			mc := v1alpha2test.FederationRoot("a", 1).Obj()
			mc.Namespace = ""
			return mc
		}(), want: "the MiniCluster has no namespace"},
		{name: "no mount path", mc: func() *fluxv1alpha2.MiniCluster {
			mc := v1alpha2test.FederationRoot("a", 1).Obj()
			mc.Spec.Flux.Container.MountPath = ""
			return mc
		}(), want: "spec.flux.container.mountPath is empty"},
		{name: "mount path not UTF-8", mc: func() *fluxv1alpha2.MiniCluster {
			mc := v1alpha2test.FederationRoot("a", 1).Obj()
			mc.Spec.Flux.Container.MountPath = "/mnt/\xff"
			return mc
		}(), want: "is not valid UTF-8"},
		{name: "parent outside the hosts", mc: v1alpha2test.FederationRoot("a", 1).Obj(),
			layout: &bursting.Layout{Hosts: []string{"a-0", "a-1"}, Parents: map[int]int{1: 5}}, want: "rank 1 has parent 5, outside the hosts"},
		{name: "hosts that do not survive compression", mc: v1alpha2test.FederationRoot("a", 1).Obj(),
			layout: &bursting.Layout{Hosts: []string{"a-0", "b,c"}}, want: "hosts of ranks 0-1 do not survive hostlist compression"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := tt.layout
			if l == nil && tt.mc != nil && tt.name != "no layout" {
				l = layout(tt.mc)
			}
			_, err := BrokerTOML(tt.mc, l)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestBrokerTOMLNamesTheHeadlessServiceAfterTheMiniClusterByDefault(t *testing.T) {
	mc := v1alpha2test.FederationRoot("lammps", 2).Obj()
	mc.Spec.Network.HeadlessName = ""
	toml := renderTOML(t, mc)
	require.Contains(t, string(toml), `default_connect = "tcp://%h.lammps.`+mc.Namespace+`.svc.cluster.local:%p"`)
}

func TestPaths(t *testing.T) {
	mc := v1alpha2test.FederationRoot("a", 1).Obj()
	require.Equal(t, "/mnt/flux/curve/curve.cert", CurveCertPath(mc))
	require.Equal(t, "/mnt/flux/view/etc/flux/system/R", ResourcePath(mc))
	mc.Spec.Flux.Container.MountPath = "/opt/flux/"
	require.Equal(t, "/opt/flux/curve/curve.cert", CurveCertPath(mc))
}

// FuzzTOMLQuote checks that any valid UTF-8 string comes back unchanged from a TOML parser.
func FuzzTOMLQuote(f *testing.F) {
	for _, s := range []string{"", "plain", `quo"te`, `back\slash`, "new\nline", "tab\t", "\x00\x1f\x7f", "é✓", `\u0041`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w := &tomlWriter{}
		w.str("k", s)
		if w.err != nil {
			if !strings.Contains(w.err.Error(), "UTF-8") {
				t.Fatal(w.err)
			}
			return
		}
		var doc struct{ K string }
		if err := toml.Unmarshal([]byte(w.b.String()), &doc); err != nil {
			t.Fatalf("%q: %v", w.b.String(), err)
		}
		if doc.K != s {
			t.Fatalf("got %q, want %q", doc.K, s)
		}
	})
}

// TestBrokerTOMLHostileValues renders broker.toml with hostile values in every spec field that
// reaches it: the file stays TOML, and each value comes back from a TOML parser unchanged.
func TestBrokerTOMLHostileValues(t *testing.T) {
	for _, v := range []string{
		`"`, `\`, "\"\n[bootstrap]\ncurve_cert = \"/tmp/x", "a\rb", "\x00\x1b\x7f", "\u202e\u2028", "''' \"\"\"", "# x", "]]",
	} {
		mc := v1alpha2test.FederationRoot("hostile", 2).Obj()
		mc.Namespace = "ns\r\n[x]" // comments only; the schema refuses it, the file must survive it
		mc.Spec.Flux.Container.MountPath = "/mnt/" + v
		mc.Spec.Flux.Topology = v
		mc.Spec.Flux.ConnectTimeout = &v
		got, err := BrokerTOML(mc, &bursting.Layout{Hosts: []string{"hostile-0", "hostile-1"}, Topology: v, LeadAddress: "lead\r" + v, LeadPort: 8050})
		require.NoError(t, err, "%q", v)
		var doc struct {
			Bootstrap struct {
				CurveCert string `toml:"curve_cert"`
				Hosts     []map[string]string
			}
			Resource struct{ Path string }
			Tbon     struct {
				Topo           string
				ConnectTimeout string `toml:"connect_timeout"`
			}
		}
		require.NoError(t, toml.Unmarshal(got, &doc), "%q:\n%s", v, got)
		require.Equal(t, CurveCertPath(mc), doc.Bootstrap.CurveCert)
		require.Equal(t, ResourcePath(mc), doc.Resource.Path)
		require.Equal(t, v, doc.Tbon.Topo)
		require.Equal(t, v, doc.Tbon.ConnectTimeout)
		require.Equal(t, "tcp://lead\r"+v+":8050", doc.Bootstrap.Hosts[0]["connect"])
		require.Len(t, doc.Bootstrap.Hosts, 2)
	}
}

// TestBrokerTOMLResourceConfig checks the [resource] table of every side of a federation: the
// entries of each group of ranks, rank 0 named as that side's hosts name it, or the fallback to
// R encoded on each node, said in a comment whenever the MiniCluster bursts.
func TestBrokerTOMLResourceConfig(t *testing.T) {
	cpu := func(mc *fluxv1alpha2.MiniCluster, q string) *fluxv1alpha2.MiniCluster {
		mc.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
		return mc
	}
	root := cpu(v1alpha2test.FederationRoot("root", 2).Obj(), "6")
	root.Spec.Flux.Bursting.Clusters = []fluxv1alpha2.Burst{
		{Name: "gpu", Size: 2, Cluster: "member-a", Resources: &fluxv1alpha2.BurstResources{Cores: 32, GPUs: 4}},
		{Name: "cpu", Size: 1, MaxSize: 3, Cluster: "member-b", Resources: &fluxv1alpha2.BurstResources{Cores: 96}},
	}
	type entry struct {
		Hosts      string
		Cores      string
		GPUs       string `toml:"gpus"`
		Properties []string
	}
	rootEntries := func(rank0 string) []entry {
		return []entry{
			{Hosts: rank0, Cores: "0-5", Properties: []string{"root"}},
			{Hosts: "gpu-[0-1]", Cores: "0-31", GPUs: "0-3", Properties: []string{"gpu"}},
			{Hosts: "cpu-[0-2]", Cores: "0-95", Properties: []string{"cpu"}},
		}
	}
	tests := []struct {
		name string
		mc   *fluxv1alpha2.MiniCluster
		// want are the config entries; nil means path, with the fallback comment.
		want     []entry
		fallback string
	}{
		{name: "root", mc: root, want: rootEntries("root-[0-1]")},
		{name: "child gpu", mc: v1alpha2test.Child(root, "gpu", v1alpha2test.LeadAddress, v1alpha2test.LeadPort),
			want: rootEntries(v1alpha2test.LeadAddress + ",root-1")},
		{name: "child cpu", mc: v1alpha2test.Child(root, "cpu", v1alpha2test.LeadAddress, v1alpha2test.LeadPort),
			want: rootEntries(v1alpha2test.LeadAddress + ",root-1")},
		{name: "a root of one pod: rank 0 is the whole group", mc: v1alpha2test.Edit(cpu(v1alpha2test.FederationRoot("solo", 1).Obj(), "1"), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Bursting.Clusters = []fluxv1alpha2.Burst{{Name: "b", Size: 1}}
		}), want: []entry{
			{Hosts: "solo-0", Cores: "0", Properties: []string{"solo"}},
			{Hosts: "b-0", Cores: "0", Properties: []string{"b"}},
		}},
		{name: "its child names the lead address alone", mc: v1alpha2test.Child(v1alpha2test.Edit(cpu(v1alpha2test.FederationRoot("solo", 1).Obj(), "1"), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Bursting.Clusters = []fluxv1alpha2.Burst{{Name: "b", Size: 1}}
		}), "b", v1alpha2test.LeadAddress, v1alpha2test.LeadPort), want: []entry{
			{Hosts: v1alpha2test.LeadAddress, Cores: "0", Properties: []string{"solo"}},
			{Hosts: "b-0", Cores: "0", Properties: []string{"b"}},
		}},
		{name: "no bursts: path, nothing said", mc: cpu(v1alpha2test.FederationRoot("alone", 2).Obj(), "4")},
		{name: "the root's cores unknown", mc: v1alpha2test.Edit(v1alpha2test.FederationRoot("root", 2).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Bursting.Clusters = []fluxv1alpha2.Burst{{Name: "gpu", Size: 2, Resources: &fluxv1alpha2.BurstResources{Cores: 32}}}
		}), fallback: "# because the cores of the root MiniCluster root are unknown"},
		{name: "a custom hostlist", mc: v1alpha2test.Edit(cpu(v1alpha2test.FederationRoot("root", 2).Obj(), "4"), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Bursting.Hostlist = "root-[0-1],elsewhere-[0-3]"
		}), fallback: "# because the hardware of the 4 hosts that spec.flux.bursting.hostlist lists outside this MiniCluster is unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := bursting.NewLayout(tt.mc)
			require.NoError(t, err)
			out := renderTOML(t, tt.mc)
			var doc struct {
				Resource struct {
					Path   string
					Config []entry
				}
			}
			require.NoError(t, toml.Unmarshal(out, &doc))
			require.Equal(t, tt.want, doc.Resource.Config)
			require.Equal(t, tt.want != nil, ResourcesFromConfig(tt.mc, l))
			if tt.want != nil {
				require.Empty(t, doc.Resource.Path, "path with config: Flux would ignore it")
				return
			}
			require.Equal(t, ResourcePath(tt.mc), doc.Resource.Path)
			if tt.fallback == "" {
				require.NotContains(t, string(out), "flux R encode --local")
			} else {
				require.Contains(t, string(out), "# Every broker describes every host with its own node's hardware (flux R encode --local)\n"+tt.fallback)
			}
		})
	}

	// A spec.flux.brokerConfig is the user's: the entrypoint keeps encoding R.
	own := root.DeepCopy()
	own.Spec.Flux.BrokerConfig = "[bootstrap]\n"
	l, err := bursting.NewLayout(own)
	require.NoError(t, err)
	require.False(t, ResourcesFromConfig(own, l))
}
