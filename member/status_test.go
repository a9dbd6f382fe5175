package member

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/internal/apply"
)

func job(parallelism, ready int32, conditions ...batchv1.JobCondition) *batchv1.Job {
	return &batchv1.Job{
		Spec:   batchv1.JobSpec{Parallelism: ptr.To(parallelism)},
		Status: batchv1.JobStatus{Ready: ptr.To(ready), Conditions: conditions},
	}
}

func TestComputeStatus(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC))
	sample := func() *v1alpha2test.Builder { return v1alpha2test.MiniCluster("flux-sample").Namespace("hpc") }
	type cond struct {
		status metav1.ConditionStatus
		reason string
	}
	tests := []struct {
		name      string
		mc        *fluxv1alpha2.MiniCluster
		obs       observation
		err       error
		wantSize  int32
		wantReady int32
		want      map[string]cond
		wantMsg   map[string]string
	}{
		{
			name: "no job yet",
			mc:   sample().Size(2).Obj(),
			want: map[string]cond{
				fluxv1alpha2.ConditionReady:    {metav1.ConditionFalse, fluxv1alpha2.ReasonPodsNotReady},
				fluxv1alpha2.ConditionComplete: {metav1.ConditionFalse, fluxv1alpha2.ReasonJobRunning},
				fluxv1alpha2.ConditionFailed:   {metav1.ConditionFalse, fluxv1alpha2.ReasonJobRunning},
			},
		},
		{
			name: "some pods ready", mc: sample().Size(4).MaxSize(6).Obj(), obs: observation{job: job(4, 1)},
			wantSize: 4, wantReady: 1,
			want:    map[string]cond{fluxv1alpha2.ConditionReady: {metav1.ConditionFalse, fluxv1alpha2.ReasonPodsNotReady}},
			wantMsg: map[string]string{fluxv1alpha2.ConditionReady: "1 of 4 broker pods are ready"},
		},
		{
			name: "all pods ready", mc: sample().Size(4).Obj(), obs: observation{job: job(4, 4)},
			wantSize: 4, wantReady: 4,
			want:    map[string]cond{fluxv1alpha2.ConditionReady: {metav1.ConditionTrue, fluxv1alpha2.ReasonPodsReady}},
			wantMsg: map[string]string{fluxv1alpha2.ConditionReady: "4 of 4 broker pods are ready"},
		},
		{
			name: "scaled down, one pod still stopping", mc: sample().Size(1).MaxSize(4).Obj(), obs: observation{job: job(1, 2)},
			wantSize: 1, wantReady: 2,
			want:    map[string]cond{fluxv1alpha2.ConditionReady: {metav1.ConditionTrue, fluxv1alpha2.ReasonPodsReady}},
			wantMsg: map[string]string{fluxv1alpha2.ConditionReady: "1 of 1 broker pods are ready; 1 more is shutting down"},
		},
		{
			name: "scaled down, two pods still stopping", mc: sample().Size(2).MaxSize(4).Obj(), obs: observation{job: job(2, 4)},
			wantSize: 2, wantReady: 4,
			want:    map[string]cond{fluxv1alpha2.ConditionReady: {metav1.ConditionTrue, fluxv1alpha2.ReasonPodsReady}},
			wantMsg: map[string]string{fluxv1alpha2.ConditionReady: "2 of 2 broker pods are ready; 2 more are shutting down"},
		},
		{
			name: "job complete",
			mc:   sample().Size(2).Obj(),
			obs:  observation{job: job(2, 0, batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue})},
			want: map[string]cond{
				fluxv1alpha2.ConditionReady:    {metav1.ConditionFalse, fluxv1alpha2.ReasonJobComplete},
				fluxv1alpha2.ConditionComplete: {metav1.ConditionTrue, fluxv1alpha2.ReasonJobComplete},
				fluxv1alpha2.ConditionFailed:   {metav1.ConditionFalse, fluxv1alpha2.ReasonJobRunning},
			},
			wantSize: 2,
		},
		{
			name: "job failed",
			mc:   sample().Size(2).Obj(),
			obs: observation{job: job(2, 0, batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
				Reason: "DeadlineExceeded", Message: "Job was active longer than specified deadline"})},
			want: map[string]cond{
				fluxv1alpha2.ConditionReady:  {metav1.ConditionFalse, fluxv1alpha2.ReasonJobFailed},
				fluxv1alpha2.ConditionFailed: {metav1.ConditionTrue, fluxv1alpha2.ReasonJobFailed},
			},
			wantMsg:  map[string]string{fluxv1alpha2.ConditionFailed: "the broker Job failed (DeadlineExceeded): Job was active longer than specified deadline"},
			wantSize: 2,
		},
		{
			name: "waiting for the hub's Secret",
			mc:   sample().Size(2).Obj(),
			err: &waitError{reason: fluxv1alpha2.ReasonCurveSecretPending,
				message: "waiting for the hub to push Secret flux-sample-curve with the root's CURVE certificate"},
			want: map[string]cond{
				fluxv1alpha2.ConditionReady:  {metav1.ConditionFalse, fluxv1alpha2.ReasonCurveSecretPending},
				fluxv1alpha2.ConditionFailed: {metav1.ConditionFalse, fluxv1alpha2.ReasonJobRunning},
			},
			wantMsg: map[string]string{fluxv1alpha2.ConditionReady: "waiting for the hub to push Secret flux-sample-curve with the root's CURVE certificate"},
		},
		{
			name: "a running child whose Secret is gone waits too",
			mc:   sample().Size(2).Obj(),
			obs:  observation{job: job(2, 2)},
			err:  &waitError{reason: fluxv1alpha2.ReasonCurveSecretPending, message: "waiting for the hub"},
			want: map[string]cond{
				fluxv1alpha2.ConditionReady:  {metav1.ConditionFalse, fluxv1alpha2.ReasonCurveSecretPending},
				fluxv1alpha2.ConditionFailed: {metav1.ConditionFalse, fluxv1alpha2.ReasonJobRunning},
			},
			wantSize: 2, wantReady: 2,
		},
		{
			name: "a refused change fails, the running Job is still reported",
			mc:   sample().Size(2).Obj(),
			obs:  observation{job: job(2, 2)},
			err: fmt.Errorf("applying: %w", &apply.Refusal{Reason: fluxv1alpha2.ReasonImmutableFieldChanged,
				Object: "Job hpc/flux-sample", Message: "spec.template cannot change"}),
			want: map[string]cond{
				fluxv1alpha2.ConditionReady:  {metav1.ConditionTrue, fluxv1alpha2.ReasonPodsReady},
				fluxv1alpha2.ConditionFailed: {metav1.ConditionTrue, fluxv1alpha2.ReasonImmutableFieldChanged},
			},
			wantMsg:   map[string]string{fluxv1alpha2.ConditionFailed: "Job hpc/flux-sample: spec.template cannot change"},
			wantSize:  2,
			wantReady: 2,
		},
		{
			name: "a spec that cannot be rendered",
			mc:   sample().Size(2).Obj(),
			err:  &invalidSpecError{err: errors.New("spec.flux.topology: kary:2 puts rank 3 under rank 1")},
			want: map[string]cond{
				fluxv1alpha2.ConditionReady:  {metav1.ConditionFalse, fluxv1alpha2.ReasonPodsNotReady},
				fluxv1alpha2.ConditionFailed: {metav1.ConditionTrue, fluxv1alpha2.ReasonInvalidSpec},
			},
			wantMsg: map[string]string{fluxv1alpha2.ConditionFailed: "spec.flux.topology: kary:2 puts rank 3 under rank 1"},
		},
		{
			name:     "the lead's job succeeded",
			wantSize: 2,
			mc:       sample().Size(2).Obj(),
			obs: observation{job: job(2, 0, batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}),
				lead: &leadEnd{pod: "flux-sample-0-abcde", message: "the job exited with status 0"}},
			want: map[string]cond{
				fluxv1alpha2.ConditionComplete: {metav1.ConditionTrue, fluxv1alpha2.ReasonJobComplete},
				fluxv1alpha2.ConditionFailed:   {metav1.ConditionFalse, fluxv1alpha2.ReasonJobRunning},
			},
			wantMsg: map[string]string{fluxv1alpha2.ConditionComplete: "the job exited with status 0 (pod flux-sample-0-abcde, exit code 0)"},
		},
		{
			name:     "the lead's job failed: the pod failure policy failed the Job",
			wantSize: 2,
			mc:       sample().Size(2).Obj(),
			obs: observation{job: job(2, 0, batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
				Reason: "PodFailurePolicy", Message: "Container flux-sample of pod hpc/flux-sample-0-abcde failed with exit code 3"}),
				lead: &leadEnd{pod: "flux-sample-0-abcde", exitCode: 3, message: "the job exited with status 3"}},
			want: map[string]cond{
				fluxv1alpha2.ConditionReady:    {metav1.ConditionFalse, fluxv1alpha2.ReasonJobFailed},
				fluxv1alpha2.ConditionComplete: {metav1.ConditionFalse, fluxv1alpha2.ReasonJobRunning},
				fluxv1alpha2.ConditionFailed:   {metav1.ConditionTrue, fluxv1alpha2.ReasonJobFailed},
			},
			wantMsg: map[string]string{fluxv1alpha2.ConditionFailed: "the job exited with status 3 (pod flux-sample-0-abcde, exit code 3)"},
		},
		{
			name:     "the lead's job failed under restartPolicy OnFailure: the Job completed after the restart",
			wantSize: 2,
			mc:       sample().Size(2).Obj(),
			obs: observation{job: job(2, 0, batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}),
				lead: &leadEnd{pod: "flux-sample-0-abcde", message: "the job exited with status 3"}},
			want: map[string]cond{
				fluxv1alpha2.ConditionReady:    {metav1.ConditionFalse, fluxv1alpha2.ReasonJobFailed},
				fluxv1alpha2.ConditionComplete: {metav1.ConditionFalse, fluxv1alpha2.ReasonJobRunning},
				fluxv1alpha2.ConditionFailed:   {metav1.ConditionTrue, fluxv1alpha2.ReasonJobFailed},
			},
			wantMsg: map[string]string{fluxv1alpha2.ConditionFailed: "the job exited with status 3 (pod flux-sample-0-abcde, exit code 0)"},
		},
		{
			name:     "the lead was stopped before its job ended",
			wantSize: 2,
			mc:       sample().Size(2).Obj(),
			obs: observation{job: job(2, 0, batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "PodFailurePolicy"}),
				lead: &leadEnd{pod: "flux-sample-0-abcde", exitCode: 143, message: "the lead broker was stopped before its job ended (the broker exited with status 129)"}},
			want:    map[string]cond{fluxv1alpha2.ConditionFailed: {metav1.ConditionTrue, fluxv1alpha2.ReasonJobFailed}},
			wantMsg: map[string]string{fluxv1alpha2.ConditionFailed: "the lead broker was stopped before its job ended (the broker exited with status 129) (pod flux-sample-0-abcde, exit code 143)"},
		},
		{
			name:     "the lead's pod is gone: what was read stays",
			wantSize: 2,
			mc: func() *fluxv1alpha2.MiniCluster {
				mc := sample().Size(2).Obj()
				mc.Status.Conditions = []metav1.Condition{{Type: fluxv1alpha2.ConditionComplete, Status: metav1.ConditionTrue,
					Reason: fluxv1alpha2.ReasonJobComplete, Message: "the job exited with status 0 (pod flux-sample-0-abcde, exit code 0)"}}
				return mc
			}(),
			obs:     observation{job: job(2, 0, batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue})},
			want:    map[string]cond{fluxv1alpha2.ConditionComplete: {metav1.ConditionTrue, fluxv1alpha2.ReasonJobComplete}},
			wantMsg: map[string]string{fluxv1alpha2.ConditionComplete: "the job exited with status 0 (pod flux-sample-0-abcde, exit code 0)"},
		},
		{
			name: "an object of someone else",
			mc:   sample().Size(2).Obj(),
			err: &apply.Refusal{Reason: fluxv1alpha2.ReasonConflict, Object: "Service hpc/flux-sample",
				Message: "exists and is not this MiniCluster's"},
			want: map[string]cond{
				fluxv1alpha2.ConditionFailed: {metav1.ConditionTrue, fluxv1alpha2.ReasonConflict},
			},
			wantMsg: map[string]string{fluxv1alpha2.ConditionFailed: "Service hpc/flux-sample: exists and is not this MiniCluster's"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.mc.Generation = 3
			tt.obs.hostlist = "flux-sample-[0-1]"
			st := computeStatus(tt.mc, tt.obs, tt.err, now)
			require.Equal(t, int64(3), st.ObservedGeneration)
			require.Equal(t, tt.mc.MaxSize(), st.MaximumSize)
			require.Equal(t, "batch.kubernetes.io/job-name=flux-sample,fluxfed.io/minicluster=flux-sample", st.Selector)
			require.Equal(t, "flux-sample-[0-1]", st.Hostlist)
			require.Equal(t, tt.wantSize, st.Size)
			require.Equal(t, tt.wantReady, st.Ready)
			require.Len(t, st.Conditions, len(memberConditions.Types))
			for typ, want := range tt.want {
				c := meta.FindStatusCondition(st.Conditions, typ)
				require.NotNil(t, c, typ)
				require.Equal(t, want.status, c.Status, typ)
				require.Equal(t, want.reason, c.Reason, typ)
				require.Equal(t, int64(3), c.ObservedGeneration, typ)
			}
			for typ, msg := range tt.wantMsg {
				require.Equal(t, msg, meta.FindStatusCondition(st.Conditions, typ).Message, typ)
			}
		})
	}
}

