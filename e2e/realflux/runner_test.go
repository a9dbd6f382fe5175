package realflux

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/e2e/clusters"
	"github.com/fluxfed/fluxfed/e2e/lanetest"
)

// oneCluster starts a local cluster with fluxfed's CRD, the MiniCluster reconciler and a Runner.
func oneCluster(t *testing.T) (*Runner, client.Client) {
	t.Helper()
	env := clusters.StartT(t, clusters.Options{Names: []string{"real"}, NodesPerCluster: 2, BeforeControllers: lanetest.InstallCRD})
	c := env.Cluster("real")
	cl := lanetest.RunMember(t, c)
	r, err := Start(context.Background(), c, Options{Dir: shortDir(t), Logf: t.Logf})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close()) })
	return r, cl
}

// busyWait is how long a test waits for real brokers to do what takes them seconds on an idle
// machine: on a busy 2-core machine, with other packages' clusters running beside them, it has
// taken minutes (a 2-broker job, 13 s idle, took 56 s at load 23).
const busyWait = 6 * time.Minute

// shortDir is a temporary directory with a short path: brokers' sockets are in it. It is removed
// when the test ends, or kept for diagnosis when the test failed: the pods' logs are in it.
func shortDir(t *testing.T) string {
	t.Helper()
	return lanetest.ShortDir(t, "ffr", "pods", "the pods' directories and logs")
}

// describeOnFailure logs, when the test failed, the state of the namespace's MiniClusters, Jobs
// and pods (of every namespace when namespace is "") and how the runner saw its pods end: what
// the failure's last error does not say.
func describeOnFailure(t *testing.T, cl client.Client, r *Runner, namespace string) {
	t.Helper()
	lanetest.DescribeOnFailure(t, cl, namespace, func(p *corev1.Pod) {
		t.Logf("pod %s on %q: %s, annotations %v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Annotations)
	}, func() {
		for _, e := range r.Endings() {
			t.Logf("the runner ended %s with %d after %v (stopped: %v): %s", e.Pod, e.Code, e.Took, e.Stopped, e.Message)
		}
	})
}

// TestARealMiniClusterRunsItsJob applies a MiniCluster of two brokers whose job is hostname: the
// real brokers join, the job runs on the lead, and the MiniCluster completes with the job's status
// in its message, as the lead's container reports it.
func TestARealMiniClusterRunsItsJob(t *testing.T) {
	r, cl := oneCluster(t)
	ctx := context.Background()
	require.NoError(t, cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "research"}}))
	describeOnFailure(t, cl, r, "research")
	mc := v1alpha2test.MiniCluster("hello").Namespace("research").Size(2).Command("hostname").Obj()
	require.NoError(t, cl.Create(ctx, mc))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &fluxv1alpha2.MiniCluster{}
		require.NoError(c, cl.Get(ctx, client.ObjectKeyFromObject(mc), got))
		complete := meta.FindStatusCondition(got.Status.Conditions, fluxv1alpha2.ConditionComplete)
		require.NotNil(c, complete)
		require.Equal(c, metav1.ConditionTrue, complete.Status, "%s: %s", complete.Reason, complete.Message)
		require.True(c, strings.HasPrefix(complete.Message, "the job exited with status 0"), complete.Message)
	}, busyWait, time.Second)
}
