package fluxcheck

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFormatURI(t *testing.T) {
	tests := []struct {
		tmpl, host string
		port       int
		want       string
	}{
		{"tcp://%h.flux-service.hpc.svc.cluster.local:%p", "r-1", 8050, "tcp://r-1.flux-service.hpc.svc.cluster.local:8050"},
		{"tcp://eth0:%p", "r-1", 8050, "tcp://eth0:8050"},
		{"tcp://127.101.0.1:31050", "127.101.0.1", 8050, "tcp://127.101.0.1:31050"},
		{"tcp://%h:%p", "r-0", -1, "tcp://r-0:-1"}, // no default_port
		{"ipc:///run/%h/100%%", "r-0", 1, "ipc:///run/r-0/100%"},
		{"tcp://%x%h", "r-0", 1, "tcp://%xr-0"},
		{"tcp://a:1%", "r-0", 1, "tcp://a:1%"},
		{"%%h", "r-0", 1, "%h"},
		{"", "r-0", 1, ""},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, FormatURI(tt.tmpl, tt.host, tt.port), "%q", tt.tmpl)
	}
}

func TestParseBootstrap(t *testing.T) {
	root, violations := ParseBootstrap([]byte(rootTOML), "r-1")
	require.Empty(t, violations)
	require.Equal(t, []Host{
		{Name: "r-0"}, {Name: "r-1"}, {Name: "b-0"},
		{Name: "b-1", Parent: "b-0"}, {Name: "b-2", Parent: "b-0"},
	}, root.Hosts)
	require.Equal(t, 1, root.Rank)
	require.Equal(t, 5, root.Size())
	require.Equal(t, 8050, root.DefaultPort)
	require.Equal(t, "/mnt/flux/curve/curve.cert", root.CurveCert)
	require.Empty(t, root.Topology)
	require.Equal(t, []int{-1, 0, 0, 2, 2}, root.Parents)
	require.Equal(t, []int{1, 2}, root.Children(0))
	require.Equal(t, []int{3, 4}, root.Children(2))
	require.Empty(t, root.Children(1))
	require.Equal(t, 3, root.RankOf("b-1"))
	require.Equal(t, -1, root.RankOf("b-9"))
	require.Equal(t, -1, root.Parent(0))
	require.Equal(t, 2, root.Parent(4))
	require.Equal(t, -1, root.Parent(5))
	require.Equal(t, "tcp://eth0:8050", root.BindURI(2))
	require.Equal(t, "tcp://b-0.flux-service.hpc.svc.cluster.local:8050", root.ConnectURI(2))
	require.Empty(t, root.ConnectURI(7))

	burst, violations := ParseBootstrap([]byte(burstTOML), "b-0")
	require.Empty(t, violations)
	require.Equal(t, 2, burst.Rank)
	require.Equal(t, "127.101.0.1", burst.Hosts[0].Name)
	require.Equal(t, "tcp://127.101.0.1:31050", burst.ConnectURI(burst.Parent(burst.Rank)))
	require.Equal(t, "tcp://eth0:31050", burst.BindURI(0))

	singleton, violations := ParseBootstrap([]byte("[bootstrap]\n"), "a-0")
	require.Empty(t, violations)
	require.Equal(t, []Host{{Name: "a-0"}}, singleton.Hosts)
	require.Equal(t, 0, singleton.Rank)
	require.Equal(t, []int{-1}, singleton.Parents)
	require.Empty(t, singleton.BindURI(0))

	none, violations := ParseBootstrap([]byte("[bootstrap\n"), "a-0")
	require.Nil(t, none)
	require.Len(t, violations, 1)
	require.Equal(t, RuleTOML, violations[0].Rule)
}

