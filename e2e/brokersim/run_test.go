package brokersim_test

import (
	"context"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fluxfed/fluxfed/e2e/brokersim"
	"github.com/fluxfed/fluxfed/e2e/netguard"
	"github.com/fluxfed/fluxfed/hub/probe"
)

func TestMain(m *testing.M) { netguard.Main(m) }

// The hand-made instance the cases below start from: root r (2 pods, cluster hub) and burst b
// (3 pods, cluster m), b-0 under rank 0 and the rest of b under b-0.
var (
	rootTOML = string(bootstrap(`{ host = "r-[0-1],b-0" },
  { host = "b-[1-2]", parent = "b-0" },`))
	burstTOML = strings.Replace(string(bootstrap(`{ host = "127.100.0.10", bind = "tcp://eth0:31050", connect = "tcp://127.100.0.10:31050" },
  { host = "r-1,b-0" },
  { host = "b-[1-2]", parent = "b-0" },`)), "flux-service", "b", 1)
)

type instance struct {
	root, burst string
}

func (in instance) brokers(t *testing.T) []brokersim.Broker {
	cert := certificate(t, 1)
	var out []brokersim.Broker
	for _, h := range []string{"r-0", "r-1"} {
		out = append(out, brokersim.Broker{Cluster: "hub", Hostname: h, BrokerTOML: []byte(in.root), CurveCert: cert})
	}
	for _, h := range []string{"b-0", "b-1", "b-2"} {
		out = append(out, brokersim.Broker{Cluster: "m", Hostname: h, BrokerTOML: []byte(in.burst), CurveCert: cert})
	}
	return out
}

func instanceNetwork(t *testing.T) *brokersim.Network {
	n := brokersim.NewNetwork()
	require.NoError(t, n.AddHeadlessService("hub", "hpc", "flux-service", 8050, "r-0", "r-1"))
	require.NoError(t, n.AddHeadlessService("m", "hpc", "b", 8050, "b-0", "b-1", "b-2"))
	require.NoError(t, n.AddLead(brokersim.Lead{Address: "127.100.0.10", Port: 31050, Target: brokersim.Listener{Cluster: "hub", Hostname: "r-0", Port: 8050}}))
	return n
}

func run(t *testing.T, brokers []brokersim.Broker, n *brokersim.Network) *brokersim.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := brokersim.Run(ctx, brokers, n)
	require.NoError(t, err)
	require.False(t, res.TimedOut)
	t.Logf("%v", res.Err())
	return res
}

func TestRunInstance(t *testing.T) {
	res := run(t, instance{root: rootTOML, burst: burstTOML}.brokers(t), instanceNetwork(t))
	require.NoError(t, res.Err())
	require.Equal(t, []string{"r-0", "r-1", "b-0", "b-1", "b-2"}, res.Hosts)
	require.Equal(t, []int{0, 1, 2, 3, 4}, res.Reachable)
}

// TestStartServesTheLeadBrokersNodePort starts the instance and greets the lead broker's
// advertised address as the hub does: while the stand-ins run, the NodePort answers as a Flux
// broker (a ZMTP CURVE peer), because rank 0's stand-in is behind it; after Close nothing
// listens there.
func TestStartServesTheLeadBrokersNodePort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sim, err := brokersim.Start(ctx, instance{root: rootTOML, burst: burstTOML}.brokers(t), instanceNetwork(t))
	require.NoError(t, err)
	require.NoError(t, sim.Result().Err(), "the burst joined through the NodePort")
	require.NoError(t, probe.Greet(ctx, "127.100.0.10", 31050))
	require.NoError(t, probe.Greet(ctx, "127.100.0.10", 31050), "and again: the probe does not disturb rank 0")
	addr, ok := sim.Addr(brokersim.Listener{Cluster: "hub", Hostname: "r-0", Port: 8050})
	require.True(t, ok)
	require.NoError(t, netguard.Allowed(addr))
	require.NoError(t, probe.Greet(ctx, "127.0.0.1", int32(port(t, addr))), "rank 0's own listener")
	_, ok = sim.Addr(brokersim.Listener{Cluster: "hub", Hostname: "r-1", Port: 8050})
	require.False(t, ok, "a broker without children does not listen")

	sim.Close()
	sim.Close()
	require.ErrorIs(t, probe.Greet(ctx, "127.100.0.10", 31050), probe.ErrUnreachable)
}

func port(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	n, err := strconv.Atoi(p)
	require.NoError(t, err)
	return n
}

// TestRunDialsTheLeadBrokersNodePort takes the lead broker's NodePort before the run: the
// burst's first broker, which dials it for real, cannot join; the in-cluster names still work.
func TestRunDialsTheLeadBrokersNodePort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.100.0.10:31050")
	require.NoError(t, err)
	defer taken.Close()
	res := run(t, instance{root: rootTOML, burst: burstTOML}.brokers(t), instanceNetwork(t))
	f, ok := res.FailureOf("b-0")
	require.True(t, ok)
	require.Equal(t, brokersim.ReasonConnect, f.Reason)
	require.Contains(t, f.Detail, "connecting to its parent 127.100.0.10 (rank 0) at tcp://127.100.0.10:31050: the lead broker's NodePort cannot be served there")
	require.Contains(t, f.Detail, "address already in use")
	require.Equal(t, []string{"b-0", "b-1", "b-2"}, res.Missing())
}

