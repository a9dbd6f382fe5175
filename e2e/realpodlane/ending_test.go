//go:build realpods

package realpodlane

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/clusters"
	"github.com/fluxfed/fluxfed/flux"
	"github.com/fluxfed/fluxfed/hub"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// endingCase is one way a MiniCluster on real pods ends (docs/minicluster.md, "How a MiniCluster
// ends").
type endingCase struct {
	name string
	mc   *fluxv1alpha2.MiniCluster
	// act does what ends it, once every broker is online; nil lets the job end by itself.
	act func(t *testing.T, h *endingHarness, mc *fluxv1alpha2.MiniCluster)
	// deleted is true when the MiniCluster is deleted: its end is that it is gone.
	deleted bool
	// want checks the MiniCluster's last status.
	want func(t require.TestingT, mc *fluxv1alpha2.MiniCluster)
	// lead and followers are the exit code and the first line of the termination message the
	// kubelet reports for the lead's and the followers' broker containers; "" when any.
	lead, followers string
	// leadRestarts is how many times the kubelet restarted the lead's broker container.
	leadRestarts int32
}

type endingHarness struct {
	c    *clusters.Cluster
	cl   client.Client
	exec hub.Exec
}

// pod returns the running pod of completion index i of mc.
func (h *endingHarness) pod(t require.TestingT, mc *fluxv1alpha2.MiniCluster, i int) *corev1.Pod {
	var pods corev1.PodList
	require.NoError(t, h.cl.List(context.Background(), &pods, client.InNamespace(mc.Namespace),
		client.MatchingLabels{fluxv1alpha2.LabelMiniCluster: mc.Name, batchv1.JobCompletionIndexAnnotation: fmt.Sprint(i)}))
	for j := range pods.Items {
		if pods.Items[j].DeletionTimestamp == nil && pods.Items[j].Status.Phase == corev1.PodRunning {
			return &pods.Items[j]
		}
	}
	require.Fail(t, "no running pod", "index %d of %s", i, mc.Name)
	return nil
}

// inLead runs argv in the broker container of mc's lead pod, as kubectl exec does: through the
// API server and the pod's kubelet.
func (h *endingHarness) inLead(ctx context.Context, t require.TestingT, mc *fluxv1alpha2.MiniCluster, argv ...string) (string, error) {
	lead := h.pod(t, mc, 0)
	out, err := h.exec(ctx, lead.Namespace, lead.Name, lead.Spec.Containers[0].Name, argv)
	return string(out), err
}

// online waits until the instance of mc sees every one of its brokers online, asking flux uptime
// in the lead's container.
func (h *endingHarness) online(t *testing.T, mc *fluxv1alpha2.MiniCluster) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := h.inLead(ctx, c, mc, flux.Command(names.MountPath(mc), "flux", "uptime")...)
		require.NoError(c, err)
		u, err := flux.ParseUptime(out)
		require.NoError(c, err)
		require.Equal(c, "run", u.State)
		require.Zero(c, u.Offline, out)
	}, busyWait, time.Second, "%s: the brokers never all joined", mc.Name)
}

// killLead kills the lead's broker with SIGKILL, as a crash would, once every broker is online.
func (h *endingHarness) killLead(t *testing.T, mc *fluxv1alpha2.MiniCluster) {
	t.Helper()
	h.online(t, mc)
	_, err := h.inLead(context.Background(), t, mc, "pkill", "-KILL", "^flux-broker")
	require.NoError(t, err, "killing the lead's broker")
}

func condition(mc *fluxv1alpha2.MiniCluster, t string) string {
	c := meta.FindStatusCondition(mc.Status.Conditions, t)
	if c == nil {
		return t + "=?"
	}
	return fmt.Sprintf("%s=%s %s: %s", t, c.Status, c.Reason, c.Message)
}

