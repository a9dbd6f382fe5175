package realflux_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/e2e/brokersim"
	"github.com/fluxfed/fluxfed/e2e/fleet"
	"github.com/fluxfed/fluxfed/e2e/lanetest"
	"github.com/fluxfed/fluxfed/e2e/realflux"
	"github.com/fluxfed/fluxfed/hostlist"
)

const (
	wait = 3 * time.Minute
	tick = 500 * time.Millisecond
)

// leadPod returns the running pod of rank 0 of root on the hub.
func leadPod(t require.TestingT, f *fleet.Fleet, root *fluxv1alpha2.MiniCluster) client.ObjectKey {
	return client.ObjectKeyFromObject(lanetest.LeadPod(t, f.Clients, root))
}

// shared is the fleet of the package's federation tests, started by TestMain with real Flux and
// the hub's default settings for asking Flux (every 10 s, backing off to 2 minutes).
var shared *fleet.Fleet

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "fluxfed-realflux-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		var once sync.Once
		start = func(t testing.TB) *fleet.Fleet {
			once.Do(func() {
				shared, err = fleet.Start(context.Background(), fleet.Options{Dir: dir, RealFlux: true,
					ManagerArgs: []string{"--flux-interval=10s", "--flux-interval-max=2m"},
					Logf:        func(format string, args ...any) { fmt.Fprintf(os.Stderr, "realflux: "+format+"\n", args...) }})
			})
			if shared == nil {
				t.Fatalf("starting the fleet: %v (logs in %s)", err, dir)
			}
			return shared
		}
		code := m.Run()
		if shared != nil {
			if err := shared.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "stopping the fleet:", err)
				code = 1
			}
		}
		return code
	}())
}

// start returns the shared fleet, starting it the first time.
var start func(t testing.TB) *fleet.Fleet

// TestARootBurstsOntoTwoMembersWithRealBrokers runs a root of two brokers with a burst of two on
// member-a and one of one on member-b, every broker a real flux-core broker: the bursts' brokers
// reach the root's rank 0 through its exposed NodePort, every rank is online, the hub reads that
// from the real instance (Joined), and one job spans the three clusters.
func TestARootBurstsOntoTwoMembersWithRealBrokers(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	hub := f.Clients["hub"]
	require.NoError(t, hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "research"}}))
	root := lanetest.TwoBurstRoot(v1alpha2test.MiniCluster("lammps").Namespace("research").Size(2)).Obj()
	start := time.Now()
	require.NoError(t, hub.Create(ctx, root))
	got := lanetest.WaitJoined(t, f.Clients, root, 5, wait, tick)
	t.Logf("every rank online in the root's Flux instance, as the hub reads it, %v after the root was created", time.Since(start).Round(100*time.Millisecond))

	// Every real broker is where the overlay's stand-in places it from the same config.
	sides, err := f.Federation(ctx, got)
	require.NoError(t, err)
	requireStandInPlaces(t, f, sides)
	hostlist, err := f.Runners["hub"].Flux(ctx, leadPod(t, f, root), "getattr", "hostlist")
	require.NoError(t, err)

	// One job on every node of the federation.
	out, err := f.Runners["hub"].Flux(ctx, leadPod(t, f, root), "run", "-N5", "hostname")
	require.NoError(t, err)
	lanetest.RequireHosts(t, out, "burst-a-0", "burst-a-1", "burst-b-0", "lammps-0", "lammps-1")

	// Deleting the root stops every broker and leaves nothing behind.
	lanetest.DeleteAndWaitGone(t, f.Clients, root, wait, tick)
	// The stand-ins of the same brokers, on the same configs and certificates, join as the real
	// ones did: every rank, under the same hosts.
	n, err := fleet.Network(got, sides)
	require.NoError(t, err)
	runCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res, err := brokersim.Run(runCtx, fleet.Brokers(sides, nil), n)
	require.NoError(t, err)
	require.Empty(t, res.Failures)
	require.Equal(t, strings.TrimSpace(hostlist), hostlistOf(res.Hosts), "rank 0's hosts")
	require.Equal(t, []int{0, 1, 2, 3, 4}, res.Reachable)

	// The root was deleted: its lead was stopped, every follower ended cleanly.
	for name, r := range f.Runners {
		for _, e := range endingsIn(r, "research") {
			if strings.HasPrefix(e.Pod.Name, "lammps-0-") {
				require.Equal(t, 143, e.Code, "%s: %s", e.Pod.Name, e.Message)
				require.Equal(t, "the instance was stopped (the broker exited with status 0)\n", e.Message)
				continue
			}
			require.Equal(t, 0, e.Code, "%s on %s: %s", e.Pod.Name, name, e.Message)
		}
	}
}

// requireStandInPlaces requires every real broker of sides to have found the place that the
// overlay's stand-in (brokersim.Locate) computes from the same config and hostname: its rank,
// the size, its parent's URI, and whether it listens for children.
func requireStandInPlaces(t *testing.T, f *fleet.Fleet, sides []fleet.Side) {
	t.Helper()
	ctx := context.Background()
	attr := func(s fleet.Side, p corev1.Pod, name string) (string, error) {
		out, err := f.Runners[s.Cluster].Flux(ctx, client.ObjectKeyFromObject(&p), "getattr", name)
		return strings.TrimSpace(out), err
	}
	checked := 0
	for _, s := range sides {
		for _, p := range s.Pods {
			lanetest.RequireStandInPlace(t, s.BrokerTOML, p.Spec.Hostname, func(name string) (string, error) { return attr(s, p, name) })
			checked++
		}
	}
	t.Logf("%d real brokers are where the stand-in places them", checked)
}

// hostlistOf compresses hosts as Flux prints a hostlist.
func hostlistOf(hosts []string) string { return hostlist.Compress(hosts) }

// endingsIn returns how the pods of namespace that r ran ended.
func endingsIn(r *realflux.Runner, namespace string) []realflux.Ending {
	var out []realflux.Ending
	for _, e := range r.Endings() {
		if e.Pod.Namespace == namespace {
			out = append(out, e)
		}
	}
	return out
}