// TestRunRoutesALeadNameInProcess gives the lead broker a name instead of a node address: it
// cannot be listened on, so the network routes it in-process, as it routes Service names.
func TestRunRoutesALeadNameInProcess(t *testing.T) {
	const name = "lead.hpc.example.invalid"
	burst := strings.ReplaceAll(burstTOML, "127.100.0.10", name)
	n := brokersim.NewNetwork()
	require.NoError(t, n.AddHeadlessService("hub", "hpc", "flux-service", 8050, "r-0", "r-1"))
	require.NoError(t, n.AddHeadlessService("m", "hpc", "b", 8050, "b-0", "b-1", "b-2"))
	require.NoError(t, n.AddLead(brokersim.Lead{Address: name, Port: 31050, Target: brokersim.Listener{Cluster: "hub", Hostname: "r-0", Port: 8050}}))
	res := run(t, instance{root: rootTOML, burst: burst}.brokers(t), n)
	require.NoError(t, res.Err())
	require.Len(t, netguard.Violations(), 0, "nothing dialled the name")
}

// TestRunFailures covers the failures the federations do not.
func TestRunFailures(t *testing.T) {
	replace := func(s, old, new string) string {
		require.Contains(t, s, old)
		return strings.Replace(s, old, new, 1)
	}
	tests := []struct {
		name    string
		brokers func() []brokersim.Broker
		want    map[string]brokersim.Reason
		// detail is part of the detail of the failure of host detailOf.
		detailOf, detail string
	}{
		{
			name: "a broker not in its own hosts does not start, and its children find nobody listening",
			brokers: func() []brokersim.Broker {
				b := instance{root: rootTOML, burst: burstTOML}.brokers(t)
				b[2].Hostname = "b-9" // the pod of b-0 has another name
				return b
			},
			// The network still routes b-0's Service name to a pod named b-0, where nothing
			// listens.
			want:     map[string]brokersim.Reason{"b-9": brokersim.ReasonConfig, "b-1": brokersim.ReasonNotListening, "b-2": brokersim.ReasonNotListening},
			detailOf: "b-9", detail: "b-9: the broker does not start: the broker's hostname must be in hosts: b-9 not found in hosts",
		},
		{
			name: "a parent that does not know it has children does not listen",
			brokers: func() []brokersim.Broker {
				// The burst side nests b-1 and b-2 under b-0, but b-0's own pod got the
				// root's flat file: it has no children, so it does not bind.
				b := instance{root: rootTOML, burst: burstTOML}.brokers(t)
				b[2].BrokerTOML = []byte(replace(burstTOML, `{ host = "b-[1-2]", parent = "b-0" },`, `{ host = "b-[1-2]" },`))
				return b
			},
			want:     map[string]brokersim.Reason{"b-1": brokersim.ReasonNotListening, "b-2": brokersim.ReasonNotListening},
			detailOf: "b-1", detail: "connecting to its parent b-0 (rank 2) at tcp://b-0.b.hpc.svc.cluster.local:8050: it leads to b-0:8050 in cluster m, where no broker listens",
		},
		{
			name: "an unreadable certificate",
			brokers: func() []brokersim.Broker {
				b := instance{root: rootTOML, burst: burstTOML}.brokers(t)
				b[1].CurveCert = []byte("curve\n")
				return b
			},
			want:     map[string]brokersim.Reason{"r-1": brokersim.ReasonConfig},
			detailOf: "r-1", detail: "the broker refuses its certificate: curve certificate: has no public-key",
		},
		{
			name: "a bind URI the stand-in cannot bind",
			brokers: func() []brokersim.Broker {
				b := instance{root: rootTOML, burst: burstTOML}.brokers(t)
				b[2].BrokerTOML = []byte(replace(burstTOML, `{ host = "r-1,b-0" },`, `{ host = "r-1" }, { host = "b-0", bind = "ipc:///run/flux/overlay" },`))
				return b
			},
			want:     map[string]brokersim.Reason{"b-0": brokersim.ReasonBind, "b-1": brokersim.ReasonNotListening, "b-2": brokersim.ReasonNotListening},
			detailOf: "b-0", detail: `binding ipc:///run/flux/overlay: "ipc:///run/flux/overlay": ipc:// is not simulated`,
		},
		{
			name: "a connect URI with a port that is no number",
			brokers: func() []brokersim.Broker {
				b := instance{root: rootTOML, burst: burstTOML}.brokers(t)
				bad := replace(burstTOML, `connect = "tcp://127.100.0.10:31050"`, `connect = "tcp://127.100.0.10:port"`)
				for i := 2; i < 5; i++ {
					b[i].BrokerTOML = []byte(bad)
				}
				return b
			},
			want:     map[string]brokersim.Reason{"b-0": brokersim.ReasonConnect, "b-1": brokersim.ReasonOrphaned, "b-2": brokersim.ReasonOrphaned},
			detailOf: "b-0", detail: `connecting to its parent 127.100.0.10 (rank 0) at tcp://127.100.0.10:port: "tcp://127.100.0.10:port": the port "port" is not a number in 1-65535`,
		},
		{
			name: "a second rank 0",
			brokers: func() []brokersim.Broker {
				// The burst side lists its own first broker first: b-0 leads an instance
				// of its own, with b-1 and b-2.
				b := instance{root: rootTOML, burst: burstTOML}.brokers(t)
				own := string(bootstrap(`{ host = "b-[0-2]" },`))
				for i := 2; i < 5; i++ {
					b[i].BrokerTOML = []byte(own)
				}
				return b
			},
			want: map[string]brokersim.Reason{"b-0": brokersim.ReasonRankZero, "b-1": brokersim.ReasonUnresolved, "b-2": brokersim.ReasonUnresolved},
			// b-1 dials b-0 by the name of the root's Service, which the member does not have.
		},
		{
			name: "two brokers claim one rank",
			brokers: func() []brokersim.Broker {
				// b-0 runs in two clusters; both reach rank 0 through the lead, whichever
				// comes second is refused.
				b := instance{root: rootTOML, burst: burstTOML}.brokers(t)[:3]
				twin := b[2]
				twin.Cluster = "m2"
				return append(b, twin)
			},
			want: map[string]brokersim.Reason{"b-0": brokersim.ReasonDuplicate},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, tt.brokers(), instanceNetwork(t))
			got := map[string]brokersim.Reason{}
			for _, f := range res.Failures {
				require.NotContains(t, got, f.Host, "two failures of %s", f.Host)
				got[f.Host] = f.Reason
			}
			require.Equal(t, tt.want, got)
			if tt.detail != "" {
				f, ok := res.FailureOf(tt.detailOf)
				require.True(t, ok)
				require.Contains(t, f.Detail, tt.detail)
			}
		})
	}
}

