package member

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/internal/apply"
)

// TestStatusPhase checks status.phase, the PHASE column, as computeStatus sets it from the
// conditions: Failed first, then Complete, then Running when every pod is ready, else Pending.
func TestStatusPhase(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC))
	complete := batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}
	failed := batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}
	refused := fmt.Errorf("applying: %w", &apply.Refusal{Reason: fluxv1alpha2.ReasonImmutableFieldChanged,
		Object: "Job hpc/flux-sample", Message: "spec.template cannot change"})
	tests := []struct {
		name string
		obs  observation
		err  error
		want fluxv1alpha2.MiniClusterPhase
	}{
		{name: "no job yet", want: fluxv1alpha2.MiniClusterPending},
		{name: "some pods ready", obs: observation{job: job(4, 3)}, want: fluxv1alpha2.MiniClusterPending},
		{name: "waiting for the hub's Secret", obs: observation{job: job(4, 4)},
			err: &waitError{reason: fluxv1alpha2.ReasonCurveSecretPending, message: "waiting for the hub"}, want: fluxv1alpha2.MiniClusterPending},
		{name: "every pod ready", obs: observation{job: job(4, 4)}, want: fluxv1alpha2.MiniClusterRunning},
		{name: "job complete", obs: observation{job: job(4, 0, complete)}, want: fluxv1alpha2.MiniClusterComplete},
		{name: "job failed", obs: observation{job: job(4, 0, failed)}, want: fluxv1alpha2.MiniClusterFailed},
		{name: "a refused change fails while every pod runs", obs: observation{job: job(4, 4)}, err: refused, want: fluxv1alpha2.MiniClusterFailed},
		{name: "a refused change after the job completed", obs: observation{job: job(4, 0, complete)}, err: refused, want: fluxv1alpha2.MiniClusterFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := v1alpha2test.MiniCluster("flux-sample").Namespace("hpc").Size(4).Obj()
			st := computeStatus(mc, tt.obs, tt.err, now)
			require.Equal(t, tt.want, st.Phase)
			// A phase that changed is a status to write.
			require.True(t, statusChanged(fluxv1alpha2.MiniClusterStatus{}, st))
			prev := st
			prev.Phase = ""
			require.True(t, statusChanged(prev, st), "a status without phase is written again with it")
			require.False(t, statusChanged(st, st))
		})
	}
}
