package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/clusters"
	"github.com/fluxfed/fluxfed/member/render/scripts"
)

// What the entrypoints write as their termination message (member/render/scripts, whose tests
// run them with a stand-in flux): kwok's pods say the same when the test ends them.
const (
	followerMessage = "the follower broker finished"
	stoppedLead     = "the lead broker was stopped before its job ended (the broker exited with status 129)"
)

// TestHowAMiniClusterEnds drives each row of docs/minicluster.md "How a MiniCluster ends"
// through the hub's reconciler, the Job controller and kwok. The test ends a broker's pod with
// the exit code and termination message its entrypoint would (clusters.AnnotationExitCode); a
// deleted pod ends as a broker stopped by SIGTERM would (clusters.AnnotationStopExitCode): 0 for
// a follower, 143 for a lead whose job had not ended. What the test checks is what a user sees:
// the Job, the MiniCluster's conditions, and no pod left running.
func TestHowAMiniClusterEnds(t *testing.T) {
	t.Run("the job succeeds", func(t *testing.T) {
		t.Parallel()
		mc, ns := runningBrokers(t)
		end(t, brokerPod(t, ns, mc.Name, "0"), clusters.AnnotationExitCode, "0", fmt.Sprintf(scripts.JobStatusMessage, 0))
		waitEnded(t, mc, ns, fluxv1alpha2.ConditionComplete, fluxv1alpha2.ReasonJobComplete,
			leadMessage(mc, fmt.Sprintf(scripts.JobStatusMessage, 0), "0"))
		job := brokerJob(t, ns, mc.Name)
		require.NotNil(t, jobConditionOf(job, batchv1.JobComplete))
		require.Equal(t, int32(0), job.Status.Failed, "the stopped followers ended with 0")
		require.True(t, strings.HasPrefix(job.Status.CompletedIndexes, "0"), job.Status.CompletedIndexes)
	})

	// The lead ends with an error: its job's, or its own when it gave up restarting its broker
	// or could not set it up. Each message is one the entrypoint writes.
	for _, tc := range []struct {
		name, exitCode, message string
	}{
		{"the job fails", "3", fmt.Sprintf(scripts.JobStatusMessage, 3)},
		{"the lead broker keeps crashing", "42", "the lead broker exited with status 42 before its work ended, 6 times started again"},
		{"a setup step fails", "1", "fluxfed: error: flux is not on PATH (/usr/bin:/bin)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mc, ns := runningBrokers(t)
			end(t, brokerPod(t, ns, mc.Name, "0"), clusters.AnnotationExitCode, tc.exitCode, tc.message)
			waitEnded(t, mc, ns, fluxv1alpha2.ConditionFailed, fluxv1alpha2.ReasonJobFailed, leadMessage(mc, tc.message, tc.exitCode))
			failed := jobConditionOf(brokerJob(t, ns, mc.Name), batchv1.JobFailed)
			require.NotNil(t, failed)
			require.Equal(t, batchv1.JobReasonPodFailurePolicy, failed.Reason, failed.Message)
		})
	}

	// With restartPolicy OnFailure the kubelet restarts the failed lead's container, which finds
	// the job's status, says it again and exits 0: the Job completes, the MiniCluster failed.
	t.Run("the job fails, with restartPolicy OnFailure", func(t *testing.T) {
		t.Parallel()
		mc, ns := runningBrokers(t, func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Pod.RestartPolicy = fluxv1alpha2.RestartOnFailure })
		end(t, brokerPod(t, ns, mc.Name, "0"), clusters.AnnotationExitCode, "0", fmt.Sprintf(scripts.JobStatusMessage, 3))
		waitEnded(t, mc, ns, fluxv1alpha2.ConditionFailed, fluxv1alpha2.ReasonJobFailed,
			leadMessage(mc, fmt.Sprintf(scripts.JobStatusMessage, 3), "0"))
		require.NotNil(t, jobConditionOf(brokerJob(t, ns, mc.Name), batchv1.JobComplete), "the Job itself completed")
	})

	t.Run("a follower is deleted, then the MiniCluster", func(t *testing.T) {
		t.Parallel()
		mc, ns := runningBrokers(t)
		hub := shared.Clients["hub"]
		require.NoError(t, hub.Delete(context.Background(), brokerPod(t, ns, mc.Name, "2")))
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: mc.Name}}
			require.True(c, get(c, "hub", job))
			require.Equal(c, "2", job.Status.CompletedIndexes, "the deleted follower's index is done")
			require.Equal(c, int32(0), job.Status.Failed)
			require.Equal(c, hostnames(mc.Name, 2), podHostnames(c, "hub", ns, mc.Name), "and not replaced")
			require.True(c, get(c, "hub", mc))
			ready := meta.FindStatusCondition(mc.Status.Conditions, fluxv1alpha2.ConditionReady)
			require.NotNil(c, ready)
			require.Equal(c, metav1.ConditionFalse, ready.Status)
			require.Equal(c, "2 of 3 broker pods are ready", ready.Message)
			require.True(c, meta.IsStatusConditionFalse(mc.Status.Conditions, fluxv1alpha2.ConditionFailed))
			require.True(c, meta.IsStatusConditionFalse(mc.Status.Conditions, fluxv1alpha2.ConditionComplete))
		}, wait, tick)

		// The lead, stopped with its job still running, ends with 143; nothing is left.
		end(t, brokerPod(t, ns, mc.Name, "0"), clusters.AnnotationStopExitCode, "143", stoppedLead)
		require.NoError(t, hub.Delete(context.Background(), mc))
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			require.Empty(c, leftovers(c, "hub", ns))
		}, wait, tick)
	})

	t.Run("the lead is deleted", func(t *testing.T) {
		t.Parallel()
		mc, ns := runningBrokers(t)
		lead := brokerPod(t, ns, mc.Name, "0")
		end(t, lead, clusters.AnnotationStopExitCode, "143", stoppedLead)
		require.NoError(t, shared.Clients["hub"].Delete(context.Background(), lead))
		// The deleted pod is usually gone before the reconciler reads its message: then the
		// Job's own reason names the pod and the exit code.
		waitEnded(t, mc, ns, fluxv1alpha2.ConditionFailed, fluxv1alpha2.ReasonJobFailed,
			`^(`+leadMessage(mc, stoppedLead, "143")[1:]+`|the broker Job failed \(PodFailurePolicy\): .* for pod `+ns+`/`+mc.Name+`-0-\w+ failed with exit code 143 .*)$`)
		require.Equal(t, batchv1.JobReasonPodFailurePolicy, jobConditionOf(brokerJob(t, ns, mc.Name), batchv1.JobFailed).Reason)
		t.Logf("Failed: %s", meta.FindStatusCondition(mc.Status.Conditions, fluxv1alpha2.ConditionFailed).Message)
	})
}

