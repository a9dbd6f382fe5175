package e2e

// The federation when the world changes, on the local clusters with fluxfed installed: a member
// that stops answering and comes back, a cluster registered twice, a member that hangs, and
// objects that someone else changes.

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/clusters"
	"github.com/fluxfed/fluxfed/e2e/k8sbin"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

// kubectl runs kubectl against the hub and returns its output.
func kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return kubectlOn(t, "hub", args...)
}

// kubectlOn runs kubectl against the named cluster and returns its output.
func kubectlOn(t *testing.T, cluster string, args ...string) (string, error) {
	t.Helper()
	dir, err := k8sbin.Dir("kubectl")
	require.NoError(t, err)
	cmd := exec.Command(filepath.Join(dir, "kubectl"), append([]string{"--kubeconfig", shared.Env.Cluster(cluster).Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// process returns the process of a component of a cluster.
func process(t *testing.T, cluster, component string) *clusters.Process {
	t.Helper()
	for _, p := range shared.Env.Cluster(cluster).Processes {
		if p.Component == component {
			return p
		}
	}
	require.Failf(t, "no such process", "no %s on %s", component, cluster)
	return nil
}

// memberReady returns the Ready condition of a MemberCluster on the hub.
func memberReady(t require.TestingT, name string) *metav1.Condition {
	mc := &fedv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
	require.True(t, get(t, "hub", mc), "MemberCluster %s", name)
	return meta.FindStatusCondition(mc.Status.Conditions, fedv1alpha1.ConditionReady)
}

// burstRoot applies bursting-root.yaml and waits for both bursts to be Ready.
func burstRoot(t *testing.T) (*fluxv1alpha2.MiniCluster, string) {
	t.Helper()
	root, ns := applyExample(t, "bursting-root.yaml", nil)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, get(c, "hub", root))
		require.Equal(c, "2/2", root.Status.BurstSummary)
	}, wait, tick)
	return root, ns
}

// burstAPods returns the UIDs of the pods of burst-a on member-a.
func burstAPods(t require.TestingT, ns string) []types.UID {
	return podUIDs(t, "member-a", ns, "burst-a")
}

// podUIDs returns the UIDs of the pods of a MiniCluster, in any phase, sorted.
func podUIDs(t require.TestingT, cluster, ns, name string) []types.UID {
	var pods corev1.PodList
	require.NoError(t, shared.Clients[cluster].List(context.Background(), &pods, client.InNamespace(ns),
		client.MatchingLabels{fluxv1alpha2.LabelMiniCluster: name}))
	var out []types.UID
	for _, p := range pods.Items {
		out = append(out, p.UID)
	}
	slices.Sort(out)
	return out
}

func TestMemberClustersAreObjectsWithHealthAndIdentity(t *testing.T) {
	out, err := kubectl(t, "wait", "--for=condition=Ready", "--timeout=60s", "membercluster/member-a", "membercluster/member-b")
	require.NoError(t, err, out)
	out, err = kubectl(t, "get", "memberclusters")
	require.NoError(t, err, out)
	t.Logf("kubectl get memberclusters:\n%s", out)
	require.Regexp(t, `NAME\s+READY\s+VERSION\s+NODES\s+CHILDREN\s+REASON\s+AGE`, out)
	require.Regexp(t, `member-a\s+True\s+v1\.36\.3\s+2\s+\d+\s+Connected\s`, out)

	system := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}}
	require.True(t, get(t, "member-a", system))
	mc := &fedv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "member-a"}}
	require.True(t, get(t, "hub", mc))
	require.Equal(t, string(system.UID), mc.Status.ClusterID)
}