func requireCondition(t require.TestingT, mc *fluxv1alpha2.MiniCluster, conditionType, reason, message string) {
	c := meta.FindStatusCondition(mc.Status.Conditions, conditionType)
	require.NotNil(t, c, conditionType)
	require.Equal(t, metav1.ConditionTrue, c.Status, condition(mc, conditionType))
	require.Equal(t, reason, c.Reason, condition(mc, conditionType))
	require.Contains(t, c.Message, message, condition(mc, conditionType))
}

// podEnding is how the kubelet reported a pod's broker container: the last state it reported
// while the pod existed.
type podEnding struct {
	index    string
	status   corev1.ContainerStatus
	deleting bool
	deleted  time.Time
	gone     time.Time
	grace    int64
}

// ended is the exit code and first line of the termination message of the broker container, with
// "(stopped)" when its pod was being deleted, and the kubelet's restarts of it; "" while it runs.
func (e podEnding) ended() string {
	term := e.status.State.Terminated
	if term == nil {
		return ""
	}
	return fmt.Sprintf("%d%s %q", term.ExitCode, map[bool]string{true: " (stopped)"}[e.deleting], firstLine(term.Message))
}

func firstLine(s string) string { line, _, _ := strings.Cut(s, "\n"); return line }

// podWatch records every update of the pods of a namespace as the kubelets report them, so that
// a pod's last status is known after the pod is gone.
type podWatch struct {
	mu   sync.Mutex
	pods map[string]*podEnding
}

func watchPods(t *testing.T, cs kubernetes.Interface, namespace string) *podWatch {
	t.Helper()
	w := &podWatch{pods: map[string]*podEnding{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		version := ""
		for ctx.Err() == nil {
			watcher, err := cs.CoreV1().Pods(namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: version, AllowWatchBookmarks: true})
			if err != nil {
				time.Sleep(time.Second)
				continue
			}
			for ev := range watcher.ResultChan() {
				pod, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				version = pod.ResourceVersion
				if ev.Type != watch.Bookmark {
					w.record(pod, ev.Type == watch.Deleted)
				}
			}
			watcher.Stop()
		}
	}()
	return w
}

func (w *podWatch) record(pod *corev1.Pod, gone bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.pods[pod.Name]
	if e == nil {
		e = &podEnding{index: pod.Labels[batchv1.JobCompletionIndexAnnotation]}
		w.pods[pod.Name] = e
	}
	for _, s := range pod.Status.ContainerStatuses {
		if len(pod.Spec.Containers) > 0 && s.Name == pod.Spec.Containers[0].Name {
			e.status = s
		}
	}
	if pod.DeletionTimestamp != nil && !e.deleting {
		e.deleting, e.deleted = true, time.Now()
		if pod.DeletionGracePeriodSeconds != nil {
			e.grace = *pod.DeletionGracePeriodSeconds
		}
	}
	if gone && e.gone.IsZero() {
		e.gone = time.Now()
	}
}

// endings returns the pods' endings by pod name.
func (w *podWatch) endings() map[string]podEnding {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]podEnding{}
	for name, e := range w.pods {
		out[name] = *e
	}
	return out
}