// leadMessage is the pattern of a condition's message that quotes the lead's termination
// message and exit code.
func leadMessage(mc *fluxv1alpha2.MiniCluster, message, exitCode string) string {
	return `^` + regexp.QuoteMeta(message) + ` \(pod ` + mc.Name + `-0-\w+, exit code ` + exitCode + `\)$`
}

// waitEnded waits until the MiniCluster has ended: condition (Complete or Failed) True with
// reason and a message that matches pattern, the other one False, not Ready, and no broker pod
// left running.
func waitEnded(t *testing.T, mc *fluxv1alpha2.MiniCluster, ns, condition, reason, pattern string) {
	t.Helper()
	other := fluxv1alpha2.ConditionFailed
	if condition == fluxv1alpha2.ConditionFailed {
		other = fluxv1alpha2.ConditionComplete
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, get(c, "hub", mc))
		got := meta.FindStatusCondition(mc.Status.Conditions, condition)
		require.NotNil(c, got)
		require.Equal(c, metav1.ConditionTrue, got.Status, got.Message)
		require.Equal(c, reason, got.Reason)
		require.Regexp(c, pattern, got.Message)
		require.True(c, meta.IsStatusConditionFalse(mc.Status.Conditions, other))
		require.True(c, meta.IsStatusConditionFalse(mc.Status.Conditions, fluxv1alpha2.ConditionReady))
		require.Empty(c, podHostnames(c, "hub", ns, mc.Name), "no broker is left running")
	}, wait, tick)
}

// runningBrokers applies hello-world.yaml with three brokers whose pods end with 0 when stopped,
// as followers do, after change (when set) altered it, and waits until they all run.
func runningBrokers(t *testing.T, change ...func(*fluxv1alpha2.MiniCluster)) (*fluxv1alpha2.MiniCluster, string) {
	t.Helper()
	mc, ns := applyExample(t, "hello-world.yaml", func(mc *fluxv1alpha2.MiniCluster) {
		mc.Spec.Size = 3
		mc.Spec.Pod.Annotations = map[string]string{
			clusters.AnnotationStopExitCode:       "0",
			clusters.AnnotationTerminationMessage: followerMessage,
		}
		for _, f := range change {
			f(mc)
		}
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, get(c, "hub", mc))
		require.True(c, meta.IsStatusConditionTrue(mc.Status.Conditions, fluxv1alpha2.ConditionReady))
		require.Equal(c, hostnames(mc.Name, 3), podHostnames(c, "hub", ns, mc.Name))
	}, wait, tick)
	return mc, ns
}

// brokerPod returns the running pod of a completion index.
func brokerPod(t *testing.T, ns, name, index string) *corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	require.NoError(t, shared.Clients["hub"].List(context.Background(), &pods, client.InNamespace(ns),
		client.MatchingLabels{batchv1.JobNameLabel: name, batchv1.JobCompletionIndexAnnotation: index}))
	require.Len(t, pods.Items, 1)
	return &pods.Items[0]
}

func brokerJob(t *testing.T, ns, name string) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	require.True(t, get(t, "hub", job))
	return job
}

func jobConditionOf(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if c := &job.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// end says how a broker's pod ends: with exit code and message now (clusters.AnnotationExitCode)
// or once deleted (clusters.AnnotationStopExitCode). The message is set first, so that kwok never
// ends the pod without it.
func end(t *testing.T, pod *corev1.Pod, annotation, exitCode, message string) {
	t.Helper()
	for _, kv := range [][2]string{{clusters.AnnotationTerminationMessage, message}, {annotation, exitCode}} {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{kv[0]: kv[1]}}})
		require.NoError(t, err)
		require.NoError(t, shared.Clients["hub"].Patch(context.Background(), pod, client.RawPatch(types.MergePatchType, patch)))
	}
}
