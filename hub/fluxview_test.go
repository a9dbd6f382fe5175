package hub_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/flux"
	"github.com/fluxfed/fluxfed/hub"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

// fluxState is a stand-in instance: the ranks online, those fluxfed drained (drained, no job
// there), the nodes one waiting job asks for (none when 0), and the ranks of a running job.
type fluxState struct {
	online, drained map[int]bool
	pending         int
	running         []int
}

// instance writes, in flux-core 0.88.0's formats (the fixtures of package flux), what a stand-in
// flux in dir prints for an instance of hosts in state st.
func instance(t testing.TB, dir string, hosts []string, st fluxState) {
	t.Helper()
	groups := map[string][]int{}
	var order []string
	offline := 0
	for r := range hosts {
		state := "avail"
		if st.drained[r] {
			state = "drained"
		}
		if !st.online[r] {
			state += "*"
			offline++
		}
		if _, ok := groups[state]; !ok {
			order = append(order, state)
		}
		groups[state] = append(groups[state], r)
	}
	uptime := fmt.Sprintf(" 12:00:00 run 1.5m,  owner root,  depth 0,  size %d", len(hosts))
	if len(st.drained) > 0 {
		uptime += fmt.Sprintf(",  %d drained", len(st.drained))
	}
	if offline > 0 {
		uptime += fmt.Sprintf(",  %d offline", offline)
	}
	names := func(ranks []int) string {
		var n []string
		for _, r := range ranks {
			n = append(n, hosts[r])
		}
		return strings.Join(n, ",")
	}
	var status, drain strings.Builder
	for _, state := range order {
		ranks := groups[state]
		mark := "✔"
		if strings.HasSuffix(state, "*") {
			mark = "✗"
		}
		fmt.Fprintf(&status, "%s %s %d %s %s\n", state, mark, len(ranks), flux.FormatIDSet(ranks, false), names(ranks))
		if strings.HasPrefix(state, "drained") {
			fmt.Fprintf(&drain, "1795445812.0 %s %s %s %s\n", state, flux.FormatIDSet(ranks, false), names(ranks), flux.DrainReason)
		}
	}
	var jobs []string
	if st.pending > 0 {
		jobs = append(jobs, fmt.Sprintf(`{"t_submit": 1795445789.9, "ntasks": %d, "nnodes": %d, "state": "SCHED", "jobid": "\u01922dYwCQX"}`, st.pending, st.pending))
	}
	if len(st.running) > 0 {
		jobs = append(jobs, fmt.Sprintf(`{"t_submit": 1795445780.1, "ntasks": %d, "nnodes": %d, "state": "RUN", "ranks": %q, "nodelist": %q, "jobid": "\u01922gmjduy"}`,
			len(st.running), len(st.running), flux.FormatIDSet(st.running, true), names(st.running)))
	}
	for name, data := range map[string]string{"uptime": uptime + "\n", "status": status.String(), "drain": drain.String(),
		"jobs": `{"jobs": [` + strings.Join(jobs, ", ") + "]}\n"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".new"), []byte(data), 0o644))
		require.NoError(t, os.Rename(filepath.Join(dir, name+".new"), filepath.Join(dir, name)))
	}
}

// runningLead makes a running lead broker pod for root, whose Flux container is named container.
func runningLead(t testing.TB, f *federation, root *fluxv1alpha2.MiniCluster, container string) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: root.Name + "-0-abcde", Namespace: root.Namespace, Labels: hub.LeadBrokerSelector(f.root(t, root))},
		Spec:       corev1.PodSpec{NodeName: "node-" + root.Name, Containers: []corev1.Container{{Name: container, Image: "busybox"}}},
	}
	require.NoError(t, f.hub.Client.Create(ctx, pod))
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: container, Image: "busybox", Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
	}}}
	require.NoError(t, f.hub.Client.Status().Update(ctx, pod))
}

