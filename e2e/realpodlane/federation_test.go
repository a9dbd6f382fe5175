//go:build realpods

package realpodlane

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/fleet"
	"github.com/fluxfed/fluxfed/e2e/lanetest"
	"github.com/fluxfed/fluxfed/flux"
	"github.com/fluxfed/fluxfed/hub"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// realFleet starts a hub and two members, each with one real node, fluxfed on each (the hub's
// manager with the default settings for asking Flux), and the hub's node ports reachable from the
// members' pods (serveNodePorts).
func realFleet(t *testing.T) *fleet.Fleet {
	t.Helper()
	images(t)
	// A short directory: containerd's sockets are in it, and a unix socket's path has at most 104
	// characters. Removed once the fleet stopped, or kept with its logs when the test failed.
	dir := lanetest.ShortDir(t, "ffp", "fleet", "the fleet's clusters, with their logs,")
	start := time.Now()
	f := fleet.StartT(t, fleet.Options{Dir: dir, RealNodes: 1, Logf: t.Logf,
		ManagerArgs: []string{"--flux-interval=10s", "--flux-interval-max=2m"}})
	t.Logf("The hub and two members, one real node each, up with fluxfed in %s (load average %s)", time.Since(start).Round(100*time.Millisecond), loadAverage())
	serveNodePorts(t, f.Hub, f.Members)
	return f
}

// leadPod returns the running pod of rank 0 of root on the hub.
func leadPod(t require.TestingT, f *fleet.Fleet, root *fluxv1alpha2.MiniCluster) *corev1.Pod {
	return lanetest.LeadPod(t, f.Clients, root)
}

// fluxIn runs a flux command in the root's lead broker container through the hub's exec, as the
// hub itself does: the API server of the hub, the kubelet of the lead's node, its containerd.
func fluxIn(ctx context.Context, t require.TestingT, f *fleet.Fleet, root *fluxv1alpha2.MiniCluster, args ...string) (string, error) {
	exec, err := hub.NewExec(f.Hub.Config)
	require.NoError(t, err)
	lead := leadPod(t, f, root)
	out, err := exec(ctx, lead.Namespace, lead.Name, lead.Spec.Containers[0].Name, flux.Command(names.MountPath(root), append([]string{"flux"}, args...)...))
	return string(out), err
}

// TestFederationOnRealPods runs roots on a hub whose bursts go to two members, every cluster with
// a real node: a root with fixed bursts, then one scaled on demand.
func TestFederationOnRealPods(t *testing.T) {
	f := realFleet(t)
	mem := sampleMemory(t, f)
	t.Run("a root bursts onto two members", func(t *testing.T) { testRootBursts(t, f, mem) })
	t.Run("on demand", func(t *testing.T) { testOnDemand(t, f) })
	mem.log(t)
}

// testRootBursts runs a root of two brokers on the hub with a burst of two on member-a and one of
// one on member-b, every broker in a real pod: the bursts' brokers reach the root's rank 0
// through its NodePort from their own clusters, every rank is online in the root's instance as
// the hub reads it through the lead's kubelet, and one job spans the three clusters.
func testRootBursts(t *testing.T, f *fleet.Fleet, mem *memorySampler) {
	ctx := context.Background()
	hubClient := f.Clients["hub"]
	require.NoError(t, hubClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "research"}}))
	describeOnFailure(t, hubClient, "research")
	for _, m := range f.Members {
		describeOnFailure(t, f.Clients[m.Name], "research")
	}
	root := lanetest.TwoBurstRoot(realMiniCluster("lammps", "research", 2, "hostname").Expose(hubAddress.String())).Obj()
	start := time.Now()
	require.NoError(t, hubClient.Create(ctx, root))
	got := lanetest.WaitJoined(t, f.Clients, root, 5, busyWait, time.Second)
	t.Logf("Every rank online in the root's Flux instance, as the hub reads it, %s after the root was created (load average %s)",
		time.Since(start).Round(100*time.Millisecond), loadAverage())

	// Every broker runs in a pod on its cluster's real node.
	for _, name := range []string{"hub", "member-a", "member-b"} {
		var pods corev1.PodList
		require.NoError(t, f.Clients[name].List(ctx, &pods, client.InNamespace("research")))
		require.NotEmpty(t, pods.Items, name)
		for _, p := range pods.Items {
			require.Contains(t, f.Env.Cluster(name).RealNodes, p.Spec.NodeName, "pod %s on %s", p.Name, name)
		}
	}
	overlay, err := fluxIn(ctx, t, f, root, "overlay", "status", "--no-pretty")
	require.NoError(t, err)
	t.Logf("flux overlay status in the lead's container:\n%s", overlay)
	require.Contains(t, overlay, "lammps-0: full")
	resources, err := fluxIn(ctx, t, f, root, "resource", "list")
	require.NoError(t, err)
	t.Logf("flux resource list in the lead's container:\n%s", resources)

	// Every broker, in its real pod on its cluster, is where the overlay's stand-in places it
	// from the same config.
	sides, err := f.Federation(ctx, got)
	require.NoError(t, err)
	requireStandInPlaces(t, f, sides)

	// One job on every node of the federation.
	out, err := fluxIn(ctx, t, f, root, "run", "-N5", "hostname")
	require.NoError(t, err)
	lanetest.RequireHosts(t, out, "burst-a-0", "burst-a-1", "burst-b-0", "lammps-0", "lammps-1")
	mem.log(t)

	// Deleting the root stops every broker and leaves nothing behind.
	lanetest.DeleteAndWaitGone(t, f.Clients, root, busyWait, time.Second)
}