// TestOutcome checks what Reconcile returns for each kind of error, and whether the status says
// it.
func TestOutcome(t *testing.T) {
	refusal := func(reason string) error {
		return fmt.Errorf("applying: %w", &apply.Refusal{Reason: reason, Object: "Job hpc/flux-sample", Message: "refused"})
	}
	tests := []struct {
		name string
		err  error
		// want is "none", "terminal" or "retry".
		want     string
		reported bool
	}{
		{name: "success", err: nil, want: "none", reported: true},
		{name: "waiting for the hub", err: &waitError{reason: fluxv1alpha2.ReasonCurveSecretPending, message: "waiting"}, want: "none", reported: true},
		{name: "invalid spec", err: &invalidSpecError{err: errors.New("spec.flux.topology")}, want: "terminal", reported: true},
		{name: "refused by the API server", err: refusal(fluxv1alpha2.ReasonApplyFailed), want: "terminal", reported: true},
		{name: "immutable field", err: refusal(fluxv1alpha2.ReasonImmutableFieldChanged), want: "terminal", reported: true},
		{name: "conflict: the other object may go away", err: refusal(fluxv1alpha2.ReasonConflict), want: "retry", reported: true},
		{name: "the API server did not answer", err: fmt.Errorf("reading the broker Job: %w", apierrors.NewServiceUnavailable("etcd")), want: "retry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := outcome(tt.err)
			switch tt.want {
			case "none":
				require.NoError(t, got)
			case "terminal":
				require.ErrorIs(t, got, reconcile.TerminalError(nil))
				require.ErrorIs(t, got, tt.err, "the cause stays reachable")
			case "retry":
				require.Error(t, got)
				require.NotErrorIs(t, got, reconcile.TerminalError(nil))
			}
			require.Equal(t, tt.reported, reported(tt.err))
		})
	}
}

