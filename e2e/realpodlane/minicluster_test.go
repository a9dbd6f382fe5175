//go:build realpods

package realpodlane

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/clusters"
)

// TestMiniClustersOnRealPods runs MiniClusters on one cluster of two real nodes: one whose job
// completes, then every way a MiniCluster ends, as the kubelet reports it.
func TestMiniClustersOnRealPods(t *testing.T) {
	c, cl := realCluster(t, "real", 2)
	t.Run("a MiniCluster runs its job", func(t *testing.T) { testRunsItsJob(t, c, cl) })
	t.Run("how a MiniCluster ends", func(t *testing.T) { testHowItEnds(t, c, cl) })
}

// testRunsItsJob creates a MiniCluster of two brokers whose job is hostname: the flux-view init
// containers copy the view, the rendered entrypoints start real brokers that find each other
// through the headless Service and CoreDNS with the CURVE certificate, the job runs, and the
// MiniCluster completes with the exit status the kubelet reported for the lead container.
func testRunsItsJob(t *testing.T, c *clusters.Cluster, cl client.Client) {
	ctx := context.Background()
	require.NoError(t, cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "research"}}))
	describeOnFailure(t, cl, "research")
	mc := realMiniCluster("hello", "research", 2, "hostname").Obj()
	manifest, err := json.Marshal(mc)
	require.NoError(t, err)
	// As a user would: kubectl apply.
	apply := exec.CommandContext(ctx, kubectl(), "--kubeconfig", c.Kubeconfig, "apply", "-f", "-")
	apply.Stdin = bytes.NewReader(manifest)
	created := time.Now()
	out, err := apply.CombinedOutput()
	require.NoError(t, err, "kubectl apply: %s", out)
	t.Logf("kubectl apply: %s", strings.TrimSpace(string(out)))
	var complete *metav1.Condition
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &fluxv1alpha2.MiniCluster{}
		require.NoError(c, cl.Get(ctx, client.ObjectKeyFromObject(mc), got))
		complete = meta.FindStatusCondition(got.Status.Conditions, fluxv1alpha2.ConditionComplete)
		require.NotNil(c, complete)
		require.Equal(c, metav1.ConditionTrue, complete.Status, "%s: %s", complete.Reason, complete.Message)
	}, busyWait, time.Second)
	t.Logf("MiniCluster hello Complete %s after kubectl apply (load average %s): %s: %s",
		time.Since(created).Round(100*time.Millisecond), loadAverage(), complete.Reason, complete.Message)
	require.True(t, strings.HasPrefix(complete.Message, "the job exited with status 0"), complete.Message)

	// Both brokers ran on real nodes, and the kubelet reported how the lead's containers ended:
	// the flux-view init container and the broker, which printed the job's output.
	var pods corev1.PodList
	require.NoError(t, cl.List(ctx, &pods, client.InNamespace("research")))
	var lead *corev1.Pod
	for i, p := range pods.Items {
		require.Contains(t, c.RealNodes, p.Spec.NodeName, "pod %s", p.Name)
		if p.Labels[batchv1.JobCompletionIndexAnnotation] == "0" {
			lead = &pods.Items[i]
		}
	}
	require.NotNil(t, lead, "the lead pod of hello")
	for _, s := range append(slices.Clone(lead.Status.InitContainerStatuses), lead.Status.ContainerStatuses...) {
		t.Logf("The kubelet about container %s of %s: %s", s.Name, lead.Name, describeState(s.State))
		require.NotNil(t, s.State.Terminated, "container %s", s.Name)
		require.Zero(t, s.State.Terminated.ExitCode, "container %s", s.Name)
	}
	logs := containerLogs(ctx, c, "research", lead.Name, lead.Spec.Containers[0].Name)
	require.Contains(t, strings.Split(logs, "\n"), "hello-0", "the job's output in the lead broker's log (through its kubelet):\n%s", logs)
}
