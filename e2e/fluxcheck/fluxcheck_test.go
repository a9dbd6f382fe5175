package fluxcheck

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/bursting"
	"github.com/fluxfed/fluxfed/member/render/brokerconf"
	"github.com/fluxfed/fluxfed/member/render/curve"
)

func certificate(t *testing.T, seed byte) []byte {
	t.Helper()
	c, err := curve.Generate(bytes.NewReader(bytes.Repeat([]byte{seed}, curve.KeySize)), curve.Metadata{Key: "name", Value: "test"})
	require.NoError(t, err)
	return curve.File(c)
}

// TestRenderedFederationsPass renders every fixture federation, root and children, and checks
// the brokers of every running pod together.
func TestRenderedFederationsPass(t *testing.T) {
	cert := certificate(t, 1)
	for _, f := range v1alpha2test.Federations() {
		t.Run(f.Name, func(t *testing.T) {
			var configs []HostConfig
			for _, m := range f.Members {
				l, err := bursting.NewLayout(m.MiniCluster)
				require.NoError(t, err)
				toml, err := brokerconf.BrokerTOML(m.MiniCluster, l)
				require.NoError(t, err)
				for i := range int(m.MiniCluster.Spec.Size) {
					configs = append(configs, HostConfig{
						Hostname:   fmt.Sprintf("%s-%d", m.MiniCluster.Name, i),
						BrokerTOML: toml,
						CurveCert:  cert,
						Cluster:    m.Cluster,
					})
				}
			}
			require.NoError(t, Check(configs))
		})
	}
}

// The hand-made federation the broken cases start from: root r (2 pods, cluster hub) and burst
// b (3 pods, cluster m), b's first broker under rank 0 and the rest under b-0.
const (
	rootTOML = `[bootstrap]
curve_cert = "/mnt/flux/curve/curve.cert"
default_port = 8050
default_bind = "tcp://eth0:%p"
default_connect = "tcp://%h.flux-service.hpc.svc.cluster.local:%p"
hosts = [
  { host = "r-[0-1],b-0" },
  { host = "b-[1-2]", parent = "b-0" },
]
`
	burstTOML = `[bootstrap]
curve_cert = "/mnt/flux/curve/curve.cert"
default_port = 8050
default_bind = "tcp://eth0:%p"
default_connect = "tcp://%h.flux-service.hpc.svc.cluster.local:%p"
hosts = [
  { host = "127.101.0.1", bind = "tcp://eth0:31050", connect = "tcp://127.101.0.1:31050" },
  { host = "r-1,b-0" },
  { host = "b-[1-2]", parent = "b-0" },
]
`
)

// The [resource] config entries of the hand-made federation, on each side: the same ranks,
// rank 0 named as that side's hosts name it.
const (
	rootResources = `
[resource]
config = [
  { hosts = "r-[0-1]", cores = "0-3", properties = ["r"] },
  { hosts = "b-[0-2]", cores = "0-7", gpus = "0-1", properties = ["b"] },
]
`
	burstResources = `
[resource]
config = [
  { hosts = "127.101.0.1,r-1", cores = "0-3", properties = ["r"] },
  { hosts = "b-[0-2]", cores = "0-7", gpus = "0-1", properties = ["b"] },
]
`
)

type federation struct {
	root, burst string
	rootCert    []byte
	burstCert   []byte
}

func (f federation) configs() []HostConfig {
	var configs []HostConfig
	for _, h := range []string{"r-0", "r-1"} {
		configs = append(configs, HostConfig{Hostname: h, BrokerTOML: []byte(f.root), CurveCert: f.rootCert, Cluster: "hub"})
	}
	for _, h := range []string{"b-0", "b-1", "b-2"} {
		configs = append(configs, HostConfig{Hostname: h, BrokerTOML: []byte(f.burst), CurveCert: f.burstCert, Cluster: "m"})
	}
	return configs
}