// requireStandInPlaces requires every broker of sides to have found the place that the overlay's
// stand-in (brokersim.Locate) computes from the same config and hostname: its rank, the size, its
// parent's URI, and whether it listens for children. It asks each broker with flux getattr in
// its container, through its cluster's kubelet.
func requireStandInPlaces(t *testing.T, f *fleet.Fleet, sides []fleet.Side) {
	t.Helper()
	ctx := context.Background()
	checked := 0
	for _, s := range sides {
		exec, err := hub.NewExec(f.Env.Cluster(s.Cluster).Config)
		require.NoError(t, err)
		attr := func(p corev1.Pod, name string) (string, error) {
			out, err := exec(ctx, p.Namespace, p.Name, p.Spec.Containers[0].Name, flux.Command(names.MountPath(s.MiniCluster), "flux", "getattr", name))
			return strings.TrimSpace(string(out)), err
		}
		for _, p := range s.Pods {
			lanetest.RequireStandInPlace(t, s.BrokerTOML, p.Spec.Hostname, func(name string) (string, error) { return attr(p, name) })
			checked++
		}
	}
	require.Equal(t, 5, checked, "brokers checked")
	t.Logf("%d brokers in real pods are where the stand-in places them", checked)
}

// memorySampler keeps the peak resident memory of the real nodes' programs and the brokers of
// the fleet's clusters (the processes in their sandboxes' cgroups), sampled every two seconds
// from /proc.
type memorySampler struct {
	cgroups []string
	mu      sync.Mutex
	peak    map[string]int64 // kB, by kind
	sum     int64            // the peak of the sum of all
}

// memoryKind groups a process by its command name: the real nodes' daemons, the containers'
// shims and the brokers; "" for others.
func memoryKind(comm string) string {
	switch {
	case comm == "containerd":
		return "containerd"
	case comm == "kubelet":
		return "kubelet"
	case strings.HasPrefix(comm, "containerd-shim"):
		return "containerd-shim"
	case strings.HasPrefix(comm, "flux-broker"):
		return "flux-broker"
	case comm == "pause":
		return "pause"
	}
	return ""
}

func sampleMemory(t *testing.T, f *fleet.Fleet) *memorySampler {
	s := &memorySampler{peak: map[string]int64{}}
	for _, c := range f.Env.Clusters {
		s.cgroups = append(s.cgroups, c.Sandbox.Cgroup()+"/")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			s.sample()
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

func (s *memorySampler) sample() {
	now := map[string]int64{}
	var total int64
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil {
			continue
		}
		kind := memoryKind(strings.TrimSpace(string(comm)))
		if kind == "" || !s.ours(e.Name()) {
			continue
		}
		status, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(status)) {
			if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
				now[kind] += kb
				total += kb
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range now {
		s.peak[k] = max(s.peak[k], v)
	}
	s.sum = max(s.sum, total)
}

// ours says whether process pid runs in one of the sandboxes' cgroups.
func (s *memorySampler) ours(pid string) bool {
	data, err := os.ReadFile(filepath.Join("/proc", pid, "cgroup"))
	if err != nil {
		return false
	}
	for _, cg := range s.cgroups {
		if strings.Contains(string(data), cg) {
			return true
		}
	}
	return false
}

func (s *memorySampler) log(t *testing.T) {
	s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(s.peak)) {
		parts = append(parts, fmt.Sprintf("%s %d MB", k, s.peak[k]/1024))
	}
	t.Logf("Peak resident memory of the real nodes' programs and the brokers of the three clusters: %d MB in all (%s; load average %s)", s.sum/1024, strings.Join(parts, ", "), loadAverage())
}
