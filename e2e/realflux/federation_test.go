package realflux_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/e2e/brokersim"
	"github.com/fluxfed/fluxfed/e2e/fleet"
	"github.com/fluxfed/fluxfed/e2e/realflux"
	"github.com/fluxfed/fluxfed/hostlist"
)

const (
	wait = 3 * time.Minute
	tick = 500 * time.Millisecond
)

// leadPod returns the running pod of rank 0 of root on the hub.
func leadPod(t require.TestingT, f *fleet.Fleet, root *fluxv1alpha2.MiniCluster) client.ObjectKey {
	var pods corev1.PodList
	require.NoError(t, f.Clients["hub"].List(context.Background(), &pods, client.InNamespace(root.Namespace),
		client.MatchingLabels{fluxv1alpha2.LabelMiniCluster: root.Name, batchv1.JobCompletionIndexAnnotation: "0"}))
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			return client.ObjectKeyFromObject(&p)
		}
	}
	require.Fail(t, "no running lead pod")
	return client.ObjectKey{}
}

func burstOf(root *fluxv1alpha2.MiniCluster, name string) *fluxv1alpha2.BurstStatus {
	for i := range root.Status.Bursts {
		if root.Status.Bursts[i].Name == name {
			return &root.Status.Bursts[i]
		}
	}
	return nil
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
	root := v1alpha2test.MiniCluster("lammps").Namespace("research").Size(2).Interactive().
		Bursts(fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 2},
			fluxv1alpha2.Burst{Name: "burst-b", Cluster: "member-b", Size: 1}).Obj()
	start := time.Now()
	require.NoError(t, hub.Create(ctx, root))

	got := &fluxv1alpha2.MiniCluster{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, hub.Get(ctx, client.ObjectKeyFromObject(root), got))
		require.NotNil(c, got.Status.Flux, "the hub has not asked Flux yet")
		require.Equal(c, int32(5), got.Status.Flux.Online, "ranks online: %+v", got.Status.Flux)
		for _, b := range []string{"burst-a", "burst-b"} {
			s := burstOf(got, b)
			require.NotNil(c, s)
			require.Equal(c, fluxv1alpha2.BurstJoined, s.Phase, "%s: %s", b, s.Message)
		}
	}, wait, tick)
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
	hosts := strings.Fields(out)
	slices.Sort(hosts)
	require.Equal(t, []string{"burst-a-0", "burst-a-1", "burst-b-0", "lammps-0", "lammps-1"}, hosts)

	// Deleting the root stops every broker and leaves nothing behind.
	require.NoError(t, hub.Delete(ctx, root))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, apierrors.IsNotFound(hub.Get(ctx, client.ObjectKeyFromObject(root), got)))
		for _, name := range []string{"hub", "member-a", "member-b"} {
			var pods corev1.PodList
			require.NoError(c, f.Clients[name].List(ctx, &pods, client.InNamespace("research")))
			require.Empty(c, pods.Items, "pods left on %s", name)
		}
	}, wait, tick)
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
			place, err := brokersim.Locate(s.BrokerTOML, p.Spec.Hostname)
			require.NoError(t, err, p.Spec.Hostname)
			rank, err := attr(s, p, "rank")
			require.NoError(t, err)
			size, err := attr(s, p, "size")
			require.NoError(t, err)
			require.Equal(t, []string{strconv.Itoa(place.Rank), strconv.Itoa(place.Size)}, []string{rank, size}, "%s: rank and size", p.Spec.Hostname)
			parent, err := attr(s, p, "tbon.parent-endpoint")
			if place.Connect == "" {
				require.Error(t, err, "%s has no parent", p.Spec.Hostname)
			} else {
				require.NoError(t, err)
				require.Equal(t, place.Connect, parent, "%s: its parent's URI", p.Spec.Hostname)
			}
			_, err = attr(s, p, "tbon.endpoint")
			require.Equal(t, place.Bind != "", err == nil, "%s listens for children: %v", p.Spec.Hostname, place.Children)
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
