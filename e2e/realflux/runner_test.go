package realflux

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// shortDir is a temporary directory with a short path: brokers' sockets are in it.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ffr")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// TestARealMiniClusterRunsItsJob applies a MiniCluster of two brokers whose job is hostname: the
// real brokers join, the job runs on the lead, and the MiniCluster completes with the job's status
// in its message, as the lead's container reports it.
func TestARealMiniClusterRunsItsJob(t *testing.T) {
	_, cl := oneCluster(t)
	ctx := context.Background()
	require.NoError(t, cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "research"}}))
	mc := v1alpha2test.MiniCluster("hello").Namespace("research").Size(2).Command("hostname").Obj()
	require.NoError(t, cl.Create(ctx, mc))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &fluxv1alpha2.MiniCluster{}
		require.NoError(c, cl.Get(ctx, client.ObjectKeyFromObject(mc), got))
		complete := meta.FindStatusCondition(got.Status.Conditions, fluxv1alpha2.ConditionComplete)
		require.NotNil(c, complete)
		require.Equal(c, metav1.ConditionTrue, complete.Status, "%s: %s", complete.Reason, complete.Message)
		require.True(c, strings.HasPrefix(complete.Message, "the job exited with status 0"), complete.Message)
	}, 3*time.Minute, time.Second)
}