// TestAMemberThatStopsAnsweringIsReportedAndResyncedWhenItReturns stops member-b's API server
// (SIGSTOP: it accepts connections and answers nothing), then lets it go on.
func TestAMemberThatStopsAnsweringIsReportedAndResyncedWhenItReturns(t *testing.T) {
	root, ns := burstRoot(t)
	apiserver := process(t, "member-b", "kube-apiserver")
	childUID := func() types.UID {
		child := &fluxv1alpha2.MiniCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "burst-b"}}
		require.True(t, get(t, "member-b", child))
		return child.UID
	}
	before := childUID()

	require.NoError(t, syscall.Kill(-apiserver.PID, syscall.SIGSTOP))
	stopped := time.Now()
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			require.NoError(t, syscall.Kill(-apiserver.PID, syscall.SIGCONT))
		}
	}
	t.Cleanup(resume)

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ready := memberReady(c, "member-b")
		require.Equal(c, metav1.ConditionFalse, ready.Status)
		require.Equal(c, fedv1alpha1.ReasonUnreachable, ready.Reason)
	}, wait, tick)
	detected := time.Since(stopped)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, get(c, "hub", root))
		s := burstOf(root, "burst-b")
		require.Equal(c, fluxv1alpha2.BurstUnreachable, s.Phase)
		cond := meta.FindStatusCondition(root.Status.Conditions, fluxv1alpha2.ConditionBurstsReady)
		require.Equal(c, fluxv1alpha2.ReasonMemberUnreachable, cond.Reason)
		require.Contains(c, cond.Message, "member member-b is unreachable")
		require.Equal(c, fluxv1alpha2.BurstReady, burstOf(root, "burst-a").Phase, "the other member is not affected")
	}, wait, tick)
	reported := time.Since(stopped)

	resume()
	back := time.Now()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, metav1.ConditionTrue, memberReady(c, "member-b").Status)
	}, wait, tick)
	recovered := time.Since(back)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, get(c, "hub", root))
		require.Equal(c, fluxv1alpha2.BurstReady, burstOf(root, "burst-b").Phase)
	}, wait, tick)
	require.Equal(t, before, childUID(), "nothing was deleted because the member was unreachable")
	t.Logf("member-b stopped: Ready=False after %v, its burst Unreachable after %v; resumed: Ready=True after %v",
		detected.Round(100*time.Millisecond), reported.Round(100*time.Millisecond), recovered.Round(100*time.Millisecond))
}

func TestASecondRegistrationOfAClusterIsNeverUsed(t *testing.T) {
	ctx := context.Background()
	root, ns := burstRoot(t)
	pods := burstAPods(t, ns)
	require.NotEmpty(t, pods)

	require.NoError(t, shared.RegisterAs(ctx, "member-a-again", shared.Env.Cluster("member-a")))
	t.Cleanup(func() {
		_ = shared.Clients["hub"].Delete(ctx, &fedv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "member-a-again"}})
	})
	out, err := kubectl(t, "wait", "--for=condition=Ready=false", "--timeout=60s", "membercluster/member-a-again")
	require.NoError(t, err, out)
	ready := memberReady(t, "member-a-again")
	require.Equal(t, fedv1alpha1.ReasonDuplicateCluster, ready.Reason)
	require.Contains(t, ready.Message, "MemberCluster member-a registers already")

	// A root that names the duplicate gets nothing there; the first registration works on.
	other, otherNS := applyExample(t, "hello-world.yaml", func(mc *fluxv1alpha2.MiniCluster) {
		mc.Spec.Flux.Bursting.Clusters = []fluxv1alpha2.Burst{{Name: "again", Size: 1, Cluster: "member-a-again"}}
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, get(c, "hub", other))
		s := burstOf(other, "again")
		require.NotNil(c, s)
		require.Equal(c, fluxv1alpha2.BurstFailed, s.Phase)
		require.Contains(c, s.Message, fluxv1alpha2.ReasonDuplicateCluster)
	}, wait, tick)
	require.False(t, get(t, "member-a", &fluxv1alpha2.MiniCluster{ObjectMeta: metav1.ObjectMeta{Namespace: otherNS, Name: "again"}}))
	time.Sleep(5 * time.Second)
	require.Equal(t, pods, burstAPods(t, ns), "the first registration's brokers were never recreated")
	require.True(t, get(t, "hub", root))
	require.Equal(t, fluxv1alpha2.BurstReady, burstOf(root, "burst-a").Phase)
	require.Equal(t, metav1.ConditionTrue, memberReady(t, "member-a").Status)
}

