package member

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// updateStatus writes the status fields this reconciler owns when they changed, then records an
// event for each condition that moved. Status is written with server-side apply under the
// member's field owner: the hub writes its own fields of the same status the same way.
func (r *Reconciler) updateStatus(ctx context.Context, mc *fluxv1alpha2.MiniCluster, obs observation) error {
	key := client.ObjectKeyFromObject(mc)
	if v, ok := r.statusWrittenAt.Load(key); ok && v == mc.ResourceVersion {
		return nil
	}
	st := computeStatus(mc, obs, metav1.NewTime(r.clock()))
	if !statusChanged(mc.Status, st) {
		return nil
	}
	u, err := statusApplyObject(mc, st)
	if err != nil {
		return err
	}
	if err := r.client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(fluxv1alpha2.FieldOwnerMember), client.ForceOwnership); err != nil {
		return fmt.Errorf("writing the status: %w", err)
	}
	r.statusWrittenAt.Store(key, mc.ResourceVersion)
	for _, c := range transitions(mc.Status.Conditions, st.Conditions) {
		eventType := corev1.EventTypeNormal
		if (c.Type == fluxv1alpha2.ConditionFailed && c.Status == metav1.ConditionTrue) ||
			(c.Type == fluxv1alpha2.ConditionReady && c.Status == metav1.ConditionFalse && c.Reason != fluxv1alpha2.ReasonJobComplete) {
			eventType = corev1.EventTypeWarning
		}
		// The action is the condition type: the events library folds events with the same reason and
		// action into one series, and two conditions may move for the same reason.
		r.recorder.Eventf(mc, nil, eventType, c.Reason, c.Type, "%s=%s: %s", c.Type, c.Status, c.Message)
	}
	return nil
}

// statusApplyObject is the server-side apply request for the member-owned status fields.
func statusApplyObject(mc *fluxv1alpha2.MiniCluster, st fluxv1alpha2.MiniClusterStatus) (*unstructured.Unstructured, error) {
	status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return nil, fmt.Errorf("encoding the status: %w", err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": status}}
	u.SetGroupVersionKind(fluxv1alpha2.GroupVersion.WithKind("MiniCluster"))
	u.SetNamespace(mc.Namespace)
	u.SetName(mc.Name)
	return u, nil
}

func findCondition(conditions []metav1.Condition, t string) *metav1.Condition {
	return meta.FindStatusCondition(conditions, t)
}