func TestViolations(t *testing.T) {
	cert := certificate(t, 1)
	good := federation{root: rootTOML, burst: burstTOML, rootCert: cert, burstCert: cert}
	require.NoError(t, Check(good.configs()))

	replace := func(s, old, new string) string {
		require.Contains(t, s, old)
		return strings.Replace(s, old, new, 1)
	}
	type want struct {
		host   string
		rule   Rule
		detail string
	}
	tests := []struct {
		name    string
		configs func() []HostConfig
		want    []want
	}{
		{
			name: "string port",
			configs: func() []HostConfig {
				f := good
				f.burst = replace(burstTOML, "default_port = 8050", `default_port = "8050"`)
				return f.configs()
			},
			want: []want{
				{"b-0", RuleDefaultPort, `default_port is string 8050; Flux refuses anything but an integer`},
				{"b-0", RuleURI, `default_bind "tcp://eth0:%p": the port "-1" is not a number in 1-65535`},
			},
		},
		{
			name: "unknown keys",
			configs: func() []HostConfig {
				f := good
				f.root = replace(rootTOML, "default_port = 8050", "default_port = 8050\ndefault_host = \"x\"")
				f.root = replace(f.root, `{ host = "r-[0-1],b-0" }`, `{ host = "r-[0-1],b-0", port = 1 }`)
				return f.configs()
			},
			want: []want{
				{"r-0", RuleBootstrapKeys, "unknown key default_host"},
				{"r-0", RuleHostsKeys, "hosts[0] has the unknown key port"},
			},
		},
		{
			name: "bad host",
			configs: func() []HostConfig {
				f := good
				f.root = replace(rootTOML, `"b-[1-2]"`, `"b-[1-2],a_b"`)
				return f.configs()
			},
			want: []want{
				{"r-0", RuleHostname, `hosts[1]: "a_b" contains '_'`},
				{"b-0", RuleSameHosts, "6 hosts here, 5 on the root side (r-0)"},
				{"b-0", RuleSameHosts, "5 hosts here, 6 on the root side"}, // one of the two, whichever side is the root
			},
		},
		{
			name: "missing own hostname",
			configs: func() []HostConfig {
				f := good
				f.burst = replace(burstTOML, `"b-[1-2]"`, `"b-1"`)
				return f.configs()
			},
			want: []want{
				{"b-2", RuleOwnHost, "b-2 not found in hosts, so the broker exits"},
				{"b-0", RuleSameHosts, "4 hosts here, 5 on the root side (r-0)"},
			},
		},
		{
			name: "shifted index on a burst side",
			configs: func() []HostConfig {
				f := good
				// The burst side lists one root host too many (leadBroker.size too large).
				f.burst = replace(burstTOML, `"r-1,b-0"`, `"r-[1-2],b-0"`)
				return f.configs()
			},
			want: []want{
				{"b-0", RuleSameHosts, "6 hosts here, 5 on the root side (r-0)"},
				{"b-0", RuleSameHosts, "rank 2 is r-2 here but b-0 on the root side (r-0)"},
				{"b-0", RuleSameParents, "rank 3 (b-0) has parent 0 here but 2 on the root side"},
			},
		},
		{
			name: "parent in another cluster",
			configs: func() []HostConfig {
				f := good
				f.root = replace(rootTOML, `{ host = "b-[1-2]", parent = "b-0" }`, `{ host = "b-[1-2]", parent = "r-1" }`)
				f.burst = replace(burstTOML, `{ host = "b-[1-2]", parent = "b-0" }`, `{ host = "b-[1-2]", parent = "r-1" }`)
				return f.configs()
			},
			want: []want{
				{"b-1", RuleReachable, "the parent r-1 (rank 1) runs in cluster hub, this broker in m, and only rank 0 is reachable across clusters"},
				{"b-2", RuleReachable, "the parent r-1 (rank 1) runs in cluster hub"},
			},
		},
		{
			name: "kary topology across clusters",
			configs: func() []HostConfig {
				f := good
				flat := func(s string) string {
					return replace(s, `{ host = "b-[1-2]", parent = "b-0" }`, `{ host = "b-[1-2]" }`) + "[tbon]\ntopo = \"kary:2\"\n"
				}
				f.root, f.burst = flat(rootTOML), flat(burstTOML)
				return f.configs()
			},
			want: []want{
				{"b-1", RuleReachable, "the parent r-1 (rank 1) runs in cluster hub"},
				{"b-2", RuleReachable, "the parent r-1 (rank 1) runs in cluster hub"},
			},
		},
		{
			name: "flat root side, nested burst side",
			configs: func() []HostConfig {
				f := good
				f.root = replace(rootTOML, `{ host = "b-[1-2]", parent = "b-0" }`, `{ host = "b-[1-2]" }`)
				return f.configs()
			},
			want: []want{
				{"b-0", RuleSameParents, "rank 3 (b-1) has parent 2 here but 0 on the root side; rank 4 (b-2) has parent 2 here but 0 on the root side"},
				{"b-1", RuleSameParents, "rank 3 (b-1) has parent 2 here but 0 on the root side"},
				{"b-2", RuleSameParents, "rank 3 (b-1) has parent 2 here"},
			},
		},
		{
			name: "different certificate",
			configs: func() []HostConfig {
				f := good
				f.burstCert = certificate(t, 2)
				return f.configs()
			},
			want: []want{
				{"b-0", RuleCertificate, "the certificate differs from r-0's, so the broker never joins"},
				{"b-2", RuleCertificate, "the certificate differs from r-0's"},
			},
		},
		{
			name: "invalid certificate",
			configs: func() []HostConfig {
				f := good
				f.rootCert = []byte("curve\n")
				f.burstCert = f.rootCert
				return f.configs()
			},
			want: []want{{"r-0", RuleCertificate, "curve certificate: has no public-key in a curve section"}},
		},
		{
			name: "no curve_cert",
			configs: func() []HostConfig {
				f := good
				f.root = replace(rootTOML, "curve_cert = \"/mnt/flux/curve/curve.cert\"\n", "")
				return f.configs()
			},
			want: []want{{"r-0", RuleCurveCert, "5 hosts and no curve_cert"}, {"r-1", RuleCurveCert, "5 hosts and no curve_cert"}},
		},
		{
			name: "URI without a numeric port",
			configs: func() []HostConfig {
				f := good
				f.burst = replace(burstTOML, `connect = "tcp://127.101.0.1:31050"`, `connect = "tcp://127.101.0.1:port"`)
				return f.configs()
			},
			want: []want{{"b-0", RuleURI, `connect of 127.101.0.1 "tcp://127.101.0.1:port": the port "port" is not a number in 1-65535`}},
		},
		{
			name: "URI with another scheme",
			configs: func() []HostConfig {
				f := good
				f.root = replace(rootTOML, `default_bind = "tcp://eth0:%p"`, `default_bind = "udp://eth0:%p"`)
				return f.configs()
			},
			want: []want{{"r-0", RuleURI, `default_bind "udp://eth0:%p": the scheme is not tcp:// or ipc://`}},
		},
		{
			name: "burst reaching rank 0 by its in-cluster name",
			configs: func() []HostConfig {
				f := good
				f.burst = replace(burstTOML, `{ host = "127.101.0.1", bind = "tcp://eth0:31050", connect = "tcp://127.101.0.1:31050" },
  { host = "r-1,b-0" },`, `{ host = "r-[0-1],b-0" },`)
				return f.configs()
			},
			want: []want{{"b-0", RuleReachable, `it connects to rank 0 at "tcp://r-0.flux-service.hpc.svc.cluster.local:8050", a name of rank 0's cluster`}},
		},
		{
			name: "parent not running",
			configs: func() []HostConfig {
				return good.configs()[:3] // b-0, the parent of b-1 and b-2, is not there
			},
			want: nil,
		},
		{
			name: "parent missing",
			configs: func() []HostConfig {
				configs := good.configs()
				return append(configs[:2], configs[3:]...)
			},
			want: []want{{"b-1", RuleReachable, "the parent b-0 (rank 2) is not among the brokers, so rank 3 waits for it"}},
		},
		{
			name: "unknown topology",
			configs: func() []HostConfig {
				f := good
				f.root += "[tbon]\ntopo = \"ring:3\"\n"
				return f.configs()
			},
			want: []want{{"r-0", RuleTopology, `unknown topology "ring:3"`}},
		},
		{
			name: "parent keys with a kary topology",
			configs: func() []HostConfig {
				f := good
				f.root += "[tbon]\ntopo = \"kary:0\"\n"
				return f.configs()
			},
			want: []want{
				{"r-0", RuleTopology, `b-1 has a parent key, which topology "kary:0" ignores`},
				{"b-0", RuleSameParents, "rank 3 (b-1) has parent 2 here but 0 on the root side"},
			},
		},
		{
			name: "parent cycle",
			configs: func() []HostConfig {
				f := good
				f.root = replace(rootTOML, `{ host = "r-[0-1],b-0" }`, `{ host = "r-[0-1]" }, { host = "b-0", parent = "b-1" }`)
				return f.configs()
			},
			want: []want{{"r-0", RuleTopology, "the parent keys make a cycle through b-0"}},
		},
		{
			name: "rank 0 with a parent",
			configs: func() []HostConfig {
				f := good
				f.root = replace(rootTOML, `{ host = "r-[0-1],b-0" }`, `{ host = "r-0", parent = "r-1" }, { host = "r-1,b-0" }`)
				return f.configs()
			},
			want: []want{{"r-0", RuleTopology, "rank 0 (r-0) may not have a parent"}},
		},
		{
			name: "resource config on every side",
			configs: func() []HostConfig {
				f := good
				f.root = rootTOML + rootResources
				f.burst = burstTOML + burstResources
				return f.configs()
			},
		},
		{
			name: "resource config that names rank 0 by the root's pod on a burst side",
			configs: func() []HostConfig {
				f := good
				f.root = rootTOML + rootResources
				f.burst = burstTOML + rootResources
				return f.configs()
			},
			want: []want{
				{"b-0", RuleResourceHosts, "rank 0 (127.101.0.1) is a bootstrap host that the resource config does not list"},
				{"b-0", RuleSameResources, "no resource config here, resource config on the root side"},
			},
		},
		{
			name: "resource config with a host too many",
			configs: func() []HostConfig {
				f := good
				f.root = rootTOML + replace(rootResources, `"b-[0-2]"`, `"b-[0-3]"`)
				f.burst = burstTOML + burstResources
				return f.configs()
			},
			want: []want{
				{"r-0", RuleResourceHosts, "the resource config lists b-3, which is not a bootstrap host"},
				{"b-0", RuleSameResources, "resource config here, no resource config on the root side"},
			},
		},
		{
			name: "resource config with other cores on a burst side",
			configs: func() []HostConfig {
				f := good
				f.root = rootTOML + rootResources
				f.burst = burstTOML + replace(burstResources, `cores = "0-7"`, `cores = "0-3"`)
				return f.configs()
			},
			want: []want{{"b-0", RuleSameResources, "rank 2 (b-0) has cores [0 1 2 3], GPUs [0 1], properties [b] here but cores [0 1 2 3 4 5 6 7], GPUs [0 1], properties [b] on the root side (r-0)"}},
		},
		{
			name: "resource config without cores, with a bad idset, an unknown key and a path",
			configs: func() []HostConfig {
				f := good
				f.root = rootTOML + replace(rootResources, `cores = "0-3", `, "")
				f.burst = burstTOML + replace(replace(burstResources, `gpus = "0-1"`, `gpus = "1-0", memory = "1G"`), "config = [", `path = "/R"`+"\nconfig = [")
				return f.configs()
			},
			want: []want{
				{"r-0", RuleResourceConfig, "rank 0 (r-0) has no cores in the resource config"},
				{"b-0", RuleResourceConfig, "config[1] has the unknown key memory"},
				{"b-0", RuleResourceConfig, "config[1].gpus 1-0 is not an RFC 22 idset"},
				{"b-0", RuleResourceConfig, "both path and config are set; Flux ignores path"},
				{"b-0", RuleSameResources, ""},
			},
		},
		{
			name: "not TOML",
			configs: func() []HostConfig {
				f := good
				f.burst = "[bootstrap\n"
				return f.configs()
			},
			want: []want{{"b-0", RuleTOML, ""}},
		},
		{
			name: "no rank 0",
			configs: func() []HostConfig {
				return good.configs()[2:]
			},
			want: []want{{"", RuleRankZero, "no broker finds itself at rank 0"}},
		},
		{
			name: "two brokers with one name",
			configs: func() []HostConfig {
				configs := good.configs()
				configs[3].Hostname = "b-0"
				return configs
			},
			want: []want{{"b-0", RuleUniqueBroker, "two brokers are named b-0 (clusters m and m)"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			configs := tt.configs()
			got := Violations(configs)
			rules := map[Rule]bool{}
			for _, w := range tt.want {
				rules[w.rule] = true
			}
			for _, v := range got {
				require.True(t, rules[v.Rule], "unexpected violation %v", v)
			}
			err := Check(configs)
			if len(tt.want) == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tt.want {
				found := false
				for _, v := range got {
					if v.Host == w.host && v.Rule == w.rule && strings.Contains(v.Detail, w.detail) {
						found = true
					}
				}
				if w.rule == RuleSameHosts && !found {
					continue // the alternatives of "bad host"
				}
				require.True(t, found, "want %s: %s: %s among\n%v", w.host, w.rule, w.detail, err)
				require.ErrorContains(t, err, w.host+": "+string(w.rule))
			}
		})
	}
}

func TestViolationError(t *testing.T) {
	require.Equal(t, "b-0: "+string(RuleOwnHost)+": x", Violation{Host: "b-0", Rule: RuleOwnHost, Detail: "x"}.Error())
	require.Equal(t, "instance: "+string(RuleRankZero)+": y", Violation{Rule: RuleRankZero, Detail: "y"}.Error())
	require.NoError(t, Check(nil))
}

func TestSingletonWithoutHosts(t *testing.T) {
	cert := certificate(t, 1)
	// No hosts array: the broker is a singleton, rank 0, and needs no certificate.
	require.NoError(t, Check([]HostConfig{{Hostname: "a-0", BrokerTOML: []byte("[bootstrap]\n"), CurveCert: cert, Cluster: "hub"}}))
}

// TestRenderedMistakes renders federations whose child does not repeat the root as it must,
// and checks that the mistakes the hub could make are caught.
func TestRenderedMistakes(t *testing.T) {
	cert := certificate(t, 1)
	root := v1alpha2test.FederationRoot("root", 2).Obj()
	root.Spec.Flux.Bursting.Clusters = []fluxv1alpha2.Burst{{Name: "b", Size: 3, Cluster: "m"}}
	tests := []struct {
		name  string
		root  func(*fluxv1alpha2.MiniCluster)
		child func(*fluxv1alpha2.MiniCluster)
		rule  Rule
		want  string
	}{
		{name: "child without the root's flat topology", root: func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Flux.Topology = "kary:0" },
			child: func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Flux.Topology = "" },
			rule:  RuleSameParents, want: "rank 3 (b-1) has parent 2 here but 0 on the root side"},
		{name: "child with the root's size instead of maxSize", root: func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.MaxSize = 4 },
			child: func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Flux.Bursting.LeadBroker.Size = 2 },
			rule:  RuleSameHosts, want: "rank 2 is b-0 here but root-2 on the root side (root-0)"},
		{name: "child with another burst order", root: func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Bursting.Clusters = append(mc.Spec.Flux.Bursting.Clusters, fluxv1alpha2.Burst{Name: "c", Size: 1})
		}, child: func(mc *fluxv1alpha2.MiniCluster) {
			bursts := mc.Spec.Flux.Bursting.Clusters
			mc.Spec.Flux.Bursting.Clusters = []fluxv1alpha2.Burst{bursts[1], bursts[0]}
		}, rule: RuleSameHosts, want: "rank 2 is c-0 here but b-0 on the root side (root-0)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := root.DeepCopy()
			tt.root(r)
			child := v1alpha2test.Child(r, "b", v1alpha2test.LeadAddress, v1alpha2test.LeadPort)
			tt.child(child)
			var configs []HostConfig
			for _, m := range []struct {
				mc      *fluxv1alpha2.MiniCluster
				cluster string
			}{{r, "hub"}, {child, "m"}} {
				l, err := bursting.NewLayout(m.mc)
				require.NoError(t, err)
				toml, err := brokerconf.BrokerTOML(m.mc, l)
				require.NoError(t, err)
				for i := range int(m.mc.Spec.Size) {
					configs = append(configs, HostConfig{Hostname: fmt.Sprintf("%s-%d", m.mc.Name, i), BrokerTOML: toml, CurveCert: cert, Cluster: m.cluster})
				}
			}
			err := Check(configs)
			require.ErrorContains(t, err, "b-0: "+string(tt.rule)+": "+tt.want)
		})
	}
}
