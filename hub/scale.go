package hub

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/flux"
	"github.com/fluxfed/fluxfed/internal/metrics"
	"github.com/fluxfed/fluxfed/internal/report"
	"github.com/fluxfed/fluxfed/internal/text"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// scale sizes the bursts of a root whose spec.flux.bursting.scaling is OnDemand: it applies the
// on-demand rule (flux.Decide) to what the root's instance said, runs the drains and undrains
// it asks for in the lead broker's container, and sets each burst observation's Size to the
// brokers the burst runs from now on. Without OnDemand, or before the instance answered, each
// burst runs the size it was last given (its spec size at first).
//
// The size a burst was given is kept in memory and, across a restart of the hub, in the root's
// status.bursts[].size, so a restarted hub never shrinks a burst that runs jobs.
//
// It returns how soon to look again when ranks will have idled long enough before the next ask
// would come, or right after a step it ran (0 when neither is so), and has the instance asked
// again then, so that a burst shrinks when its idle time is up, on a fresh answer, whatever the
// asks backed off to, and once drained at once.
func (r *Reconciler) scale(ctx context.Context, root *fluxv1alpha2.MiniCluster, fed *federation, obs fluxObservation, events *report.Events) time.Duration {
	onDemand, after := root.Spec.Flux.Bursting.OnDemand()
	if !onDemand || fed.plan == nil || obs.w == nil {
		return 0
	}
	w := obs.w
	w.mu.Lock()
	if w.sizes == nil {
		w.sizes = map[string]int32{}
	}
	var bursts []flux.Burst
	var index []int
	for i := range fed.bursts {
		o := &fed.bursts[i]
		g, ok := group(fed.plan, o.Name)
		if o.Reserved || !ok {
			continue
		}
		size, known := w.sizes[o.Name]
		if !known {
			size = o.Size
			for _, s := range root.Status.Bursts {
				if s.Name == o.Name {
					size = s.Size
				}
			}
		}
		floor := o.Size
		size = min(max(size, floor), o.MaxSize)
		w.sizes[o.Name] = size
		o.Size = size
		bursts = append(bursts, flux.Burst{Name: o.Name, Start: g.Start, Reserved: g.End - g.Start, Floor: int(floor), Running: int(size)})
		index = append(index, i)
	}
	var steps []flux.Step
	var wait time.Duration
	if obs.view != nil && obs.err == nil && !w.stale {
		now := r.opts.Clock()
		steps = flux.Decide(obs.view, bursts, w.idle, now, after)
		if due, ok := flux.NextDown(obs.view, bursts, w.idle, after); ok && due.After(now) && due.Before(w.at.Add(w.interval)) {
			w.interval = due.Sub(w.at)
			wait = due.Sub(now)
		}
	}
	w.mu.Unlock()

	for _, s := range steps {
		var o *BurstObservation
		for j, b := range bursts {
			if b.Name == s.Burst {
				o = &fed.bursts[index[j]]
			}
		}
		if o == nil || o.Err != nil || o.Keep {
			continue // a burst that cannot be pushed now is not resized now
		}
		if len(s.Undrain) > 0 && !r.fluxCommand(ctx, root, events, flux.UndrainArgs(s.Undrain)) {
			continue
		}
		if len(s.Drain) > 0 {
			if !r.fluxCommand(ctx, root, events, flux.DrainArgs(s.Drain)) {
				continue
			}
			// The action names the burst: events of one reason and action are merged into one
			// series, whatever their notes say.
			events.Add(corev1.EventTypeNormal, fluxv1alpha2.EventBurstScaledDown, "Drain "+s.Burst, "drained ranks %s of burst %s in Flux before it shrinks: %s",
				flux.FormatIDSet(s.Drain, false), s.Burst, s.Reason)
		}
		// Ask again right away: the drain or the new brokers change what the instance says, and
		// a drained burst shrinks on the next answer. Nothing else brings the root back then (its
		// status changes only with that answer), so the reconcile comes back in stepFollowUp.
		w.mu.Lock()
		w.stale = true
		w.at = w.at.Add(-w.interval)
		w.interval = r.opts.FluxInterval
		wait = sooner(wait, stepFollowUp)
		if s.Size != int(o.Size) {
			verb, reason := "raised", fluxv1alpha2.EventBurstScaledUp
			if s.Size < int(o.Size) {
				verb, reason = "lowered", fluxv1alpha2.EventBurstScaledDown
			}
			events.Add(corev1.EventTypeNormal, reason, "Scale "+s.Burst, "%s burst %s from %d to %s: %s", verb, s.Burst, o.Size, text.Count(s.Size, "broker", "brokers"), s.Reason)
			metrics.ScaledBurst(root.Namespace, root.Name, s.Burst, o.Size, int32(s.Size))
			o.Size = int32(s.Size)
			w.sizes[s.Burst] = o.Size
		}
		w.mu.Unlock()
	}
	return wait
}

// stepFollowUp is how soon the hub asks the root's instance again after a scaling step: long
// enough for idle ranks to show drained, short enough that the resize follows the drain at once.
const stepFollowUp = time.Second

// fluxCommand runs argv with flux in the root's lead broker container; a failure is an event.
func (r *Reconciler) fluxCommand(ctx context.Context, root *fluxv1alpha2.MiniCluster, events *report.Events, argv []string) bool {
	if _, err := r.runInLead(ctx, root, flux.Command(names.MountPath(root), argv...)); err != nil {
		events.Add(corev1.EventTypeWarning, fluxv1alpha2.EventScalingFailed, "Scale", "%v failed: %v", argv, err)
		return false
	}
	return true
}
