package member

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// cleanupPods deletes the broker pods once the Job completed, when spec.cleanup asks for it. It
// runs on the reconcile that first sees the completion: the status written right after records
// Complete=True, so later reconciles do not repeat it.
func (r *Reconciler) cleanupPods(ctx context.Context, mc *fluxv1alpha2.MiniCluster, obs observation) error {
	if !mc.Spec.Cleanup || obs.job == nil || jobCondition(obs.job, batchv1.JobComplete) == nil {
		return nil
	}
	if meta.IsStatusConditionTrue(mc.Status.Conditions, fluxv1alpha2.ConditionComplete) {
		return nil
	}
	ctrl.LoggerFrom(ctx).Info("Deleting the finished broker pods (spec.cleanup)")
	err := r.client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(mc.Namespace),
		client.MatchingLabels(names.SelectorLabels(mc)), client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil {
		return fmt.Errorf("deleting the finished pods: %w", err)
	}
	return nil
}