func TestRunTimesOut(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := brokersim.Run(ctx, instance{root: rootTOML, burst: burstTOML}.brokers(t), instanceNetwork(t))
	require.NoError(t, err)
	require.True(t, res.TimedOut)
	require.Empty(t, res.Reachable)
	require.ErrorContains(t, res.Err(), "no broker is rank 0 (timed out)")
	require.Len(t, res.Failures, 5)
	for _, f := range res.Failures {
		require.Equal(t, brokersim.ReasonTimeout, f.Reason, "%v", f)
	}
}

func TestRunRefusesArguments(t *testing.T) {
	ctx := context.Background()
	_, err := brokersim.Run(ctx, nil, nil)
	require.ErrorContains(t, err, "no network")
	b := instance{root: rootTOML, burst: burstTOML}.brokers(t)
	_, err = brokersim.Run(ctx, append(b, b[0]), brokersim.NewNetwork())
	require.ErrorContains(t, err, "two brokers are named r-0 in cluster hub")
	b[0].Cluster = ""
	_, err = brokersim.Run(ctx, b, brokersim.NewNetwork())
	require.ErrorContains(t, err, "a broker needs a cluster and a hostname")

	res, err := brokersim.Run(ctx, nil, brokersim.NewNetwork())
	require.NoError(t, err)
	require.ErrorContains(t, res.Err(), "no broker is rank 0")
}

// TestRunLeavesNoGoroutines checks that a run ends every stand-in and every socket.
func TestRunLeavesNoGoroutines(t *testing.T) {
	f := newFederation(t, nested, fedOptions{})
	f.run(t)
	settle := func() int {
		n := runtime.NumGoroutine()
		for range 50 {
			time.Sleep(10 * time.Millisecond)
			if m := runtime.NumGoroutine(); m <= n {
				return m
			}
			n = runtime.NumGoroutine()
		}
		return n
	}
	before := settle()
	for range 3 {
		f.run(t)
	}
	require.LessOrEqual(t, settle(), before+2)
}

// BenchmarkJoin runs a federation of three clusters and 24 brokers until rank 0 reached every
// rank; join-ms is the time until every broker joined and rank 0 heard of it.
func BenchmarkJoin(b *testing.B) {
	for _, tc := range []struct{ name, manifest string }{{"nested", nested}, {"binomial", binomial}, {"flat", flat}} {
		b.Run(tc.name, func(b *testing.B) {
			f := newFederation(b, tc.manifest, fedOptions{})
			var join time.Duration
			for b.Loop() {
				res := f.run(b)
				if err := res.Err(); err != nil {
					b.Fatal(err)
				}
				join += res.JoinTime
			}
			b.ReportMetric(float64(join.Microseconds())/1000/float64(b.N), "join-ms/op")
		})
	}
}