// testHowItEnds runs each way a MiniCluster ends on real pods, two at a time, and prints the exit
// table as the kubelet reported it: each broker container's exit code, termination message and
// restarts, the grace periods of deleted pods, and the MiniCluster's conditions.
func testHowItEnds(t *testing.T, c *clusters.Cluster, cl client.Client) {
	exec, err := hub.NewExec(c.Config)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(c.Config)
	require.NoError(t, err)
	h := &endingHarness{c: c, cl: cl, exec: exec}
	sleeper := func(name string, size int32) *fluxv1alpha2.MiniCluster {
		return realMiniCluster(name, "", size, "sleep 600").Obj()
	}
	cases := []endingCase{{
		name: "the job succeeds", mc: realMiniCluster("succeeds", "", 2, "hostname").Obj(),
		want: func(t require.TestingT, mc *fluxv1alpha2.MiniCluster) {
			requireCondition(t, mc, fluxv1alpha2.ConditionComplete, fluxv1alpha2.ReasonJobComplete, "the job exited with status 0 (pod succeeds-0-")
		},
		lead: `0 "the job exited with status 0"`, followers: `0 "the follower broker finished"`,
	}, {
		name: "the job fails with status 3", mc: realMiniCluster("fails", "", 2, "exit 3").Obj(),
		want: func(t require.TestingT, mc *fluxv1alpha2.MiniCluster) {
			requireCondition(t, mc, fluxv1alpha2.ConditionFailed, fluxv1alpha2.ReasonJobFailed, "the job exited with status 3 (pod fails-0-")
		},
		lead: `3 "the job exited with status 3"`,
	}, {
		// Only a kubelet restarts a container: the restarted lead finds the job's status in the
		// pod's volume and ends with 0 instead of starting a broker again.
		name: "the job fails with status 3, restartPolicy OnFailure", mc: realMiniCluster("restarts", "", 2, "exit 3").
			Spec(func(s *fluxv1alpha2.MiniClusterSpec) { s.Pod.RestartPolicy = fluxv1alpha2.RestartOnFailure }).Obj(),
		want: func(t require.TestingT, mc *fluxv1alpha2.MiniCluster) {
			requireCondition(t, mc, fluxv1alpha2.ConditionFailed, fluxv1alpha2.ReasonJobFailed, "the job exited with status 3")
		},
		lead: `0 "the job exited with status 3"`, leadRestarts: 1,
	}, {
		name: "a follower pod is deleted", mc: sleeper("follower", 3),
		act: func(t *testing.T, h *endingHarness, mc *fluxv1alpha2.MiniCluster) {
			require.NoError(t, h.cl.Delete(context.Background(), h.pod(t, mc, 2)))
		},
		want: func(t require.TestingT, mc *fluxv1alpha2.MiniCluster) {
			ready := meta.FindStatusCondition(mc.Status.Conditions, fluxv1alpha2.ConditionReady)
			require.NotNil(t, ready)
			require.Equal(t, "2 of 3 broker pods are ready", ready.Message)
			require.False(t, meta.IsStatusConditionTrue(mc.Status.Conditions, fluxv1alpha2.ConditionFailed), condition(mc, "Failed"))
		},
		followers: `0 (stopped) "the follower broker finished"`,
	}, {
		name: "the lead pod is deleted", mc: sleeper("lead", 2),
		act: func(t *testing.T, h *endingHarness, mc *fluxv1alpha2.MiniCluster) {
			require.NoError(t, h.cl.Delete(context.Background(), h.pod(t, mc, 0)))
		},
		want: func(t require.TestingT, mc *fluxv1alpha2.MiniCluster) {
			requireCondition(t, mc, fluxv1alpha2.ConditionFailed, fluxv1alpha2.ReasonJobFailed, "exit code 143")
		},
		lead: `143 (stopped) "the lead broker was stopped before its job ended (the broker exited with status 129)"`,
	}, {
		name: "the MiniCluster is deleted", mc: sleeper("deleted", 2), deleted: true,
		act: func(t *testing.T, h *endingHarness, mc *fluxv1alpha2.MiniCluster) {
			require.NoError(t, h.cl.Delete(context.Background(), mc))
		},
		lead: `143 (stopped) "the lead broker was stopped before its job ended (the broker exited with status 129)"`, followers: `0 (stopped) "the follower broker finished"`,
	}, {
		name: "the lead broker crashes and starts again", mc: realMiniCluster("crash", "", 2, "sleep 20").Obj(),
		act: func(t *testing.T, h *endingHarness, mc *fluxv1alpha2.MiniCluster) { h.killLead(t, mc) },
		want: func(t require.TestingT, mc *fluxv1alpha2.MiniCluster) {
			requireCondition(t, mc, fluxv1alpha2.ConditionComplete, fluxv1alpha2.ReasonJobComplete, "the job exited with status 0")
		},
		lead: `0 "the job exited with status 0"`,
	}, {
		name: "the lead broker crashes past its backoffLimit", mc: realMiniCluster("crashes", "", 2, "sleep 600").
			Spec(func(s *fluxv1alpha2.MiniClusterSpec) { s.BackoffLimit = 1 }).Obj(),
		act: func(t *testing.T, h *endingHarness, mc *fluxv1alpha2.MiniCluster) {
			h.killLead(t, mc)
			h.killLead(t, mc)
		},
		want: func(t require.TestingT, mc *fluxv1alpha2.MiniCluster) {
			requireCondition(t, mc, fluxv1alpha2.ConditionFailed, fluxv1alpha2.ReasonJobFailed,
				"the lead broker exited with status 137 before its work ended, 1 times started again")
		},
		lead: `137 "the lead broker exited with status 137 before its work ended, 1 times started again"`,
	}}

	table := make([]string, len(cases))
	t.Run("cases", func(t *testing.T) {
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				table[i] = runEnding(t, h, cs, fmt.Sprintf("end-%d", i), tc)
			})
		}
	})
	t.Logf("How a MiniCluster on real pods ends, as the kubelet reported it (load average %s):\n%s", loadAverage(), strings.Join(table, "\n"))
}