func TestChildRoute(t *testing.T) {
	hosts := `[bootstrap]
curve_cert = "c"
default_port = 1
default_bind = "tcp://eth0:%p"
default_connect = "tcp://%h:%p"
hosts = [{ host = "n-[0-15]" }]
`
	tests := []struct {
		topo         string
		rank, target int
		want         int
	}{
		{"binomial", 0, 7, 4},  // 7 -> 6 -> 4 -> 0
		{"binomial", 4, 7, 6},  // 7 -> 6 -> 4
		{"binomial", 6, 7, 7},  // a direct child
		{"binomial", 0, 12, 8}, // 12 -> 8 -> 0
		{"binomial", 4, 12, -1},
		{"binomial", 7, 7, -1}, // not below itself
		{"kary:2", 0, 13, 2},   // 13 -> 6 -> 2 -> 0
		{"kary:2", 2, 13, 6},
		{"kary:2", 1, 13, -1},
		{"kary:0", 0, 13, 13},
		{"kary:0", 1, 13, -1},
		{"kary:1", 3, 9, 4},
		{"kary:1", 0, 0, -1},
		{"kary:1", 0, 16, -1},
	}
	for _, tt := range tests {
		b, violations := ParseBootstrap([]byte(hosts+"[tbon]\ntopo = \""+tt.topo+"\"\n"), "n-0")
		require.Empty(t, violations)
		require.Equal(t, tt.want, b.ChildRoute(tt.rank, tt.target), "%s: from %d to %d", tt.topo, tt.rank, tt.target)
	}
	root, _ := ParseBootstrap([]byte(rootTOML), "r-0")
	require.Equal(t, 2, root.ChildRoute(0, 4))
	require.Equal(t, 4, root.ChildRoute(2, 4))
	require.Equal(t, -1, root.ChildRoute(1, 4))
}

// TestFatal checks which violations stop a broker at startup.
func TestFatal(t *testing.T) {
	replace := func(s, old, new string) string {
		require.Contains(t, s, old)
		return strings.Replace(s, old, new, 1)
	}
	tests := []struct {
		name  string
		toml  string
		rule  Rule
		fatal bool
	}{
		{"a connect port that is no number", replace(burstTOML, "tcp://127.101.0.1:31050\" }", "tcp://127.101.0.1:port\" }"), RuleURI, false},
		{"a URI without a port", replace(burstTOML, "tcp://127.101.0.1:31050\" }", "tcp://127.101.0.1\" }"), RuleURI, false},
		{"a URI without an address", replace(burstTOML, "tcp://127.101.0.1:31050\" }", "tcp://\" }"), RuleURI, true},
		{"the 0MQ wildcard", replace(burstTOML, "tcp://eth0:31050", "tcp://eth0:*"), RuleURI, true},
		{"another scheme", replace(burstTOML, "tcp://eth0:31050", "udp://eth0:31050"), RuleURI, true},
		{"parent keys under kary", burstTOML + "[tbon]\ntopo = \"kary:2\"\n", RuleTopology, false},
		{"an unknown topology", burstTOML + "[tbon]\ntopo = \"ring\"\n", RuleTopology, true},
		{"a string port", replace(burstTOML, "default_port = 8050", `default_port = "8050"`), RuleDefaultPort, true},
		{"an unknown key", replace(burstTOML, "default_port = 8050", "default_port = 8050\nport = 1"), RuleBootstrapKeys, true},
		{"a bad host", replace(burstTOML, `"b-[1-2]"`, `"b_[1-2]"`), RuleHostname, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, violations := ParseBootstrap([]byte(tt.toml), "b-0")
			found := false
			for _, v := range violations {
				if v.Rule == tt.rule {
					found = true
					require.Equal(t, tt.fatal, v.Fatal(), "%v", v)
				}
			}
			require.True(t, found, "no %s among %v", tt.rule, violations)
		})
	}
	require.False(t, Violation{Rule: RuleSameParents}.Fatal())
	require.False(t, Violation{Rule: RuleReachable}.Fatal())
	require.True(t, Violation{Rule: RuleOwnHost}.Fatal())
}
