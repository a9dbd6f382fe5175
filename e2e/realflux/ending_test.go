package realflux

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/flux"
)

// endingCase is one way a MiniCluster of real brokers ends.
type endingCase struct {
	name string
	mc   *fluxv1alpha2.MiniCluster
	// act does what ends it, once every broker is online; nil lets the job end by itself.
	act func(t *testing.T, h *endingHarness, mc *fluxv1alpha2.MiniCluster)
	// deleted is true when the MiniCluster is deleted: its end is that it is gone.
	deleted bool
	// want checks the MiniCluster's last status.
	want func(t require.TestingT, mc *fluxv1alpha2.MiniCluster)
	// lead and followers are the exit codes and first lines of the termination messages the
	// lead's and the followers' containers end with; followers "" when they end any way.
	lead, followers string
}

type endingHarness struct {
	r  *Runner
	cl client.Client
}

// pod returns the pod of completion index i of mc.
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

// online waits until the real instance of mc sees every one of its brokers online.
func (h *endingHarness) online(t *testing.T, mc *fluxv1alpha2.MiniCluster) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		lead := h.pod(c, mc, 0)
		out, err := h.r.Flux(context.Background(), client.ObjectKeyFromObject(lead), "uptime")
		require.NoError(c, err)
		u, err := flux.ParseUptime(out)
		require.NoError(c, err)
		require.Equal(c, "run", u.State)
		require.Zero(c, u.Offline, out)
	}, busyWait, 500*time.Millisecond, "%s: the brokers never all joined", mc.Name)
}

// killLead kills the lead's broker, as a crash would, once it runs again.
func (h *endingHarness) killLead(t *testing.T, mc *fluxv1alpha2.MiniCluster) {
	t.Helper()
	h.online(t, mc)
	n, err := h.r.KillBroker(client.ObjectKeyFromObject(h.pod(t, mc, 0)))
	require.NoError(t, err)
	require.Equal(t, 1, n)
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

// TestHowARealMiniClusterEnds runs, with real brokers behind every pod, each way a MiniCluster
// ends (docs/minicluster.md, "How a MiniCluster ends"), and prints the exit table: what each
// container ended with, and the MiniCluster's conditions.
func TestHowARealMiniClusterEnds(t *testing.T) {
	r, cl := oneCluster(t)
	describeOnFailure(t, cl, r, "")
	h := &endingHarness{r: r, cl: cl}
	ctx := context.Background()
	sleeper := func(name string, size int32) *fluxv1alpha2.MiniCluster {
		return v1alpha2test.MiniCluster(name).Size(size).Command("sleep 600").Obj()
	}
	cases := []endingCase{{
		name: "the job succeeds", mc: v1alpha2test.MiniCluster("succeeds").Size(2).Command("hostname").Obj(),
		want: func(t require.TestingT, mc *fluxv1alpha2.MiniCluster) {
			requireCondition(t, mc, fluxv1alpha2.ConditionComplete, fluxv1alpha2.ReasonJobComplete, "the job exited with status 0 (pod succeeds-0-")
		},
		lead: `0 "the job exited with status 0"`, followers: `0 "the follower broker finished"`,
	}, {
		name: "the job fails with status 3", mc: v1alpha2test.MiniCluster("fails").Size(2).Command("exit 3").Obj(),
		want: func(t require.TestingT, mc *fluxv1alpha2.MiniCluster) {
			requireCondition(t, mc, fluxv1alpha2.ConditionFailed, fluxv1alpha2.ReasonJobFailed, "the job exited with status 3 (pod fails-0-")
		},
		lead: `3 "the job exited with status 3"`, followers: `0 "the follower broker finished"`,
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
		name: "the lead broker crashes and starts again", mc: v1alpha2test.MiniCluster("crash").Size(2).Command("sleep 20").Obj(),
		act: func(t *testing.T, h *endingHarness, mc *fluxv1alpha2.MiniCluster) { h.killLead(t, mc) },
		want: func(t require.TestingT, mc *fluxv1alpha2.MiniCluster) {
			requireCondition(t, mc, fluxv1alpha2.ConditionComplete, fluxv1alpha2.ReasonJobComplete, "the job exited with status 0")
		},
		lead: `0 "the job exited with status 0"`,
	}, {
		name: "the lead broker crashes past its backoffLimit", mc: v1alpha2test.MiniCluster("crashes").Size(2).Command("sleep 600").
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

	var table []string
	for i, tc := range cases {
		ns := fmt.Sprintf("end-%d", i)
		require.NoError(t, cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
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
				var pods corev1.PodList
				require.NoError(c, cl.List(ctx, &pods, client.InNamespace(ns)))
				require.Empty(c, pods.Items, "with its pods")
				return
			}
			require.NoError(c, err)
			tc.want(c, got)
		}, busyWait, time.Second, tc.name)
		took := time.Since(acted)
		var endings []string
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			endings = nil
			for _, e := range r.Endings() {
				if e.Pod.Namespace != ns {
					continue
				}
				index := strings.SplitN(strings.TrimPrefix(e.Pod.Name, tc.mc.Name+"-"), "-", 2)[0]
				ended := fmt.Sprintf("%d%s %q", e.Code, map[bool]string{true: " (stopped)"}[e.Stopped], firstLine(e.Message))
				endings = append(endings, index+": "+ended)
				switch {
				case index == "0" && tc.lead != "":
					require.Equal(c, tc.lead, ended, "the lead's container")
				case index != "0" && tc.followers != "":
					require.Equal(c, tc.followers, ended, "follower %s's container", index)
				}
			}
			if tc.lead != "" {
				require.Contains(c, strings.Join(endings, ";"), "0: ", "the lead's container ended")
			}
		}, time.Minute, time.Second, tc.name)
		status := "gone"
		if !tc.deleted {
			status = condition(got, "Complete") + " | " + condition(got, "Failed") + " | " + condition(got, "Ready")
		}
		table = append(table, fmt.Sprintf("%s (joined in %v, ended %v after):\n    containers: %s\n    MiniCluster: %s",
			tc.name, joined.Round(100*time.Millisecond), took.Round(100*time.Millisecond), strings.Join(endings, "; "), status))
		_ = cl.Delete(ctx, tc.mc)
	}
	t.Logf("how a MiniCluster of real brokers ends:\n%s", strings.Join(table, "\n"))
}
