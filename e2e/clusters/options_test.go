package clusters

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDefaultNames(t *testing.T) {
	require.Empty(t, DefaultNames(0))
	require.Equal(t, []string{"hub"}, DefaultNames(1))
	require.Equal(t, []string{"hub", "member-a", "member-b"}, DefaultNames(3))
	names := DefaultNames(30)
	require.Equal(t, "member-z", names[26])
	require.Equal(t, "member-27", names[27])
}

func TestOptionsComplete(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     string // $FLUXFED_E2E_PROVIDER
		in      Options
		check   func(t *testing.T, o Options)
		wantErr string
	}{{
		name: "defaults",
		in:   Options{Dir: "run"},
		check: func(t *testing.T, o Options) {
			require.Equal(t, []string{"hub", "member-a", "member-b"}, o.Names)
			require.Equal(t, DefaultNodesPerCluster, o.NodesPerCluster)
			require.Equal(t, ProviderLocal, o.Provider)
			require.Equal(t, DefaultTimeout, o.Timeout)
			require.True(t, strings.HasSuffix(o.Dir, "/run") && strings.HasPrefix(o.Dir, "/"), o.Dir)
			require.NotNil(t, o.Logf)
		},
	}, {
		name:  "count",
		in:    Options{Dir: "/r", Count: 2},
		check: func(t *testing.T, o Options) { require.Equal(t, []string{"hub", "member-a"}, o.Names) },
	}, {
		name:  "names win over count",
		in:    Options{Dir: "/r", Count: 5, Names: []string{"a"}},
		check: func(t *testing.T, o Options) { require.Equal(t, []string{"a"}, o.Names) },
	}, {
		name:  "provider from the environment",
		env:   ProviderKind,
		in:    Options{Dir: "/r"},
		check: func(t *testing.T, o Options) { require.Equal(t, ProviderKind, o.Provider) },
	}, {
		name:  "the option wins over the environment",
		env:   ProviderKind,
		in:    Options{Dir: "/r", Provider: ProviderLocal},
		check: func(t *testing.T, o Options) { require.Equal(t, ProviderLocal, o.Provider) },
	}, {
		name:    "unknown provider",
		env:     "docker",
		in:      Options{Dir: "/r"},
		wantErr: `provider "docker"`,
	}, {
		name:    "no directory",
		in:      Options{},
		wantErr: "no run directory",
	}, {
		name:    "name not a DNS label",
		in:      Options{Dir: "/r", Names: []string{"Hub_1"}},
		wantErr: `cluster name "Hub_1"`,
	}, {
		name:    "name twice",
		in:      Options{Dir: "/r", Names: []string{"a", "b", "a"}},
		wantErr: `"a" appears twice`,
	}, {
		name:    "too many nodes",
		in:      Options{Dir: "/r", NodesPerCluster: maxNodes + 1},
		wantErr: "nodes per cluster",
	}, {
		name: "real nodes instead of simulated ones",
		in:   Options{Dir: "/r", RealNodes: 2, PauseImage: "p:1"},
		check: func(t *testing.T, o Options) {
			require.Equal(t, 0, o.NodesPerCluster)
			require.Equal(t, 2, o.RealNodes)
		},
	}, {
		name:  "real nodes beside simulated ones",
		in:    Options{Dir: "/r", NodesPerCluster: 1, RealNodes: 2, PauseImage: "p:1"},
		check: func(t *testing.T, o Options) { require.Equal(t, 1, o.NodesPerCluster) },
	}, {
		name:    "too many nodes, real ones counted",
		in:      Options{Dir: "/r", NodesPerCluster: maxNodes, RealNodes: 1, PauseImage: "p:1"},
		wantErr: "201 nodes per cluster asked for (200 simulated, 1 real)",
	}, {
		name:    "real nodes without a pause image",
		in:      Options{Dir: "/r", RealNodes: 1},
		wantErr: "real nodes need a pause image: set Options.PauseImage",
	}, {
		name:    "real nodes on kind",
		in:      Options{Dir: "/r", RealNodes: 1, PauseImage: "p:1", Provider: ProviderKind},
		wantErr: "real nodes (Options.RealNodes) are for the local provider",
	}, {
		name:    "too many clusters",
		in:      Options{Dir: "/r", Count: maxClusters + 1},
		wantErr: "clusters asked for",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvProvider, tc.env)
			o := tc.in
			err := o.complete()
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			tc.check(t, o)
		})
	}
}