func TestComputeStatusKeepsTransitionTimes(t *testing.T) {
	earlier := metav1.NewTime(time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC))
	now := metav1.NewTime(earlier.Add(time.Hour))
	mc := v1alpha2test.MiniCluster("flux-sample").Size(2).Obj()
	mc.Status = computeStatus(mc, observation{job: job(2, 2)}, nil, earlier)

	again := computeStatus(mc, observation{job: job(2, 2)}, nil, now)
	require.False(t, statusChanged(mc.Status, again), "same observation, same status")
	require.Equal(t, earlier, meta.FindStatusCondition(again.Conditions, fluxv1alpha2.ConditionReady).LastTransitionTime)

	lost := computeStatus(mc, observation{job: job(2, 1)}, nil, now)
	require.True(t, statusChanged(mc.Status, lost))
	require.Equal(t, now, meta.FindStatusCondition(lost.Conditions, fluxv1alpha2.ConditionReady).LastTransitionTime)
}

func TestStatusChangedIgnoresHubFields(t *testing.T) {
	mc := v1alpha2test.MiniCluster("flux-sample").Size(2).Obj()
	st := computeStatus(mc, observation{job: job(2, 2)}, nil, metav1.Now())
	current := *st.DeepCopy()
	current.Bursts = []fluxv1alpha2.BurstStatus{{Name: "burst-0", Phase: fluxv1alpha2.BurstReady}}
	current.Conditions = append(current.Conditions, metav1.Condition{Type: fluxv1alpha2.ConditionBursting, Status: metav1.ConditionTrue})
	require.False(t, statusChanged(current, st))
}