func TestAHangingMemberDelaysNoRootThatDoesNotUseIt(t *testing.T) {
	ctx := context.Background()
	// A member whose API server accepts connections and never answers.
	silent := testenv.SilentServer(t)
	kc, err := clientcmd.LoadFromFile(shared.Env.Cluster("member-a").Kubeconfig)
	require.NoError(t, err)
	for _, c := range kc.Clusters {
		c.Server = "https://" + silent
	}
	data, err := clientcmd.Write(*kc)
	require.NoError(t, err)
	require.NoError(t, shared.RegisterKubeconfig(ctx, "member-hang", data))
	t.Cleanup(func() {
		_ = shared.Clients["hub"].Delete(ctx, &fedv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "member-hang"}})
	})

	start := time.Now()
	root, ns := burstRoot(t)
	ready := time.Since(start)
	require.NoError(t, shared.Clients["hub"].Delete(ctx, root))
	deleting := time.Now()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.False(c, get(c, "hub", root), "the cleanup timeout (2m) is never waited for a member the root does not use")
		require.Empty(c, leftovers(c, "member-a", ns))
	}, wait, tick)
	gone := time.Since(deleting)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		c2 := memberReady(c, "member-hang")
		require.Equal(c, metav1.ConditionFalse, c2.Status)
		require.Equal(c, fedv1alpha1.ReasonUnreachable, c2.Reason)
	}, wait, tick)
	t.Logf("with member-hang hanging: a root on member-a and member-b was ready after %v and deleted after %v",
		ready.Round(100*time.Millisecond), gone.Round(100*time.Millisecond))
}

func TestWhatSomeoneElseChangesIsPutBack(t *testing.T) {
	ctx := context.Background()
	_, ns := burstRoot(t)
	a := shared.Clients["member-a"]

	// A key of the child's broker config edited by hand, on the member.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "burst-a-flux-config"}}
	require.True(t, get(t, "member-a", cm))
	want := cm.Data["broker.toml"]
	cm.Data["broker.toml"] = "# edited by hand\n"
	require.NoError(t, a.Update(ctx, cm))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, get(c, "member-a", cm))
		require.Equal(c, want, cm.Data["broker.toml"])
	}, wait, tick, "the edited ConfigMap is put back")

	// The child scaled by hand: the member's API server refuses, its layout is fixed; its Job
	// scaled by hand instead: put back.
	out, err := kubectlOn(t, "member-a", "scale", "-n", ns, "minicluster/burst-a", "--replicas=1")
	require.Error(t, err)
	require.Contains(t, out, "the number of ranks of the Flux instance")
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "burst-a"}}
	require.True(t, get(t, "member-a", job))
	scaled := job.DeepCopy()
	scaled.Spec.Parallelism = ptr.To[int32](1)
	require.NoError(t, a.Patch(ctx, scaled, client.MergeFrom(job)))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, get(c, "member-a", job))
		require.Equal(c, int32(3), *job.Spec.Parallelism)
	}, wait, tick, "the scaled Job is put back")

	// The child's headless Service deleted.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "burst-a"}}
	require.True(t, get(t, "member-a", svc))
	uid := svc.UID
	require.NoError(t, a.Delete(ctx, svc))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "burst-a"}}
		require.True(c, get(c, "member-a", got))
		require.NotEqual(c, uid, got.UID)
	}, wait, tick, "the deleted Service is created again")

	// The child deleted on its member: the hub pushes it again, and its brokers run again.
	child := &fluxv1alpha2.MiniCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "burst-a"}}
	require.True(t, get(t, "member-a", child))
	require.NoError(t, a.Delete(ctx, child))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &fluxv1alpha2.MiniCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "burst-a"}}
		require.True(c, get(c, "member-a", got))
		require.NotEqual(c, child.UID, got.UID)
		require.True(c, meta.IsStatusConditionTrue(got.Status.Conditions, fluxv1alpha2.ConditionReady))
	}, wait, tick, "the deleted child is pushed again and its brokers run")
	require.False(t, apierrors.IsNotFound(a.Get(ctx, client.ObjectKey{Namespace: ns, Name: "burst-a-curve"}, &corev1.Secret{})))
}
