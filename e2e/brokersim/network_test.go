package brokersim_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fluxfed/fluxfed/e2e/brokersim"
)

func TestSplitTCP(t *testing.T) {
	tests := []struct {
		uri  string
		host string
		port int
		err  string
	}{
		{uri: "tcp://lammps-1.flux-service.research.svc.cluster.local:8050", host: "lammps-1.flux-service.research.svc.cluster.local", port: 8050},
		{uri: "tcp://127.100.0.10:30093", host: "127.100.0.10", port: 30093},
		{uri: "tcp://eth0:8050", host: "eth0", port: 8050},
		{uri: "tcp://0.0.0.0:1", host: "0.0.0.0", port: 1},
		{uri: "tcp://*:65535", host: "*", port: 65535},
		{uri: "tcp://eth0:*", err: "the port is the 0MQ wildcard"},
		{uri: "tcp://eth0:-1", err: `the port "-1" is not a number in 1-65535`},
		{uri: "tcp://eth0:+80", err: `the port "+80" is not a number`},
		{uri: "tcp://eth0:0", err: `the port "0" is not a number`},
		{uri: "tcp://eth0:65536", err: `the port "65536" is not a number`},
		{uri: "tcp://eth0:080", host: "eth0", port: 80}, // a leading zero is still decimal
		{uri: "tcp://eth0:8050x", err: `the port "8050x" is not a number`},
		{uri: "tcp://eth0:", err: `the port "" is not a number`},
		{uri: "tcp://eth0", err: "no port"},
		{uri: "tcp://:8050", err: "no host"},
		{uri: "tcp://[::1]:8050", err: "IPv6 is not simulated"},
		{uri: "tcp://a/b:8050", err: "not a host name"},
		{uri: "ipc:///run/flux/overlay", err: "ipc:// is not simulated"},
		{uri: "udp://eth0:8050", err: "not a tcp:// URI"},
		{uri: "tcp://%h:%p", err: `the port "%p" is not a number`}, // a template left unsubstituted
		{uri: "", err: "not a tcp:// URI"},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			host, port, err := brokersim.SplitTCP(tt.uri)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				var uriErr *brokersim.URIError
				require.ErrorAs(t, err, &uriErr)
				require.Equal(t, tt.uri, uriErr.URI)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.host, host)
			require.Equal(t, tt.port, port)
		})
	}
}

func FuzzSplitTCP(f *testing.F) {
	for _, s := range []string{"tcp://a:1", "tcp://127.100.0.10:30093", "tcp://eth0:*", "tcp://[::1]:2", "ipc://x", "tcp://a:b:c", "tcp://:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		host, port, err := brokersim.SplitTCP(uri)
		if err != nil {
			return
		}
		if host == "" || port < 1 || port > 65535 {
			t.Fatalf("SplitTCP(%q) = %q, %d", uri, host, port)
		}
		// What was read writes back to a URI that reads the same.
		h2, p2, err := brokersim.SplitTCP("tcp://" + host + ":" + strconv.Itoa(port))
		require.NoError(t, err)
		require.Equal(t, host, h2)
		require.Equal(t, port, p2)
	})
}

// testNetwork has the root's pods in cluster hub, a burst's in cluster m, and the lead
// broker's address.
func testNetwork(t *testing.T) *brokersim.Network {
	t.Helper()
	n := brokersim.NewNetwork()
	require.NoError(t, n.AddHeadlessService("hub", "hpc", "flux-service", 8050, "r-0", "r-1"))
	require.NoError(t, n.AddHeadlessService("m", "hpc", "b", 8050, "b-0", "b-1"))
	require.NoError(t, n.AddLead(brokersim.Lead{Address: "127.100.0.10", Port: 30093, Target: brokersim.Listener{Cluster: "hub", Hostname: "r-0", Port: 8050}}))
	require.NoError(t, n.AddRoute(brokersim.Route{Cluster: "m", Host: "127.100.0.7", Port: 9000, Target: brokersim.Listener{Cluster: "m", Hostname: "b-1", Port: 9000}}))
	return n
}

