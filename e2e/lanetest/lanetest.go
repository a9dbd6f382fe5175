// Package lanetest is the test harness the two real-Flux lanes of the end-to-end tests share:
// e2e/realflux (real brokers behind simulated pods, run by its Runner) and e2e/realpodlane (real
// pods on real nodes, run by their kubelets). It holds what their tests do alike: one cluster with
// fluxfed's CRD and the member reconciler, the description of a namespace when a test failed, the
// exit table of how a MiniCluster ends and the on-demand cycle with its timeline. Each lane keeps
// what differs: how it reaches a broker, and how it learns how a container ended.
//
// It is a package of its own, not a _test.go file, because tests cannot import another package's
// test files; it must not import e2e/fleet, which imports e2e/realflux, whose own tests use it.
package lanetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

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
	"github.com/fluxfed/fluxfed/e2e/brokersim"
	"github.com/fluxfed/fluxfed/e2e/clusters"
	"github.com/fluxfed/fluxfed/internal/testenv"
	"github.com/fluxfed/fluxfed/member"
)

// InstallCRD creates fluxfed's CRD in a cluster before its controllers start
// (clusters.Options.BeforeControllers).
func InstallCRD(ctx context.Context, _ *clusters.Cluster, cfg *rest.Config) error {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("creating a client for the CRD: %w", err)
	}
	objs, err := testenv.Kustomize("crd")
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %s: %w", o.GetName(), err)
		}
	}
	return nil
}

// RunMember runs the member reconciler on c in this program until the test ends, and returns a
// client of c that knows fluxfed's types.
func RunMember(t *testing.T, c *clusters.Cluster) client.Client {
	t.Helper()
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
	cl, err := client.New(c.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)
	return cl
}

// DescribeOnFailure logs, when the test failed, the MiniClusters, Jobs and pods of namespace (of
// every namespace when it is "") as the cluster saw them: what the failure's last error does not
// say. describePod logs what the lane knows of a pod; more, when not nil, logs what else it knows.
func DescribeOnFailure(t *testing.T, cl client.Client, namespace string, describePod func(p *corev1.Pod), more func()) {
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
			for i := range pods.Items {
				describePod(&pods.Items[i])
			}
		}
		if more != nil {
			more()
		}
	})
}

// RunningPod returns the running pod of completion index i of mc, failing t when there is none.
func RunningPod(t require.TestingT, cl client.Client, mc *fluxv1alpha2.MiniCluster, i int) *corev1.Pod {
	var pods corev1.PodList
	require.NoError(t, cl.List(context.Background(), &pods, client.InNamespace(mc.Namespace),
		client.MatchingLabels{fluxv1alpha2.LabelMiniCluster: mc.Name, batchv1.JobCompletionIndexAnnotation: fmt.Sprint(i)}))
	for j := range pods.Items {
		if pods.Items[j].DeletionTimestamp == nil && pods.Items[j].Status.Phase == corev1.PodRunning {
			return &pods.Items[j]
		}
	}
	require.Fail(t, "no running pod", "index %d of %s", i, mc.Name)
	return nil
}

// Condition says a condition of mc in one line, "Type=?" when mc has none of that type.
func Condition(mc *fluxv1alpha2.MiniCluster, conditionType string) string {
	c := meta.FindStatusCondition(mc.Status.Conditions, conditionType)
	if c == nil {
		return conditionType + "=?"
	}
	return fmt.Sprintf("%s=%s %s: %s", conditionType, c.Status, c.Reason, c.Message)
}

// RequireCondition requires mc's condition of that type to be true, with that reason and a
// message that contains message.
func RequireCondition(t require.TestingT, mc *fluxv1alpha2.MiniCluster, conditionType, reason, message string) {
	c := meta.FindStatusCondition(mc.Status.Conditions, conditionType)
	require.NotNil(t, c, conditionType)
	require.Equal(t, metav1.ConditionTrue, c.Status, Condition(mc, conditionType))
	require.Equal(t, reason, c.Reason, Condition(mc, conditionType))
	require.Contains(t, c.Message, message, Condition(mc, conditionType))
}

// BurstOf returns the status of root's burst name, nil when root's status has none.
func BurstOf(root *fluxv1alpha2.MiniCluster, name string) *fluxv1alpha2.BurstStatus {
	for i := range root.Status.Bursts {
		if root.Status.Bursts[i].Name == name {
			return &root.Status.Bursts[i]
		}
	}
	return nil
}

// RequireStandInPlace requires the broker of hostname, started from brokerTOML, to have found
// the place that the overlay's stand-in (brokersim.Locate) computes from the same config and
// hostname: its rank, the size, its parent's URI, and whether it listens for children. attr
// asks the broker for one of its attributes, as flux getattr does.
func RequireStandInPlace(t *testing.T, brokerTOML []byte, hostname string, attr func(name string) (string, error)) {
	t.Helper()
	place, err := brokersim.Locate(brokerTOML, hostname)
	require.NoError(t, err, hostname)
	rank, err := attr("rank")
	require.NoError(t, err)
	size, err := attr("size")
	require.NoError(t, err)
	require.Equal(t, []string{strconv.Itoa(place.Rank), strconv.Itoa(place.Size)}, []string{rank, size}, "%s: rank and size", hostname)
	parent, err := attr("tbon.parent-endpoint")
	if place.Connect == "" {
		require.Error(t, err, "%s has no parent", hostname)
	} else {
		require.NoError(t, err)
		require.Equal(t, place.Connect, parent, "%s: its parent's URI", hostname)
	}
	_, err = attr("tbon.endpoint")
	require.Equal(t, place.Bind != "", err == nil, "%s listens for children: %v", hostname, place.Children)
}

// ShortDir is a temporary directory with a short path, named from pattern (os.MkdirTemp): unix
// sockets are in it, whose paths have at most 104 characters. It is removed when the test ends,
// or, when the test failed, kept for diagnosis as name in the test's kept directory
// (clusters.KeepForDiagnosis), logging that what (what the directory holds) is kept there.
func ShortDir(t *testing.T, pattern, name, what string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", pattern)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			if kept, err := clusters.KeepForDiagnosis(t); err == nil && os.Rename(dir, filepath.Join(kept, name)) == nil {
				t.Logf("%s are kept in %s", what, filepath.Join(kept, name))
				return
			}
		}
		_ = os.RemoveAll(dir)
	})
	return dir
}
