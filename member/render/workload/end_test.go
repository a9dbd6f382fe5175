package workload

import (
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
)

// failOnTheFluxContainer is the pod failure policy of a Job whose Flux container is named
// container: any exit of it other than 0 fails the Job.
func failOnTheFluxContainer(container string) *batchv1.PodFailurePolicy {
	return &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action: batchv1.PodFailurePolicyActionFailJob,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: &container, Operator: batchv1.PodFailurePolicyOnExitCodesOpNotIn, Values: []int32{0},
		},
	}}}
}

var theLeadDecides = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptrTo("0")}}}

func TestTheJobEndsWithTheLead(t *testing.T) {
	for _, tc := range []struct {
		name          string
		fixture       string
		restartPolicy fluxv1alpha2.RestartPolicy
		wantRestart   corev1.RestartPolicy
		wantFailure   *batchv1.PodFailurePolicy
		wantSuccess   *batchv1.SuccessPolicy
	}{
		{
			name: "by default a failed Flux container fails the Job, and the lead's success ends it", fixture: "root-size-4-tasks",
			wantRestart: corev1.RestartPolicyNever, wantFailure: failOnTheFluxContainer("lammps"), wantSuccess: theLeadDecides,
		},
		{
			name: "Never as asked", fixture: "root-size-1", restartPolicy: "Never",
			wantRestart: corev1.RestartPolicyNever, wantFailure: failOnTheFluxContainer("hello"), wantSuccess: theLeadDecides,
		},
		{
			name: "OnFailure as asked: the kubelet restarts, and Kubernetes admits no pod failure policy", fixture: "root-size-1", restartPolicy: "OnFailure",
			wantRestart: corev1.RestartPolicyOnFailure, wantSuccess: theLeadDecides,
		},
		{
			name: "a burst child has no lead: it ends when its followers do", fixture: "burst-child",
			wantRestart: corev1.RestartPolicyNever, wantFailure: failOnTheFluxContainer("lammps"),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mc := v1alpha2test.RenderCaseNamed(t, tc.fixture)
			mc.Spec.Pod.RestartPolicy = tc.restartPolicy
			job := typedJob(t, mc)
			require.Equal(t, tc.wantRestart, job.Spec.Template.Spec.RestartPolicy)
			require.Equal(t, tc.wantFailure, job.Spec.PodFailurePolicy)
			require.Equal(t, tc.wantSuccess, job.Spec.SuccessPolicy)
			for _, c := range job.Spec.Template.Spec.Containers {
				require.Equal(t, corev1.TerminationMessageFallbackToLogsOnError, c.TerminationMessagePolicy, c.Name)
			}
		})
	}
}

func TestTheServicesPodKeepsRestartingByDefault(t *testing.T) {
	mc := v1alpha2test.RenderCaseNamed(t, "services")
	require.Equal(t, corev1.RestartPolicyOnFailure, typedServices(t, mc).Spec.Template.Spec.RestartPolicy)
	mc.Spec.Pod.RestartPolicy = "Never"
	require.Equal(t, corev1.RestartPolicyNever, typedServices(t, mc).Spec.Template.Spec.RestartPolicy)
}