func TestNetworkResolve(t *testing.T) {
	n := testNetwork(t)
	r0 := brokersim.Listener{Cluster: "hub", Hostname: "r-0", Port: 8050}
	tests := []struct {
		name, cluster, uri string
		want               brokersim.Listener
		err                string
	}{
		{name: "own cluster's Service name", cluster: "hub", uri: "tcp://r-0.flux-service.hpc.svc.cluster.local:8050", want: r0},
		{name: "DNS is case-insensitive", cluster: "hub", uri: "tcp://R-0.Flux-Service.hpc.svc.cluster.local:8050", want: r0},
		{name: "burst's Service name", cluster: "m", uri: "tcp://b-1.b.hpc.svc.cluster.local:8050", want: brokersim.Listener{Cluster: "m", Hostname: "b-1", Port: 8050}},
		{name: "lead from the member", cluster: "m", uri: "tcp://127.100.0.10:30093", want: r0},
		{name: "lead from the hub", cluster: "hub", uri: "tcp://127.100.0.10:30093", want: r0},
		{name: "lead from any cluster", cluster: "elsewhere", uri: "tcp://127.100.0.10:30093", want: r0},
		{name: "a pod address of the member", cluster: "m", uri: "tcp://127.100.0.7:9000", want: brokersim.Listener{Cluster: "m", Hostname: "b-1", Port: 9000}},
		{name: "another cluster's Service name", cluster: "m", uri: "tcp://r-1.flux-service.hpc.svc.cluster.local:8050", err: "r-1.flux-service.hpc.svc.cluster.local:8050 does not resolve from cluster m"},
		{name: "the member's name from the hub", cluster: "hub", uri: "tcp://b-0.b.hpc.svc.cluster.local:8050", err: "does not resolve from cluster hub"},
		{name: "a pod address from another cluster", cluster: "hub", uri: "tcp://127.100.0.7:9000", err: "does not resolve"},
		{name: "the lead on another port", cluster: "m", uri: "tcp://127.100.0.10:8050", err: "does not resolve"},
		{name: "the Service name on another port", cluster: "hub", uri: "tcp://r-0.flux-service.hpc.svc.cluster.local:8051", err: "does not resolve"},
		{name: "a short name", cluster: "hub", uri: "tcp://r-0:8050", err: "does not resolve"},
		{name: "not a URI", cluster: "hub", uri: "r-0:8050", err: "not a tcp:// URI"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := n.Resolve(tt.cluster, tt.uri)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				var uriErr *brokersim.URIError
				require.Equal(t, !errors.As(err, &uriErr), errors.Is(err, brokersim.ErrUnresolved))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestNetworkRefusesConflicts(t *testing.T) {
	n := testNetwork(t)
	b0 := brokersim.Listener{Cluster: "m", Hostname: "b-0", Port: 8050}
	// The same route again changes nothing.
	require.NoError(t, n.AddRoute(brokersim.Route{Cluster: "m", Host: "b-0.b.hpc.svc.cluster.local", Port: 8050, Target: b0}))
	require.ErrorContains(t, n.AddRoute(brokersim.Route{Cluster: "m", Host: "B-0.b.hpc.svc.cluster.local", Port: 8050, Target: brokersim.Listener{Cluster: "m", Hostname: "b-1", Port: 8050}}),
		"leads to b-0:8050 in cluster m already, not to b-1:8050 in cluster m")
	require.ErrorContains(t, n.AddLead(brokersim.Lead{Address: "127.100.0.10", Port: 30093, Target: b0}), "lead broker 127.100.0.10:30093 leads to r-0:8050 in cluster hub already")
	require.ErrorContains(t, n.AddRoute(brokersim.Route{Host: "x", Port: 1, Target: b0}), "no cluster")
	require.ErrorContains(t, n.AddRoute(brokersim.Route{Cluster: "m", Host: "x", Port: 0, Target: b0}), "port 0 is not in 1-65535")
	require.ErrorContains(t, n.AddRoute(brokersim.Route{Cluster: "m", Host: "x:1", Port: 1, Target: b0}), `"x:1" is not a host name`)
	require.ErrorContains(t, n.AddRoute(brokersim.Route{Cluster: "m", Host: "x", Port: 1}), "the listener has no cluster")
	require.ErrorContains(t, n.AddLead(brokersim.Lead{Address: "", Port: 1, Target: b0}), "no host")
	require.ErrorContains(t, n.AddHeadlessService("m", "hpc", "b", 70000, "b-2"), "headless Service hpc/b")
	require.Len(t, n.Routes(), 6)
	require.Equal(t, brokersim.Route{Host: "127.100.0.10", Port: 30093, Target: brokersim.Listener{Cluster: "hub", Hostname: "r-0", Port: 8050}}, n.Routes()[0])
}

func TestBindListener(t *testing.T) {
	for _, uri := range []string{"tcp://eth0:8050", "tcp://0.0.0.0:8050", "tcp://*:8050", "tcp://b-0.b.hpc.svc.cluster.local:8050"} {
		l, err := brokersim.BindListener("m", "b-0", uri)
		require.NoError(t, err, uri)
		require.Equal(t, brokersim.Listener{Cluster: "m", Hostname: "b-0", Port: 8050}, l)
	}
	_, err := brokersim.BindListener("m", "b-0", "tcp://eth0:*")
	require.ErrorContains(t, err, "wildcard")
	_, err = brokersim.BindListener("m", "b-0", "ipc:///tmp/x")
	require.ErrorContains(t, err, "ipc:// is not simulated")
	_, err = brokersim.BindListener("", "b-0", "tcp://eth0:1")
	require.ErrorContains(t, err, "no cluster")
}
