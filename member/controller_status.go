package member

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/internal/text"
)

// event is an event for the MiniCluster, queued until its status is written.
type event struct {
	eventType, reason, action, note string
}

// updateStatus writes the status fields this reconciler owns when they changed, then records an
// event for each condition that moved and the events the reconcile queued: never before the
// write succeeded, so an event does not tell of a state the status does not show (and a failed
// write, retried, does not repeat it). Status is written with server-side apply under the
// member's field owner: the hub writes its own fields of the same status the same way. An error
// the status cannot name (see errors.go) writes no status: what was observed is incomplete.
func (r *Reconciler) updateStatus(ctx context.Context, mc *fluxv1alpha2.MiniCluster, obs observation, reconcileErr error) error {
	events := obs.events
	if reported(reconcileErr) && !r.cacheLags(mc) {
		st := computeStatus(mc, obs, reconcileErr, metav1.NewTime(r.clock()))
		if statusChanged(mc.Status, st) {
			if err := r.writeStatus(ctx, mc, st); err != nil {
				return err
			}
			events = append(conditionEvents(mc.Status.Conditions, st.Conditions), events...)
		}
	}
	for _, e := range events {
		// The events API refuses a longer note, and the event with it; the condition keeps the
		// whole message.
		r.recorder.Eventf(mc, nil, e.eventType, e.reason, e.action, "%s", text.Truncate(e.note, text.MaxEventNote))
	}
	return nil
}

// cacheLags reports whether mc is the version the last status write was made on: the cache has
// not seen the write yet, and the same status must not be written again.
func (r *Reconciler) cacheLags(mc *fluxv1alpha2.MiniCluster) bool {
	v, ok := r.statusWrittenAt.Load(client.ObjectKeyFromObject(mc))
	return ok && v == mc.ResourceVersion
}

func (r *Reconciler) writeStatus(ctx context.Context, mc *fluxv1alpha2.MiniCluster, st fluxv1alpha2.MiniClusterStatus) error {
	u, err := statusApplyObject(mc, st)
	if err != nil {
		return err
	}
	if err := r.client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(fluxv1alpha2.FieldOwnerMember), client.ForceOwnership); err != nil {
		return fmt.Errorf("writing the status: %w", err)
	}
	r.statusWrittenAt.Store(client.ObjectKeyFromObject(mc), mc.ResourceVersion)
	return nil
}

// conditionEvents returns an event for each owned condition that moved from before to after.
func conditionEvents(before, after []metav1.Condition) []event {
	var out []event
	for _, c := range transitions(before, after) {
		eventType := corev1.EventTypeNormal
		if (c.Type == fluxv1alpha2.ConditionFailed && c.Status == metav1.ConditionTrue) ||
			(c.Type == fluxv1alpha2.ConditionReady && c.Status == metav1.ConditionFalse && c.Reason != fluxv1alpha2.ReasonJobComplete) {
			eventType = corev1.EventTypeWarning
		}
		// The action is the condition type: the events library folds events with the same reason and
		// action into one series, and two conditions may move for the same reason.
		out = append(out, event{eventType: eventType, reason: c.Reason, action: c.Type,
			note: fmt.Sprintf("%s=%s: %s", c.Type, c.Status, c.Message)})
	}
	return out
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
