package hub_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/flux"
	"github.com/fluxfed/fluxfed/hub"
)

// fakeFollower stands for the follower the hub leaves running in a lead broker's container
// (flux.FollowCommand): each stream says it is ready, then prints what the test tells, until
// the test ends it or the hub stops it. With refuse set, every stream fails at once, as in a
// container whose flux has no python.
type fakeFollower struct {
	mu      sync.Mutex
	opened  int
	refuse  error
	lines   chan string
	end     chan error
	running bool
}

func newFakeFollower() *fakeFollower {
	return &fakeFollower{lines: make(chan string), end: make(chan error)}
}

func (f *fakeFollower) stream(ctx context.Context, _, _, _ string, argv []string, stdout io.Writer) error {
	if !slices.Equal(argv[len(argv)-len(flux.FollowArgs()):], flux.FollowArgs()) {
		return fmt.Errorf("not the follower: %q", argv)
	}
	f.mu.Lock()
	f.opened++
	refuse := f.refuse
	f.running = refuse == nil
	f.mu.Unlock()
	if refuse != nil {
		return refuse
	}
	defer func() {
		f.mu.Lock()
		f.running = false
		f.mu.Unlock()
	}()
	if _, err := io.WriteString(stdout, flux.FollowReady+"\n"); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-f.end:
			return err
		case l := <-f.lines:
			if _, err := io.WriteString(stdout, l+"\n"); err != nil {
				return err
			}
		}
	}
}

// state returns how many streams were opened, and whether one runs.
func (f *fakeFollower) state() (int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opened, f.running
}

// asks counts the commands the hub ran in namespace's lead broker container.
func (e *fakeExec) asks(namespace string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, c := range e.calls {
		if strings.HasPrefix(c, namespace+"/") {
			n++
		}
	}
	return n
}

// onDemandRoot creates an on-demand root whose burst is reserved at 0 and whose lead broker
// runs the stand-in flux of dir, with 2 ranks online and no job, and waits until the hub read it.
func onDemandRoot(t *testing.T, f *federation, name string) (*fluxv1alpha2.MiniCluster, string, []string) {
	t.Helper()
	ctx := context.Background()
	ns := f.namespace(t)
	root := newRoot(ns, name, fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 0, MaxSize: 2})
	root.Spec.Flux.Bursting.Scaling = &fluxv1alpha2.Scaling{Mode: fluxv1alpha2.ScalingOnDemand, ScaleDownAfter: &metav1.Duration{Duration: time.Hour}}
	hosts := []string{name + "-0", name + "-1", name + "-2", name + "-3", "burst-a-0", "burst-a-1"}
	dir := f.execs.standInFlux(t, ns)
	instance(t, dir, hosts, fluxState{online: map[int]bool{0: true, 1: true}})
	// The lead broker runs before the root is created: the hub's first ask is answered.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-0-abcde", Namespace: ns, Labels: hub.LeadBrokerSelector(root)},
		Spec:       corev1.PodSpec{NodeName: "node-" + name, Containers: []corev1.Container{{Name: name, Image: "busybox"}}},
	}
	require.NoError(t, f.hub.Client.Create(ctx, pod))
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: name, Image: "busybox", Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
	}}}
	require.NoError(t, f.hub.Client.Status().Update(ctx, pod))
	require.NoError(t, f.hub.Client.Create(ctx, root))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, &fluxv1alpha2.FluxStatus{State: "run", Size: 6, Online: 2}, f.root(c, root).Status.Flux)
	}, wait, tick)
	return root, dir, hosts
}

