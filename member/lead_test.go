package member

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

// TestReadLeadEnd reads the lead's end from pods on a real API server: only index 0 of the
// MiniCluster's own Job, the Flux container, and the container that ended last.
func TestReadLeadEnd(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	c := env.Client
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "hpc"}}))
	mc := v1alpha2test.MiniCluster("sim").Namespace("hpc").Size(2).Obj()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "sim", Namespace: "hpc"},
		Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "sim", Image: "app"}}}},
		},
	}
	require.NoError(t, c.Create(ctx, job))
	r := &Reconciler{apiReader: c}

	read := func() *leadEnd {
		t.Helper()
		end, err := r.readLeadEnd(ctx, mc, job)
		require.NoError(t, err)
		return end
	}
	require.Nil(t, read(), "the Job has not ended")
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue}}
	require.Nil(t, read(), "no pod")

	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	pod := func(name, index string, owned bool, statuses ...corev1.ContainerStatus) {
		t.Helper()
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "hpc", Labels: map[string]string{
				batchv1.JobNameLabel: "sim", batchv1.JobCompletionIndexAnnotation: index,
			}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "sim", Image: "app"}, {Name: "sidecar", Image: "app"}}},
		}
		if owned {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "sim", UID: job.UID, Controller: ptr.To(true)}}
		}
		require.NoError(t, c.Create(ctx, p))
		p.Status.ContainerStatuses = statuses
		require.NoError(t, c.Status().Update(ctx, p))
	}
	ended := func(name string, code int32, message string, finished time.Time) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, Image: "app", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, Message: message, FinishedAt: metav1.NewTime(finished)}}}
	}
	// Not the lead, not the Flux container, not the Job's: none counts.
	pod("sim-1-aaaaa", "1", true, ended("sim", 9, "the follower broker finished", at.Add(time.Hour)))
	pod("sim-0-bbbbb", "0", false, ended("sim", 8, "planted", at.Add(time.Hour)))
	pod("sim-0-ccccc", "0", true, ended("sidecar", 7, "not flux", at.Add(time.Hour)))
	require.Nil(t, read())

	// An earlier lead pod, then the one that ended last, whose log ends the message.
	pod("sim-0-ddddd", "0", true, ended("sim", 1, "the lead broker exited with status 1 before its work ended, 0 times started again", at))
	pod("sim-0-eeeee", "0", true, ended("sim", 3, "some output\nthe job exited with status 3\n", at.Add(time.Minute)))
	end := read()
	require.Equal(t, &leadEnd{pod: "sim-0-eeeee", exitCode: 3, message: "the job exited with status 3"}, end)
	status, ok := end.jobStatus()
	require.True(t, ok)
	require.Equal(t, 3, status)

	// A burst child has no lead.
	child := mc.DeepCopy()
	child.Spec.Flux.Bursting.LeadBroker = &fluxv1alpha2.LeadBroker{Address: "127.0.0.1"}
	end, err := r.readLeadEnd(ctx, child, job)
	require.NoError(t, err)
	require.Nil(t, end)
}
