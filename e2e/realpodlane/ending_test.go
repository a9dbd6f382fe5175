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

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/e2e/clusters"
	"github.com/fluxfed/fluxfed/e2e/lanetest"
	"github.com/fluxfed/fluxfed/flux"
	"github.com/fluxfed/fluxfed/hub"
	"github.com/fluxfed/fluxfed/member/render/names"
)

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
	return lanetest.Ended(int(term.ExitCode), e.deleting, term.Message)
}

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
	inBroker := func(ctx context.Context, pod *corev1.Pod, argv ...string) (string, error) {
		out, err := exec(ctx, pod.Namespace, pod.Name, pod.Spec.Containers[0].Name, argv)
		return string(out), err
	}
	lane := &lanetest.EndingLane{Client: cl, Wait: busyWait, Tick: time.Second, EndingsWait: 2 * time.Minute,
		// flux uptime in the lead's broker container, as kubectl exec runs it: through the API
		// server and the pod's kubelet.
		Uptime: func(ctx context.Context, mc *fluxv1alpha2.MiniCluster, lead *corev1.Pod) (string, error) {
			return inBroker(ctx, lead, flux.Command(names.MountPath(mc), "flux", "uptime")...)
		},
		KillBroker: func(t *testing.T, lead *corev1.Pod) {
			_, err := inBroker(context.Background(), lead, "pkill", "-KILL", "^flux-broker")
			require.NoError(t, err, "killing the lead's broker")
		},
		Watch: func(t *testing.T, ns string) func(*fluxv1alpha2.MiniCluster) []lanetest.ContainerEnding {
			describeOnFailure(t, cl, ns)
			pods := watchPods(t, cs, ns)
			return func(*fluxv1alpha2.MiniCluster) []lanetest.ContainerEnding { return pods.containerEndings() }
		},
	}
	cases := lanetest.EndingCases(func(name string, size int32, command string) *v1alpha2test.Builder {
		return realMiniCluster(name, "", size, command)
	})
	// On real pods the Job controller deletes the pods of a failed Job, so a follower may be
	// stopped before it finishes: the lane does not pin how the followers of a failed job end.
	cases[1].Followers = ""
	// Only a kubelet restarts a container: the restarted lead finds the job's status in the pod's
	// volume and ends with 0 instead of starting a broker again.
	cases = slices.Insert(cases, 2, lanetest.EndingCase{
		Name: "the job fails with status 3, restartPolicy OnFailure", MC: realMiniCluster("restarts", "", 2, "exit 3").
			Spec(func(s *fluxv1alpha2.MiniClusterSpec) { s.Pod.RestartPolicy = fluxv1alpha2.RestartOnFailure }).Obj(),
		Want: func(t require.TestingT, mc *fluxv1alpha2.MiniCluster) {
			lanetest.RequireCondition(t, mc, fluxv1alpha2.ConditionFailed, fluxv1alpha2.ReasonJobFailed, "the job exited with status 3")
		},
		Lead: `0 "the job exited with status 3"`, LeadRestarts: 1,
	})

	table := make([]string, len(cases))
	t.Run("cases", func(t *testing.T) {
		for i, tc := range cases {
			t.Run(tc.Name, func(t *testing.T) {
				t.Parallel()
				table[i] = lane.Run(t, fmt.Sprintf("end-%d", i), tc)
			})
		}
	})
	t.Logf("How a MiniCluster on real pods ends, as the kubelet reported it (load average %s):\n%s", loadAverage(), strings.Join(table, "\n"))
}

// containerEndings is how the kubelet reported the broker containers that ended, by pod name:
// with their restarts and, for a deleted pod, how long it took to go.
func (w *podWatch) containerEndings() []lanetest.ContainerEnding {
	all := w.endings()
	var out []lanetest.ContainerEnding
	for _, name := range slices.Sorted(maps.Keys(all)) {
		e := all[name]
		ended := e.ended()
		if ended == "" {
			continue
		}
		detail := ""
		if e.deleting {
			detail = fmt.Sprintf(", gone %v after its deletion (grace period %ds)", goneAfter(e), e.grace)
		}
		out = append(out, lanetest.ContainerEnding{Index: e.index, Ended: ended, Restarts: &e.status.RestartCount, Detail: detail})
	}
	return out
}

// goneAfter is how long a deleted pod took to go, or "not yet" while it is there.
func goneAfter(e podEnding) string {
	if e.gone.IsZero() {
		return "not yet"
	}
	return e.gone.Sub(e.deleted).Round(100 * time.Millisecond).String()
}
