package realflux_test

import (
	"context"
	"encoding/json"
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
	"github.com/fluxfed/fluxfed/flux"
)

// scaleDownAfter is the idle time of the cycles here, short for the test.
const scaleDownAfter = 10 * time.Second

// onDemandRoot is a root of two brokers with two bursts reserved at 0, up to 2 brokers each,
// scaled on demand.
func onDemandRoot(name string, change func(*fluxv1alpha2.MiniClusterSpec)) *fluxv1alpha2.MiniCluster {
	return v1alpha2test.MiniCluster(name).Namespace(name).Size(2).Interactive().
		Bursts(fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 0, MaxSize: 2},
			fluxv1alpha2.Burst{Name: "burst-b", Cluster: "member-b", Size: 0, MaxSize: 2}).
		Spec(func(s *fluxv1alpha2.MiniClusterSpec) {
			s.Flux.Bursting.Scaling = &fluxv1alpha2.Scaling{Mode: fluxv1alpha2.ScalingOnDemand,
				ScaleDownAfter: &metav1.Duration{Duration: scaleDownAfter}}
			if change != nil {
				change(s)
			}
		}).Obj()
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

// realJob is what flux jobs --json says of a job.
type realJob struct {
	ID        json.Number `json:"id"`
	State     string      `json:"state"`
	Result    string      `json:"result"`
	TRun      float64     `json:"t_run"`
	TInactive float64     `json:"t_inactive"`
	Nnodes    int         `json:"nnodes"`
}

// jobs lists every job of the root's instance.
func jobs(t require.TestingT, f *fleet.Fleet, root *fluxv1alpha2.MiniCluster) []realJob {
	out, err := f.Runners["hub"].Flux(context.Background(), leadPod(t, f, root), "jobs", "-a", "--json")
	require.NoError(t, err)
	var list struct {
		Jobs []realJob `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	return list.Jobs
}

// cycle runs one on-demand cycle on root's instance, as its user would from the lead broker's
// container: a job that needs every reserved rank waits, the hub grows both bursts, their real
// brokers join, the job runs and ends, and once idle the bursts are drained and shrunk to 0.
// It returns the times of each step.
func cycle(t *testing.T, f *fleet.Fleet, root *fluxv1alpha2.MiniCluster, submit func() time.Time) map[string]time.Time {
	t.Helper()
	ctx := context.Background()
	hub := f.Clients["hub"]
	at := map[string]time.Time{"submitted": submit()}
	got := &fluxv1alpha2.MiniCluster{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, hub.Get(ctx, client.ObjectKeyFromObject(root), got))
		a, b := burstOf(got, "burst-a"), burstOf(got, "burst-b")
		require.NotNil(c, a)
		require.NotNil(c, b)
		if _, ok := at["decided"]; !ok && (a.Size > 0 || b.Size > 0) {
			at["decided"] = time.Now()
		}
		if _, ok := at["online"]; !ok && at["decided"] != (time.Time{}) {
			if out, err := f.Runners["hub"].Flux(ctx, leadPod(c, f, root), "uptime"); err == nil {
				if u, err := flux.ParseUptime(out); err == nil && u.Offline == 0 {
					at["online"] = time.Now()
				}
			}
		}
		require.Equal(c, []fluxv1alpha2.BurstPhase{fluxv1alpha2.BurstJoined, fluxv1alpha2.BurstJoined}, []fluxv1alpha2.BurstPhase{a.Phase, b.Phase},
			"%s; %s", a.Message, b.Message)
		at["joined"] = time.Now()
	}, wait, 100*time.Millisecond, "the bursts never joined")

	var job realJob
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		list := jobs(c, f, root)
		require.NotEmpty(c, list)
		job = list[0]
		require.Equal(c, "INACTIVE", job.State, "the job ran and ended")
	}, wait, tick)
	require.Equal(t, "COMPLETED", job.Result, "the job ran to its end")
	at["running"], at["ended"] = floatTime(job.TRun), floatTime(job.TInactive)

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, hub.Get(ctx, client.ObjectKeyFromObject(root), got))
		if _, ok := at["drained"]; !ok && burstOf(got, "burst-a").Drained+burstOf(got, "burst-b").Drained > 0 {
			at["drained"] = time.Now()
		}
		for _, b := range []string{"burst-a", "burst-b"} {
			s := burstOf(got, b)
			require.Equal(c, fluxv1alpha2.BurstReserved, s.Phase, "%s: %s", b, s.Message)
		}
		for _, m := range []string{"member-a", "member-b"} {
			var pods corev1.PodList
			require.NoError(c, f.Clients[m].List(ctx, &pods, client.InNamespace(root.Namespace)))
			require.Empty(c, pods.Items, "the burst's pods on %s", m)
		}
		at["shrunk"] = time.Now()
	}, wait+scaleDownAfter, tick, "the bursts never shrank")
	return at
}

func floatTime(s float64) time.Time { return time.Unix(0, int64(s*1e9)) }

func timeline(at map[string]time.Time) string {
	var b strings.Builder
	prev := at["submitted"]
	for _, step := range []string{"decided", "online", "joined", "running", "ended", "drained", "shrunk"} {
		if t, ok := at[step]; ok {
			fmt.Fprintf(&b, " -> %s +%v", step, t.Sub(prev).Round(100*time.Millisecond))
			prev = t
		}
	}
	return "submitted" + b.String()
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
	t.Logf("on-demand cycle, real Flux, default settings: %s", timeline(at))

	// The queue stopped, a job waits for the administrator: nothing grows for it.
	fluxOn("queue", "stop")
	fluxOn("submit", "-N6", "sleep", "4")
	waited := time.Now()
	require.Never(t, func() bool {
		require.NoError(t, hub.Get(ctx, client.ObjectKeyFromObject(root), got))
		return burstOf(got, "burst-a").Size > 0 || burstOf(got, "burst-b").Size > 0
	}, 25*time.Second, time.Second, "a burst grew for a job that waits on a stopped queue")
	require.NoError(t, hub.Get(ctx, client.ObjectKeyFromObject(root), got))
	require.True(t, got.Status.Flux.PendingJobs == 1, "the hub sees the job wait: %+v", got.Status.Flux)
	// Started again, the job waits for nodes: the bursts grow, it runs, they shrink again.
	at = cycle(t, f, root, func() time.Time {
		fluxOn("queue", "start")
		return time.Now()
	})
	t.Logf("after %v with the queue stopped (nothing grew), the queue started: %s", at["submitted"].Sub(waited).Round(time.Second), timeline(at))

	list := jobs(t, f, root)
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
	t.Logf("on-demand cycle with housekeeping: %s", timeline(at))
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
		require.True(c, burstOf(got, "burst-a").Size > 0 || burstOf(got, "burst-b").Size > 0, "no burst raised")
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
