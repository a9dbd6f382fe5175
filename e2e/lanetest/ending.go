package lanetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/flux"
)

// EndingCase is one way a MiniCluster of real brokers ends (docs/minicluster.md, "How a
// MiniCluster ends"): a row of the exit table.
type EndingCase struct {
	Name string
	MC   *fluxv1alpha2.MiniCluster
	// Act does what ends it, once every broker is online; nil lets the job end by itself.
	Act func(t *testing.T, l *EndingLane, mc *fluxv1alpha2.MiniCluster)
	// Deleted is true when the MiniCluster is deleted: its end is that it is gone.
	Deleted bool
	// Want checks the MiniCluster's last status.
	Want func(t require.TestingT, mc *fluxv1alpha2.MiniCluster)
	// Lead and Followers are the exit code and the first line of the termination message the
	// lead's and the followers' broker containers end with (Ended); "" when they end any way.
	Lead, Followers string
	// LeadRestarts is how many times the lead's broker container was restarted, checked where the
	// lane counts restarts.
	LeadRestarts int32
}

// ContainerEnding is how a broker container ended, as a lane learned it.
type ContainerEnding struct {
	// Index is the completion index of its pod.
	Index string
	// Ended is its exit code and the first line of its termination message (Ended).
	Ended string
	// Restarts is how many times it was restarted; nil where the lane does not count restarts.
	Restarts *int32
	// Detail is what else the lane prints of it in the exit table, after its restarts.
	Detail string
}

// Ended is how the exit table prints a container's end: its exit code, "(stopped)" when its pod
// was deleted while it ran, and the first line of its termination message, quoted.
func Ended(code int, stopped bool, message string) string {
	return fmt.Sprintf("%d%s %q", code, map[bool]string{true: " (stopped)"}[stopped], FirstLine(message))
}

// FirstLine is the first line of s.
func FirstLine(s string) string { line, _, _ := strings.Cut(s, "\n"); return line }

// EndingLane is what a lane gives the exit table: a cluster running the member reconciler, how
// it reaches a MiniCluster's brokers, and how it learns how their containers ended.
type EndingLane struct {
	Client client.Client
	// Wait is how long a case waits for what its brokers do, asking every Tick; EndingsWait how
	// long it waits, once the MiniCluster ended, for every container's end to be known.
	Wait, Tick, EndingsWait time.Duration
	// Uptime runs flux uptime in the broker of mc's lead pod.
	Uptime func(ctx context.Context, mc *fluxv1alpha2.MiniCluster, lead *corev1.Pod) (string, error)
	// KillBroker kills the lead pod's broker, as a crash would.
	KillBroker func(t *testing.T, lead *corev1.Pod)
	// Watch starts learning how the containers of the namespace end, before its case starts, and
	// returns what it learned so far of the containers of a MiniCluster, in the table's order.
	Watch func(t *testing.T, namespace string) func(mc *fluxv1alpha2.MiniCluster) []ContainerEnding
}

// Pod returns the running pod of completion index i of mc.
func (l *EndingLane) Pod(t require.TestingT, mc *fluxv1alpha2.MiniCluster, i int) *corev1.Pod {
	return RunningPod(t, l.Client, mc, i)
}

// Online waits until the instance of mc sees every one of its brokers online, asking flux uptime
// in the lead's broker.
func (l *EndingLane) Online(t *testing.T, mc *fluxv1alpha2.MiniCluster) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := l.Uptime(ctx, mc, l.Pod(c, mc, 0))
		require.NoError(c, err)
		u, err := flux.ParseUptime(out)
		require.NoError(c, err)
		require.Equal(c, "run", u.State)
		require.Zero(c, u.Offline, out)
	}, l.Wait, l.Tick, "%s: the brokers never all joined", mc.Name)
}

// KillLead kills the lead's broker, as a crash would, once every broker is online.
func (l *EndingLane) KillLead(t *testing.T, mc *fluxv1alpha2.MiniCluster) {
	t.Helper()
	l.Online(t, mc)
	l.KillBroker(t, l.Pod(t, mc, 0))
}

