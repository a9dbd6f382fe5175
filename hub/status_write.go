package hub

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// writeStatus reports the federation observed this reconcile on the root.
func (r *Reconciler) writeStatus(ctx context.Context, root *fluxv1alpha2.MiniCluster, observations []BurstObservation, ld lead) error {
	// While the endpoint is pending (rank 0 is being rescheduled), the children keep the one they
	// were given, and so does the status: LeadBrokerReachable says it is pending.
	leadStatus := root.Status.LeadBroker
	if ld.endpoint.Address != "" {
		leadStatus = &fluxv1alpha2.LeadBrokerStatus{Address: ld.endpoint.Address, Port: ld.endpoint.Port}
	}
	bursts, conditions := ComputeFederationStatus(root, observations, leadStatus, ld.reason, ld.err, r.now())
	return r.applyStatus(ctx, root, bursts, conditions, leadStatus)
}

// writeInvalid reports a root whose bursts cannot be planned: a terminal condition, nothing
// pushed, until the spec changes.
func (r *Reconciler) writeInvalid(ctx context.Context, root *fluxv1alpha2.MiniCluster, err error) error {
	conditions := InvalidFederationConditions(root, err, r.now())
	return r.applyStatus(ctx, root, nil, conditions, nil)
}

// InvalidFederationConditions returns the hub's conditions of a root whose bursts cannot be
// planned: Bursting and BurstsReady are False with reason InvalidFederation and err as message;
// LeadBrokerReachable is not reported, as nothing is exposed for such a root.
func InvalidFederationConditions(root *fluxv1alpha2.MiniCluster, err error, now metav1.Time) []metav1.Condition {
	var conditions []metav1.Condition
	for _, t := range []string{fluxv1alpha2.ConditionBursting, fluxv1alpha2.ConditionBurstsReady} {
		if c := meta.FindStatusCondition(root.Status.Conditions, t); c != nil {
			conditions = append(conditions, *c)
		}
	}
	for _, t := range []string{fluxv1alpha2.ConditionBursting, fluxv1alpha2.ConditionBurstsReady} {
		meta.SetStatusCondition(&conditions, metav1.Condition{
			Type: t, Status: metav1.ConditionFalse, Reason: fluxv1alpha2.ReasonInvalidFederation,
			Message: err.Error(), ObservedGeneration: root.Generation, LastTransitionTime: now,
		})
	}
	return conditions
}

// applyStatus writes the hub's status fields with server-side apply under the hub's field
// owner, when they changed. The member reconciler owns the other fields and conditions.
func (r *Reconciler) applyStatus(ctx context.Context, root *fluxv1alpha2.MiniCluster, bursts []fluxv1alpha2.BurstStatus,
	conditions []metav1.Condition, leadStatus *fluxv1alpha2.LeadBrokerStatus) error {
	if !federationStatusChanged(root.Status, bursts, conditions, leadStatus) {
		return nil
	}
	st := fluxv1alpha2.MiniClusterStatus{Bursts: bursts, Conditions: conditions, LeadBroker: leadStatus}
	status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return fmt.Errorf("encoding the status: %w", err)
	}
	u := metaApplyObject(root)
	u.Object["status"] = status
	if err := r.client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(fluxv1alpha2.FieldOwnerHub), client.ForceOwnership); err != nil {
		return fmt.Errorf("writing the status: %w", err)
	}
	for _, c := range conditionTransitions(root.Status.Conditions, conditions) {
		eventType := corev1.EventTypeNormal
		if c.Status == metav1.ConditionFalse {
			eventType = corev1.EventTypeWarning
		}
		r.eventf(root, eventType, c.Reason, c.Type, "%s=%s: %s", c.Type, c.Status, c.Message)
	}
	return nil
}

// federationStatusChanged reports whether the hub's fields differ between the current status
// and the computed one, so that an unchanged federation costs no status write.
func federationStatusChanged(current fluxv1alpha2.MiniClusterStatus, bursts []fluxv1alpha2.BurstStatus,
	conditions []metav1.Condition, leadStatus *fluxv1alpha2.LeadBrokerStatus) bool {
	if !equality.Semantic.DeepEqual(current.Bursts, bursts) && (len(current.Bursts) > 0 || len(bursts) > 0) {
		return true
	}
	if !equality.Semantic.DeepEqual(current.LeadBroker, leadStatus) {
		return true
	}
	for _, t := range hubConditions {
		old, c := meta.FindStatusCondition(current.Conditions, t), meta.FindStatusCondition(conditions, t)
		if (old == nil) != (c == nil) || (c != nil && !equality.Semantic.DeepEqual(*old, *c)) {
			return true
		}
	}
	return false
}

// conditionTransitions returns the hub's conditions whose status or reason differs between
// before and after: the moments worth an event. A condition that first appears as False is not
// a transition: nothing happened yet.
func conditionTransitions(before, after []metav1.Condition) []metav1.Condition {
	var out []metav1.Condition
	for _, t := range hubConditions {
		c := meta.FindStatusCondition(after, t)
		if c == nil {
			continue
		}
		old := meta.FindStatusCondition(before, t)
		if old == nil && c.Status == metav1.ConditionFalse {
			continue
		}
		if old == nil || old.Status != c.Status || old.Reason != c.Reason {
			out = append(out, *c)
		}
	}
	return out
}
