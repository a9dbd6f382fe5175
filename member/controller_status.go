package member

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/internal/report"
)

// updateStatus writes the status fields this reconciler owns when they changed, then records an
// event for each condition that moved and the events the reconcile queued: never before the
// write succeeded, so an event does not tell of a state the status does not show (and a failed
// write, retried, does not repeat it). Status is written with server-side apply under the
// member's field owner: the hub writes its own fields of the same status the same way. An error
// the status cannot name (see errors.go) writes no status: what was observed is incomplete; nor
// does a MiniCluster the cache holds as it was before the last write (report.Status.Lags).
func (r *Reconciler) updateStatus(ctx context.Context, mc *fluxv1alpha2.MiniCluster, obs observation, reconcileErr error) error {
	events := &report.Events{}
	if reported(reconcileErr) && !r.status.Lags(mc) {
		st := computeStatus(mc, obs, reconcileErr, metav1.NewTime(r.clock()))
		if statusChanged(mc.Status, st) {
			if err := r.status.Apply(ctx, mc, &st); err != nil {
				return err
			}
			events.Append(memberConditions.Events(mc.Status.Conditions, st.Conditions)...)
		}
	}
	events.Append(obs.events...)
	events.Record(r.recorder, mc)
	return nil
}