// runEnding runs one case in namespace ns and returns its row of the exit table.
func runEnding(t *testing.T, h *endingHarness, cs kubernetes.Interface, ns string, tc endingCase) string {
	ctx := context.Background()
	cl := h.cl
	require.NoError(t, cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	describeOnFailure(t, cl, ns)
	pods := watchPods(t, cs, ns)
	tc.mc.Namespace = ns
	start := time.Now()
	require.NoError(t, cl.Create(ctx, tc.mc))
	var joined time.Duration
	if tc.act != nil {
		h.online(t, tc.mc)
		joined = time.Since(start)
		tc.act(t, h, tc.mc)
	}
	acted := time.Now()
	got := &fluxv1alpha2.MiniCluster{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := cl.Get(ctx, client.ObjectKeyFromObject(tc.mc), got)
		if tc.deleted {
			require.True(c, apierrors.IsNotFound(err), "the MiniCluster is gone")
			var left corev1.PodList
			require.NoError(c, cl.List(ctx, &left, client.InNamespace(ns)))
			require.Empty(c, left.Items, "with its pods")
			return
		}
		require.NoError(c, err)
		tc.want(c, got)
	}, busyWait, time.Second, tc.name)
	took := time.Since(acted)
	var endings []string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		endings = nil
		all := pods.endings()
		for _, name := range slices.Sorted(maps.Keys(all)) {
			e := all[name]
			ended := e.ended()
			if ended == "" {
				continue
			}
			row := fmt.Sprintf("%s: %s, restarts %d", e.index, ended, e.status.RestartCount)
			if e.deleting {
				row += fmt.Sprintf(", gone %v after its deletion (grace period %ds)", goneAfter(e), e.grace)
			}
			endings = append(endings, row)
			switch {
			case e.index == "0" && tc.lead != "":
				require.Equal(c, tc.lead, ended, "the lead's container")
				require.Equal(c, tc.leadRestarts, e.status.RestartCount, "the kubelet's restarts of the lead's container")
			case e.index != "0" && tc.followers != "":
				require.Equal(c, tc.followers, ended, "follower %s's container", e.index)
			}
		}
		if tc.lead != "" {
			require.Contains(c, strings.Join(endings, ";"), "0: ", "the lead's container ended")
		}
	}, 2*time.Minute, time.Second, tc.name)
	status := "gone"
	if !tc.deleted {
		status = condition(got, "Complete") + " | " + condition(got, "Failed") + " | " + condition(got, "Ready")
	}
	_ = cl.Delete(ctx, tc.mc)
	return fmt.Sprintf("%s (joined in %v, ended %v after):\n    containers: %s\n    MiniCluster: %s",
		tc.name, joined.Round(100*time.Millisecond), took.Round(100*time.Millisecond), strings.Join(endings, "; "), status)
}

// goneAfter is how long a deleted pod took to go, or "not yet" while it is there.
func goneAfter(e podEnding) string {
	if e.gone.IsZero() {
		return "not yet"
	}
	return e.gone.Sub(e.deleted).Round(100 * time.Millisecond).String()
}