// testFluxsViewOfTheBurstsIsReported runs the hub's questions to a root's Flux instance against
// a stand-in flux in the lead broker's container: the root reports what the instance says, a
// burst whose pods run but whose brokers Flux does not see is NotJoining after JoinTimeout, and
// Joined once Flux sees them.
func testFluxsViewOfTheBurstsIsReported(t *testing.T, f *federation) {
	ctx := context.Background()
	ns := f.namespace(t)
	a := f.members["member-a"]
	root := newRoot(ns, "observed", fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 2, MaxSize: 3})
	require.NoError(t, f.hub.Client.Create(ctx, root))
	f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstApplied)

	// Until the lead broker's container runs, nothing can be asked; the status says why.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := f.root(c, root).Status.Flux
		require.NotNil(c, got)
		require.Equal(c, "the lead broker's container is not running", got.Message)
	}, wait, tick)

	hosts := []string{"observed-0", "observed-1", "observed-2", "observed-3", "burst-a-0", "burst-a-1", "burst-a-2"}
	dir := f.execs.standInFlux(t, ns)
	instance(t, dir, hosts, fluxState{online: map[int]bool{0: true, 1: true}, pending: 4})
	runningLead(t, f, root, "observed")

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := f.root(c, root)
		require.Equal(c, &fluxv1alpha2.FluxStatus{State: "run", Size: 7, Online: 2, PendingJobs: 1, PendingNodes: 4}, got.Status.Flux)
		s := burstStatus(got, "burst-a")
		require.NotNil(c, s)
		require.Equal(c, int32(0), s.Online)
		require.Equal(c, fluxv1alpha2.BurstApplied, s.Phase, "the pods are not ready yet")
	}, wait, tick)

	// The pods run, Flux does not see the brokers: NotJoining once JoinTimeout has passed.
	setJobReady(t, a.env.Client, ns, "burst-a", 2)
	s := f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstNotJoining)
	require.Contains(t, s.Message, "its 2 brokers run, but the root's Flux instance has seen only 0 of them online")
	require.Contains(t, s.Message, "reaches the lead broker at 127.0.0.1:")
	cond := meta.FindStatusCondition(f.root(t, root).Status.Conditions, fluxv1alpha2.ConditionBurstsReady)
	require.Equal(t, metav1.ConditionFalse, cond.Status)

	// The brokers join: Joined, and the job no longer waits.
	instance(t, dir, hosts, fluxState{online: map[int]bool{0: true, 1: true, 4: true, 5: true}})
	s = f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstJoined)
	require.Equal(t, int32(2), s.Online)
	require.Equal(t, "2 of 2 brokers ready and online in the root's Flux instance", s.Message)
	got := f.root(t, root)
	require.Equal(t, &fluxv1alpha2.FluxStatus{State: "run", Size: 7, Online: 4}, got.Status.Flux)
	require.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, fluxv1alpha2.ConditionBurstsReady))
	require.Equal(t, "1/1", got.Status.BurstSummary)

	// An answer the hub cannot read, then no answer at all: each says so in an event.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "status"), []byte("avail ✔ 9 0-8 nope\n"), 0o644))
	f.requireEvent(t, ns, fluxv1alpha2.EventFluxUnreadable, "the hub cannot read what the root's Flux instance printed, so it decides no scaling step until it can")
	f.execs.mu.Lock()
	delete(f.execs.flux, ns)
	f.execs.mu.Unlock()
	f.requireEvent(t, ns, fluxv1alpha2.EventFluxNotAnswering, "the root's Flux instance does not answer the hub any more")
	require.NoError(t, f.hub.Client.Delete(ctx, root))
}

// TestNewExecReportsWhatTheAPIServerSays runs the real exec of the pods/exec subresource against
// a real API server. envtest runs no kubelet, so the exec is refused before it reaches a node;
// the error must say so rather than hang or read as empty output.
func TestNewExecReportsWhatTheAPIServerSays(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "lead", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "flux", Image: "busybox"}}},
	}
	require.NoError(t, env.Client.Create(ctx, pod))
	run, err := hub.NewExec(env.Config)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := run(ctx, "default", "lead", "flux", []string{"flux", "uptime"})
	require.Error(t, err)
	require.Empty(t, out)
	require.Contains(t, err.Error(), "does not have a host assigned")

	_, err = run(ctx, "default", "no-such-pod", "flux", []string{"flux", "uptime"})
	require.ErrorContains(t, err, "not found")
}

// TestTheHubWatchesBurstsArriveAndLeaveWhateverItsInterval runs a hub that asks Flux once an
// hour while nothing happens: while a burst's brokers run and Flux does not see them yet, and
// while Flux sees ranks of a burst whose brokers were removed, it asks every few seconds
// instead, so that it sees them join and leave as they do.
func TestTheHubWatchesBurstsArriveAndLeaveWhateverItsInterval(t *testing.T) {
	f := startFederation(t, hub.Options{FluxInterval: time.Hour, FluxIntervalMax: time.Hour}, "member-a")
	ctx := context.Background()
	ns := f.namespace(t)
	root := newRoot(ns, "settled", fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 2, MaxSize: 2})
	hosts := []string{"settled-0", "settled-1", "settled-2", "settled-3", "burst-a-0", "burst-a-1"}
	dir := f.execs.standInFlux(t, ns)
	instance(t, dir, hosts, fluxState{online: map[int]bool{0: true, 1: true}})
	// The lead broker runs before the root is created: the hub's first ask is answered.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: root.Name + "-0-abcde", Namespace: ns, Labels: hub.LeadBrokerSelector(root)},
		Spec:       corev1.PodSpec{NodeName: "node-" + root.Name, Containers: []corev1.Container{{Name: root.Name, Image: "busybox"}}},
	}
	require.NoError(t, f.hub.Client.Create(ctx, pod))
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: root.Name, Image: "busybox", Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
	}}}
	require.NoError(t, f.hub.Client.Status().Update(ctx, pod))
	require.NoError(t, f.hub.Client.Create(ctx, root))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, &fluxv1alpha2.FluxStatus{State: "run", Size: 6, Online: 2}, f.root(c, root).Status.Flux)
	}, wait, tick)

	// The burst's pods run; Flux sees its brokers a little later.
	setJobReady(t, f.members["member-a"].env.Client, ns, "burst-a", 2)
	f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstReady)
	instance(t, dir, hosts, fluxState{online: map[int]bool{0: true, 1: true, 4: true, 5: true}})
	f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstJoined)

	// The burst is removed; Flux sees its ranks leave a little later.
	got := f.root(t, root)
	got.Spec.Flux.Bursting.Clusters[0].Size = 0
	require.NoError(t, f.hub.Client.Update(ctx, got))
	f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstReserved)
	require.Equal(t, int32(4), f.root(t, root).Status.Flux.Online, "Flux has not seen the ranks leave yet")
	instance(t, dir, hosts, fluxState{online: map[int]bool{0: true, 1: true}})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, int32(2), f.root(c, root).Status.Flux.Online)
	}, wait, tick)
}
