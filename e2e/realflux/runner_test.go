package realflux

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/e2e/clusters"
	"github.com/fluxfed/fluxfed/internal/testenv"
	"github.com/fluxfed/fluxfed/member"
)

// oneCluster starts a local cluster with fluxfed's CRD, the MiniCluster reconciler and a Runner.
func oneCluster(t *testing.T) (*Runner, client.Client) {
	t.Helper()
	env := clusters.StartT(t, clusters.Options{Names: []string{"real"}, NodesPerCluster: 2,
		BeforeControllers: func(ctx context.Context, _ *clusters.Cluster, cfg *rest.Config) error {
			c, err := client.New(cfg, client.Options{})
			if err != nil {
				return err
			}
			objs, err := testenv.Kustomize("crd")
			if err != nil {
				return err
			}
			for _, o := range objs {
				if err := c.Create(ctx, o); err != nil {
					return err
				}
			}
			return nil
		}})
	c := env.Cluster("real")
	scheme, err := testenv.Scheme()
	require.NoError(t, err)
	mgr, err := ctrl.NewManager(c.Config, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache: cache.Options{ByObject: member.CacheByObject()}, Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	require.NoError(t, err)
	require.NoError(t, member.Setup(mgr, member.Options{}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	r, err := Start(context.Background(), c, Options{Dir: shortDir(t), Logf: t.Logf})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close()) })
	cl, err := client.New(c.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)
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
	dir, err := os.MkdirTemp("", "ffr")
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			if kept, err := clusters.KeepForDiagnosis(t); err == nil && os.Rename(dir, filepath.Join(kept, "pods")) == nil {
				t.Logf("the pods' directories and logs are kept in %s", filepath.Join(kept, "pods"))
				return
			}
		}
		_ = os.RemoveAll(dir)
	})
	return dir
}

// describeOnFailure logs, when the test failed, the state of the namespace's MiniClusters, Jobs
// and pods (of every namespace when namespace is "") and how the runner saw its pods end: what
// the failure's last error does not say.
func describeOnFailure(t *testing.T, cl client.Client, r *Runner, namespace string) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx := context.Background()
		var mcs fluxv1alpha2.MiniClusterList
		if err := cl.List(ctx, &mcs, client.InNamespace(namespace)); err == nil {
			for _, mc := range mcs.Items {
				for _, c := range mc.Status.Conditions {
					t.Logf("MiniCluster %s: %s=%s %s: %s", mc.Name, c.Type, c.Status, c.Reason, c.Message)
				}
			}
		}
		var jobs batchv1.JobList
		if err := cl.List(ctx, &jobs, client.InNamespace(namespace)); err == nil {
			for _, j := range jobs.Items {
				t.Logf("Job %s: active %d, succeeded %d, failed %d, conditions %v", j.Name, j.Status.Active, j.Status.Succeeded, j.Status.Failed, j.Status.Conditions)
			}
		}
		var pods corev1.PodList
		if err := cl.List(ctx, &pods, client.InNamespace(namespace)); err == nil {
			for _, p := range pods.Items {
				t.Logf("pod %s on %q: %s, annotations %v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Annotations)
			}
		}
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
