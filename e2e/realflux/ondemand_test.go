package realflux_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/e2e/fleet"
	"github.com/fluxfed/fluxfed/e2e/lanetest"
)

// scaleDownAfter is the idle time of the cycles here, short for the test.
const scaleDownAfter = 10 * time.Second

// onDemandRoot is a root of two brokers with two bursts reserved at 0, up to 2 brokers each,
// scaled on demand (lanetest.OnDemandBursts).
func onDemandRoot(name string, change func(*fluxv1alpha2.MiniClusterSpec)) *fluxv1alpha2.MiniCluster {
	b := lanetest.OnDemandBursts(v1alpha2test.MiniCluster(name).Namespace(name).Size(2).Interactive(), scaleDownAfter)
	if change != nil {
		b = b.Spec(change)
	}
	return b.Obj()
}

// createOnDemand creates root in a namespace of its own on the hub, deletes it when the test
// ends, and waits until the hub reads its instance running on the root's two ranks.
func createOnDemand(t testing.TB, f *fleet.Fleet, root *fluxv1alpha2.MiniCluster) *fluxv1alpha2.MiniCluster {
	t.Helper()
	ctx := context.Background()
	hub := f.Clients["hub"]
	require.NoError(t, hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: root.Namespace}}))
	require.NoError(t, hub.Create(ctx, root))
	t.Cleanup(func() { _ = hub.Delete(context.Background(), root) })
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &fluxv1alpha2.MiniCluster{}
		require.NoError(c, hub.Get(ctx, client.ObjectKeyFromObject(root), got))
		require.NotNil(c, got.Status.Flux)
		require.Equal(c, fluxv1alpha2.FluxStatus{State: "run", Size: 6, Online: 2}, *got.Status.Flux)
	}, wait, tick)
	return root
}

// fluxIn runs flux commands in root's lead broker through the hub's runner.
func fluxIn(f *fleet.Fleet, root *fluxv1alpha2.MiniCluster) lanetest.FluxIn {
	return func(ctx context.Context, t require.TestingT, args ...string) (string, error) {
		return f.Runners["hub"].Flux(ctx, leadPod(t, f, root), args...)
	}
}

// cycle runs one on-demand cycle on root's instance, as its user would from the lead broker's
// container (lanetest.Cycle), and returns the times of each step.
func cycle(t *testing.T, f *fleet.Fleet, root *fluxv1alpha2.MiniCluster, submit func() time.Time) map[string]time.Time {
	t.Helper()
	return lanetest.Cycle{Clients: f.Clients, Root: root, FluxIn: fluxIn(f, root), Wait: wait, Tick: tick, ScaleDownAfter: scaleDownAfter}.Run(t, submit)
}

// TestOnDemandBurstsGrowAndShrinkWithRealFlux runs the on-demand cycle with real brokers and
// the hub's default settings, twice on one root: as is, then with the queue stopped while a job
// waits (nothing grows for it, the idle bursts still shrink), started again (they grow for it).
// No job is killed, and the root's brokers never restart.
func TestOnDemandBurstsGrowAndShrinkWithRealFlux(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	hub := f.Clients["hub"]
	root := createOnDemand(t, f, onDemandRoot("on-demand", nil))
	got := &fluxv1alpha2.MiniCluster{}
	lead := leadPod(t, f, root)
	fluxOn := func(args ...string) string {
		out, err := f.Runners["hub"].Flux(ctx, lead, args...)
		require.NoError(t, err)
		return out
	}

	at := cycle(t, f, root, func() time.Time {
		fluxOn("submit", "-N6", "sleep", "4")
		return time.Now()
	})
	t.Logf("on-demand cycle, real Flux, default settings: %s", lanetest.Timeline(at))

	// The queue stopped, a job waits for the administrator: nothing grows for it.
	fluxOn("queue", "stop")
	fluxOn("submit", "-N6", "sleep", "4")
	waited := time.Now()
	require.Never(t, func() bool {
		require.NoError(t, hub.Get(ctx, client.ObjectKeyFromObject(root), got))
		return lanetest.BurstOf(got, "burst-a").Size > 0 || lanetest.BurstOf(got, "burst-b").Size > 0
	}, 25*time.Second, time.Second, "a burst grew for a job that waits on a stopped queue")
	require.NoError(t, hub.Get(ctx, client.ObjectKeyFromObject(root), got))
	require.True(t, got.Status.Flux.PendingJobs == 1, "the hub sees the job wait: %+v", got.Status.Flux)
	// Started again, the job waits for nodes: the bursts grow, it runs, they shrink again.
	at = cycle(t, f, root, func() time.Time {
		fluxOn("queue", "start")
		return time.Now()
	})
	t.Logf("after %v with the queue stopped (nothing grew), the queue started: %s", at["submitted"].Sub(waited).Round(time.Second), lanetest.Timeline(at))

	list := lanetest.Jobs(t, fluxIn(f, root))
	require.Len(t, list, 2)
	for _, j := range list {
		require.Equal(t, "COMPLETED", j.Result, "job %s", j.ID)
	}
	for _, e := range endingsIn(f.Runners["hub"], root.Namespace) {
		require.Failf(t, "a root broker ended", "%s: %d %s", e.Pod.Name, e.Code, e.Message)
	}
}