// EndingCases returns the ways a MiniCluster ends that every lane runs, each MiniCluster made by
// newMC (a lane's images and settings) without a namespace: Run gives it one.
func EndingCases(newMC func(name string, size int32, command string) *v1alpha2test.Builder) []EndingCase {
	sleeper := func(name string, size int32) *fluxv1alpha2.MiniCluster {
		return newMC(name, size, "sleep 600").Obj()
	}
	const (
		leadStopped     = `143 (stopped) "the lead broker was stopped before its job ended (the broker exited with status 129)"`
		followerEnded   = `0 "the follower broker finished"`
		followerStopped = `0 (stopped) "the follower broker finished"`
	)
	return []EndingCase{{
		Name: "the job succeeds", MC: newMC("succeeds", 2, "hostname").Obj(),
		Want: func(t require.TestingT, mc *fluxv1alpha2.MiniCluster) {
			RequireCondition(t, mc, fluxv1alpha2.ConditionComplete, fluxv1alpha2.ReasonJobComplete, "the job exited with status 0 (pod succeeds-0-")
		},
		Lead: `0 "the job exited with status 0"`, Followers: followerEnded,
	}, {
		Name: "the job fails with status 3", MC: newMC("fails", 2, "exit 3").Obj(),
		Want: func(t require.TestingT, mc *fluxv1alpha2.MiniCluster) {
			RequireCondition(t, mc, fluxv1alpha2.ConditionFailed, fluxv1alpha2.ReasonJobFailed, "the job exited with status 3 (pod fails-0-")
		},
		Lead: `3 "the job exited with status 3"`, Followers: followerEnded,
	}, {
		Name: "a follower pod is deleted", MC: sleeper("follower", 3),
		Act: func(t *testing.T, l *EndingLane, mc *fluxv1alpha2.MiniCluster) {
			require.NoError(t, l.Client.Delete(context.Background(), l.Pod(t, mc, 2)))
		},
		Want: func(t require.TestingT, mc *fluxv1alpha2.MiniCluster) {
			ready := meta.FindStatusCondition(mc.Status.Conditions, fluxv1alpha2.ConditionReady)
			require.NotNil(t, ready)
			require.Equal(t, "2 of 3 broker pods are ready", ready.Message)
			require.False(t, meta.IsStatusConditionTrue(mc.Status.Conditions, fluxv1alpha2.ConditionFailed), Condition(mc, "Failed"))
		},
		Followers: followerStopped,
	}, {
		Name: "the lead pod is deleted", MC: sleeper("lead", 2),
		Act: func(t *testing.T, l *EndingLane, mc *fluxv1alpha2.MiniCluster) {
			require.NoError(t, l.Client.Delete(context.Background(), l.Pod(t, mc, 0)))
		},
		Want: func(t require.TestingT, mc *fluxv1alpha2.MiniCluster) {
			RequireCondition(t, mc, fluxv1alpha2.ConditionFailed, fluxv1alpha2.ReasonJobFailed, "exit code 143")
		},
		Lead: leadStopped,
	}, {
		Name: "the MiniCluster is deleted", MC: sleeper("deleted", 2), Deleted: true,
		Act: func(t *testing.T, l *EndingLane, mc *fluxv1alpha2.MiniCluster) {
			require.NoError(t, l.Client.Delete(context.Background(), mc))
		},
		Lead: leadStopped, Followers: followerStopped,
	}, {
		Name: "the lead broker crashes and starts again", MC: newMC("crash", 2, "sleep 20").Obj(),
		Act: func(t *testing.T, l *EndingLane, mc *fluxv1alpha2.MiniCluster) { l.KillLead(t, mc) },
		Want: func(t require.TestingT, mc *fluxv1alpha2.MiniCluster) {
			RequireCondition(t, mc, fluxv1alpha2.ConditionComplete, fluxv1alpha2.ReasonJobComplete, "the job exited with status 0")
		},
		Lead: `0 "the job exited with status 0"`,
	}, {
		Name: "the lead broker crashes past its backoffLimit", MC: newMC("crashes", 2, "sleep 600").
			Spec(func(s *fluxv1alpha2.MiniClusterSpec) { s.BackoffLimit = 1 }).Obj(),
		Act: func(t *testing.T, l *EndingLane, mc *fluxv1alpha2.MiniCluster) {
			l.KillLead(t, mc)
			l.KillLead(t, mc)
		},
		Want: func(t require.TestingT, mc *fluxv1alpha2.MiniCluster) {
			RequireCondition(t, mc, fluxv1alpha2.ConditionFailed, fluxv1alpha2.ReasonJobFailed,
				"the lead broker exited with status 137 before its work ended, 1 times started again")
		},
		Lead: `137 "the lead broker exited with status 137 before its work ended, 1 times started again"`,
	}}
}

// Run runs tc in the namespace ns, which it creates, and returns its row of the exit table: how
// long the brokers took to join and the MiniCluster to end, how each container ended, and the
// MiniCluster's conditions.
func (l *EndingLane) Run(t *testing.T, ns string, tc EndingCase) string {
	ctx := context.Background()
	cl := l.Client
	require.NoError(t, cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	containers := l.Watch(t, ns)
	tc.MC.Namespace = ns
	start := time.Now()
	require.NoError(t, cl.Create(ctx, tc.MC))
	var joined time.Duration
	if tc.Act != nil {
		l.Online(t, tc.MC)
		joined = time.Since(start)
		tc.Act(t, l, tc.MC)
	}
	acted := time.Now()
	got := &fluxv1alpha2.MiniCluster{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := cl.Get(ctx, client.ObjectKeyFromObject(tc.MC), got)
		if tc.Deleted {
			require.True(c, apierrors.IsNotFound(err), "the MiniCluster is gone")
			var left corev1.PodList
			require.NoError(c, cl.List(ctx, &left, client.InNamespace(ns)))
			require.Empty(c, left.Items, "with its pods")
			return
		}
		require.NoError(c, err)
		tc.Want(c, got)
	}, l.Wait, time.Second, tc.Name)
	took := time.Since(acted)
	var endings []string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		endings = nil
		for _, e := range containers(tc.MC) {
			row := e.Index + ": " + e.Ended
			if e.Restarts != nil {
				row += fmt.Sprintf(", restarts %d", *e.Restarts)
			}
			endings = append(endings, row+e.Detail)
			switch {
			case e.Index == "0" && tc.Lead != "":
				require.Equal(c, tc.Lead, e.Ended, "the lead's container")
				if e.Restarts != nil {
					require.Equal(c, tc.LeadRestarts, *e.Restarts, "the restarts of the lead's container")
				}
			case e.Index != "0" && tc.Followers != "":
				require.Equal(c, tc.Followers, e.Ended, "follower %s's container", e.Index)
			}
		}
		if tc.Lead != "" {
			require.Contains(c, strings.Join(endings, ";"), "0: ", "the lead's container ended")
		}
	}, l.EndingsWait, time.Second, tc.Name)
	status := "gone"
	if !tc.Deleted {
		status = Condition(got, "Complete") + " | " + Condition(got, "Failed") + " | " + Condition(got, "Ready")
	}
	_ = cl.Delete(ctx, tc.MC)
	return fmt.Sprintf("%s (joined in %v, ended %v after):\n    containers: %s\n    MiniCluster: %s",
		tc.Name, joined.Round(100*time.Millisecond), took.Round(100*time.Millisecond), strings.Join(endings, "; "), status)
}