func TestTransitions(t *testing.T) {
	c := func(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason}
	}
	tests := []struct {
		name          string
		before, after []metav1.Condition
		want          []string
	}{
		{name: "first status, nothing true", after: []metav1.Condition{c("Ready", metav1.ConditionFalse, "PodsNotReady"), c("Failed", metav1.ConditionFalse, "JobRunning")}},
		{name: "became ready", before: []metav1.Condition{c("Ready", metav1.ConditionFalse, "PodsNotReady")}, after: []metav1.Condition{c("Ready", metav1.ConditionTrue, "PodsReady")}, want: []string{"Ready"}},
		{name: "no change", before: []metav1.Condition{c("Ready", metav1.ConditionTrue, "PodsReady")}, after: []metav1.Condition{c("Ready", metav1.ConditionTrue, "PodsReady")}},
		{name: "reason changed", before: []metav1.Condition{c("Ready", metav1.ConditionFalse, "PodsNotReady")}, after: []metav1.Condition{c("Ready", metav1.ConditionFalse, "JobComplete"), c("Complete", metav1.ConditionTrue, "JobComplete")}, want: []string{"Ready", "Complete"}},
		{name: "hub conditions are not ours", before: nil, after: []metav1.Condition{c("Bursting", metav1.ConditionTrue, "BurstsApplied")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, c := range memberConditions.Moved(tt.before, tt.after) {
				got = append(got, c.Type)
			}
			require.Equal(t, tt.want, got)
		})
	}
}