// TestAFollowerWakesTheHubWhenAJobWaits runs a hub that would ask Flux every 200 ms, backing off
// to once an hour: while the follower of an on-demand root's instance runs, the hub asks only when
// it tells of a change (a job waits: the burst grows at once), not every 200 ms after a change;
// when the follower ends, the hub reads what changed meanwhile and starts another.
func TestAFollowerWakesTheHubWhenAJobWaits(t *testing.T) {
	follow := newFakeFollower()
	f := startFederation(t, hub.Options{FluxInterval: 200 * time.Millisecond, FluxIntervalMax: time.Hour, ExecStream: follow.stream}, "member-a")
	root, dir, hosts := onDemandRoot(t, f, "followed")
	a := f.members["member-a"]
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		opened, running := follow.state()
		require.Equal(c, 1, opened)
		require.True(c, running)
	}, wait, tick, "the hub follows the instance once it runs")

	// A job waits: the follower says a job changed, the hub asks and grows the burst.
	instance(t, dir, hosts, fluxState{online: map[int]bool{0: true, 1: true}, pending: 3})
	follow.lines <- "job priority"
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		child := a.child(c, root.Namespace, "burst-a")
		require.NotNil(c, child)
		require.Equal(c, int32(1), child.Spec.Size)
	}, wait, tick)
	f.requireEvent(t, root.Namespace, fluxv1alpha2.EventBurstScaledUp, "raised burst burst-a from 0 to 1 broker: 1 job waits for 3 nodes")

	// Its broker joins and the job runs; the follower says so. Then, nothing changes and nothing
	// is asked however long the hub waits.
	instance(t, dir, hosts, fluxState{online: map[int]bool{0: true, 1: true, 4: true}, running: []int{0, 1, 4}})
	follow.lines <- "resource online"
	follow.lines <- "job alloc"
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, int32(3), f.root(c, root).Status.Flux.Online)
	}, wait, tick)
	settled := f.execs.asks(root.Namespace)
	time.Sleep(3 * time.Second)
	require.Equal(t, settled, f.execs.asks(root.Namespace), "the hub asked while the follower told of no change")

	// The follower ends; what changed meanwhile is read, and another follower starts.
	instance(t, dir, hosts, fluxState{online: map[int]bool{0: true, 1: true, 4: true}})
	follow.end <- errors.New("command terminated with exit code 1")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		opened, running := follow.state()
		require.Equal(c, 2, opened)
		require.True(c, running)
		require.Equal(c, &fluxv1alpha2.FluxStatus{State: "run", Size: 6, Online: 3}, f.root(c, root).Status.Flux)
	}, wait, tick)
	for _, e := range rootEvents(t, f, root.Namespace) {
		require.NotEqual(t, fluxv1alpha2.EventFluxNotAnswering, e.Reason, "a follower that ends is not news: %s", e.Note)
	}
	require.NoError(t, f.hub.Client.Delete(context.Background(), root))
}

// TestWithoutAFollowerTheHubAsksAsBefore runs a hub whose followers cannot start (the lead
// broker's flux has no python): it asks the instance every FluxInterval as it always did, sees
// the job wait and grows the burst, and says nothing of the follower on the root.
func TestWithoutAFollowerTheHubAsksAsBefore(t *testing.T) {
	follow := newFakeFollower()
	follow.refuse = errors.New("command terminated with exit code 127: sh: flux-python: not found")
	f := startFederation(t, hub.Options{FluxInterval: 300 * time.Millisecond, FluxIntervalMax: time.Second, ExecStream: follow.stream}, "member-a")
	root, dir, hosts := onDemandRoot(t, f, "polled")
	instance(t, dir, hosts, fluxState{online: map[int]bool{0: true, 1: true}, pending: 3})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		child := f.members["member-a"].child(c, root.Namespace, "burst-a")
		require.NotNil(c, child)
		require.Equal(c, int32(1), child.Spec.Size)
	}, wait, tick)
	opened, running := follow.state()
	require.Positive(t, opened, "the hub tried to follow the instance")
	require.False(t, running)
	// The child is pushed before the status of the same reconcile is written.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := f.root(c, root).Status.Flux
		require.NotNil(c, got)
		require.Equal(c, "run", got.State)
		require.Empty(c, got.Message)
	}, wait, tick)
	for _, e := range rootEvents(t, f, root.Namespace) {
		require.NotContains(t, e.Note, "flux-python", "the follower is not news")
	}
	require.NoError(t, f.hub.Client.Delete(context.Background(), root))
}

// rootEvents lists the events of namespace ns of the hub.
func rootEvents(t *testing.T, f *federation, ns string) []eventsv1.Event {
	t.Helper()
	var events eventsv1.EventList
	require.NoError(t, f.hub.Client.List(context.Background(), &events, client.InNamespace(ns)))
	return events.Items
}