// TestOnDemandWithHousekeeping runs the cycle on a root whose brokers run a housekeeping command
// after each job ([job-manager.housekeeping], set by commands.pre): while it runs, flux resource
// status lists the ranks under avail and housekeeping at once, which the hub reads.
func TestOnDemandWithHousekeeping(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	root := onDemandRoot("housekeeping", func(s *fluxv1alpha2.MiniClusterSpec) {
		s.Containers[0].Commands.Pre = `printf '[job-manager.housekeeping]\ncommand = ["sleep", "5"]\n' >/mnt/flux/view/etc/flux/config/housekeeping.toml`
	})
	createOnDemand(t, f, root)
	lead := leadPod(t, f, root)
	at := cycle(t, f, root, func() time.Time {
		_, err := f.Runners["hub"].Flux(ctx, lead, "submit", "-N6", "sleep", "2")
		require.NoError(t, err)
		return time.Now()
	})
	for _, e := range events(t, f, root) {
		require.NotEqual(t, "FluxUnreadable", e.Reason, "the hub could not read Flux: %s", e.Message)
	}
	t.Logf("on-demand cycle with housekeeping: %s", lanetest.Timeline(at))
}

// events returns the hub's events about root.
func events(t testing.TB, f *fleet.Fleet, root *fluxv1alpha2.MiniCluster) []corev1.Event {
	var list corev1.EventList
	require.NoError(t, f.Clients["hub"].List(context.Background(), &list, client.InNamespace(root.Namespace)))
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Name == root.Name {
			out = append(out, e)
		}
	}
	return out
}

// idleWindow is how long BenchmarkTheHubNoticesAWaitingJob counts the hub's execs while nothing
// happens.
var idleWindow = flag.Duration("fluxfed.idle", 3*time.Minute, "how long BenchmarkTheHubNoticesAWaitingJob counts the hub's execs while nothing happens")

// hubExecs returns the exec requests the hub's API server completed (apiserver_request_total of
// pods/exec), and those it serves now (apiserver_longrunning_requests): the hub is the only one
// that execs into pods there, the runner runs its own flux commands on this machine.
func hubExecs(t testing.TB, f *fleet.Fleet) (done, open float64) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(f.Hub.Config)
	require.NoError(t, err)
	data, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.Contains(line, `subresource="exec"`) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		require.NoError(t, err, line)
		switch {
		case strings.HasPrefix(line, "apiserver_request_total{"):
			done += v
		case strings.HasPrefix(line, "apiserver_longrunning_requests{"):
			open += v
		}
	}
	return done, open
}

// BenchmarkTheHubNoticesAWaitingJob measures, with real Flux and the hub's default settings, what
// the hub's view of an on-demand root's instance costs while nothing happens, and how soon it
// sees a job that needs the bursts. It prints (run it alone: the API server's counts are the whole
// hub's):
//
//	go test ./e2e/realflux -run '^$' -bench TheHubNoticesAWaitingJob -benchtime 1x
//	idle: N execs in 3m0s (X per minute), open exec sessions: M
//	a job that needs the bursts: submitted -> burst raised +Ts (BurstScaledUp)
func BenchmarkTheHubNoticesAWaitingJob(b *testing.B) {
	for i := range b.N {
		noticeAWaitingJob(b, fmt.Sprintf("noticed-%d", i))
	}
}

func noticeAWaitingJob(t testing.TB, name string) {
	f := start(t)
	ctx := context.Background()
	hub := f.Clients["hub"]
	root := createOnDemand(t, f, onDemandRoot(name, nil))
	lead := leadPod(t, f, root)

	// Nothing happens: what does the hub's view cost?
	done0, _ := hubExecs(t, f)
	time.Sleep(*idleWindow)
	done1, open := hubExecs(t, f)
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("idle: %.0f execs in %v (%.2f per minute), open exec sessions: %.0f; load %s",
		done1-done0, *idleWindow, (done1-done0)/idleWindow.Minutes(), open, strings.TrimSpace(string(load)))

	// A job that needs the bursts: how soon does the hub raise one?
	_, err := f.Runners["hub"].Flux(ctx, lead, "submit", "-N6", "sleep", "4")
	require.NoError(t, err)
	submitted := time.Now()
	got := &fluxv1alpha2.MiniCluster{}
	var raised time.Time
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, hub.Get(ctx, client.ObjectKeyFromObject(root), got))
		require.True(c, lanetest.BurstOf(got, "burst-a").Size > 0 || lanetest.BurstOf(got, "burst-b").Size > 0, "no burst raised")
		raised = time.Now()
	}, wait, 100*time.Millisecond)
	// The event is recorded after the status write that raised the burst.
	var scaledUp time.Time
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, e := range events(t, f, root) {
			if e.Reason == fluxv1alpha2.EventBurstScaledUp && (scaledUp.IsZero() || e.EventTime.Time.Before(scaledUp)) {
				scaledUp = e.EventTime.Time
			}
		}
		require.False(c, scaledUp.IsZero(), "no BurstScaledUp event")
	}, wait, 100*time.Millisecond)
	load, _ = os.ReadFile("/proc/loadavg")
	t.Logf("a job that needs the bursts: submitted -> burst raised in status +%v (BurstScaledUp event at +%v); load %s",
		raised.Sub(submitted).Round(10*time.Millisecond), scaledUp.Sub(submitted).Round(10*time.Millisecond), strings.TrimSpace(string(load)))
}
