package hub

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/bursting"
	"github.com/fluxfed/fluxfed/flux"
	"github.com/fluxfed/fluxfed/internal/report"
	"github.com/fluxfed/fluxfed/internal/text"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// The hub runs flux commands in the lead broker's container (docs/bursting.md).
// +kubebuilder:rbac:groups="",resources=pods/exec,verbs=create

// fluxObservation is what one reconcile knows of the root's instance.
type fluxObservation struct {
	view *flux.View
	err  error
	// lost is set when this reconcile's ask failed otherwise than the one before, and the hub
	// had a view of the instance or got an answer it cannot read: its view is lost.
	lost error
	// next is when to look again.
	next time.Duration
	w    *fluxWatch
}

// reportFlux queues a Warning event when the hub lost its view of the root's instance this
// reconcile: it keeps the last view, and decides no scaling step on it.
func reportFlux(obs fluxObservation, events *report.Events) {
	if obs.lost == nil {
		return
	}
	var unreadable *unreadableError
	if errors.As(obs.lost, &unreadable) {
		events.Add(corev1.EventTypeWarning, fluxv1alpha2.EventFluxUnreadable, "ObserveFlux",
			"the hub cannot read what the root's Flux instance printed, so it decides no scaling step until it can: %v", obs.lost)
		return
	}
	events.Add(corev1.EventTypeWarning, fluxv1alpha2.EventFluxNotAnswering, "ObserveFlux",
		"the root's Flux instance does not answer the hub any more, so it decides no scaling step until it does: %v", obs.lost)
}

// observeFlux asks the root's instance what it sees, unless it was asked less than its interval
// ago and its follower told of no change since, or it is being asked: then the last answer
// stands. It starts or stops the root's follower (fluxstream.go).
func (r *Reconciler) observeFlux(ctx context.Context, root *fluxv1alpha2.MiniCluster) fluxObservation {
	w := r.memory.of(root.UID).fluxWatch()
	now := r.opts.Clock()
	w.mu.Lock()
	due := w.at.IsZero() || now.Sub(w.at) >= w.interval || w.woken
	obs := fluxObservation{view: w.view, err: w.err, next: w.interval - now.Sub(w.at), w: w}
	w.mu.Unlock()
	if !due || !w.asking.TryLock() {
		w.mu.Lock()
		if wait := r.follow(ctx, root, w); wait > 0 {
			obs.next = min(obs.next, wait)
		}
		w.mu.Unlock()
		obs.next = max(obs.next, time.Second)
		return obs
	}
	defer w.asking.Unlock()
	w.mu.Lock()
	w.woken = false // a line heard from now on is after this ask began: it asks again
	w.mu.Unlock()

	view, err := r.askFlux(ctx, root)
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.at.IsZero() || errorText(err) != errorText(w.err) || (err == nil && !reflect.DeepEqual(view, w.view)):
		w.interval = r.opts.FluxInterval
	default:
		w.interval = min(2*w.interval, r.opts.FluxIntervalMax)
	}
	var lost error
	var unreadable *unreadableError
	if err != nil && errorText(err) != errorText(w.err) && (w.view != nil || errors.As(err, &unreadable)) {
		lost = err
	}
	w.at, w.err = now, err
	if err == nil {
		w.view, w.stale = view, false
		w.idle.Observe(view, now)
	}
	// While a follower tells every change, an ask is due only when it tells one, or when what
	// the instance waits for comes without a word to it.
	if err == nil && w.followed() && !eventless(view) {
		w.interval = r.opts.FluxIntervalMax
	}
	next := w.interval
	if wait := r.follow(ctx, root, w); wait > 0 {
		next = min(next, wait)
	}
	return fluxObservation{view: w.view, err: w.err, lost: lost, next: next, w: w}
}

// askFlux runs flux.ObserveCommand in the root's lead broker container.
func (r *Reconciler) askFlux(ctx context.Context, root *fluxv1alpha2.MiniCluster) (*flux.View, error) {
	if root.Spec.Flux.DisableSocket {
		return nil, errors.New("spec.flux.disableSocket is set, so the lead broker's local URI is not at a path the hub can find")
	}
	out, err := r.runInLead(ctx, root, flux.ObserveCommand(names.MountPath(root)))
	if err != nil {
		return nil, err
	}
	view, err := flux.ParseObservation(string(out))
	if err != nil {
		return nil, &unreadableError{fmt.Errorf("reading what flux printed in the lead broker's container: %w", err)}
	}
	return view, nil
}

// runInLead runs argv in the Flux container of the root's running lead broker pod, bounded by
// FluxTimeout.
func (r *Reconciler) runInLead(ctx context.Context, root *fluxv1alpha2.MiniCluster, argv []string) ([]byte, error) {
	pod, container, err := r.leadContainer(ctx, root)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.FluxTimeout)
	defer cancel()
	out, err := r.opts.Exec(ctx, pod.Namespace, pod.Name, container, argv)
	if err != nil {
		return nil, fmt.Errorf("running flux in pod %s, container %s: %w", pod.Name, container, err)
	}
	return out, nil
}

// leadContainer returns the root's running lead broker pod and the name of its Flux container.
func (r *Reconciler) leadContainer(ctx context.Context, root *fluxv1alpha2.MiniCluster) (*corev1.Pod, string, error) {
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(root.Namespace), client.MatchingLabels(LeadBrokerSelector(root))); err != nil {
		return nil, "", fmt.Errorf("listing the lead broker pod: %w", err)
	}
	container := names.FluxContainerName(root)
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && containerRunning(p, container) {
			return p, container, nil
		}
	}
	return nil, "", errors.New("the lead broker's container is not running")
}

func containerRunning(p *corev1.Pod, name string) bool {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == name {
			return s.State.Running != nil
		}
	}
	return false
}

// fluxStatus is status.flux for what was observed. last is status.flux as it was: when the
// instance could not be asked and the hub has no answer of its own (it restarted since), the
// fields last seen are those last recorded, not lost with the hub's memory.
func fluxStatus(obs fluxObservation, last *fluxv1alpha2.FluxStatus) *fluxv1alpha2.FluxStatus {
	if obs.view == nil && obs.err == nil {
		return nil
	}
	st := &fluxv1alpha2.FluxStatus{}
	if obs.view == nil && last != nil {
		*st = *last
	}
	if v := obs.view; v != nil {
		d := v.Demand()
		st.State, st.Size = v.Uptime.State, int32(v.Uptime.Size)
		st.Online = int32(v.Count(0, len(v.Ranks)).Online)
		st.PendingJobs, st.PendingNodes = int32(d.Jobs), int32(d.Nodes)
	}
	if obs.err != nil {
		st.Message = text.Truncate(obs.err.Error(), 4096)
	}
	return st
}

// settleInterval is how soon the hub asks a root's instance again while a burst's ranks are on
// their way in or out of it (brokers that run and are not online yet, ranks online that no
// broker should run any more), for at most JoinTimeout: instead of backing off while nothing
// changed, it sees them arrive or leave within this. A real broker comes online a few seconds
// after its pod starts.
const settleInterval = 2 * time.Second

// joinFlux records on each pushed burst what the root's instance sees of its ranks, and whether
// its running brokers have been missing from it for longer than JoinTimeout. It returns when to
// look again: soon while a burst's ranks are on their way.
func (r *Reconciler) joinFlux(plan *bursting.Plan, obs fluxObservation, bursts []BurstObservation) time.Duration {
	if plan == nil || obs.w == nil {
		return 0
	}
	obs.w.mu.Lock()
	defer obs.w.mu.Unlock()
	now := r.opts.Clock()
	var next time.Duration
	// settle asks again in settleInterval, for a burst on its way since since.
	settle := func(since time.Time) {
		if now.Sub(since) >= r.opts.JoinTimeout {
			return // stuck, not on its way: the asks back off again
		}
		every := min(settleInterval, r.opts.FluxInterval)
		obs.w.interval = min(obs.w.interval, every)
		next = sooner(next, max(every-now.Sub(obs.w.at), time.Second))
	}
	for i := range bursts {
		o := &bursts[i]
		g, ok := group(plan, o.Name)
		if !ok || obs.view == nil || obs.view.Uptime.State != "run" || len(obs.view.Ranks) != len(plan.Root.Hosts) {
			delete(obs.w.waiting, o.Name)
			delete(obs.w.leaving, o.Name)
			continue
		}
		all := obs.view.Count(g.Start, g.End)
		if all.Online > int(o.Size) && !o.Reserved {
			since, ok := obs.w.leaving[o.Name]
			if !ok {
				since = now
				obs.w.leaving[o.Name] = now
			}
			settle(since)
		} else {
			delete(obs.w.leaving, o.Name)
		}
		if o.Reserved {
			delete(obs.w.waiting, o.Name)
			continue
		}
		c := obs.view.Count(g.Start, g.Start+int(o.Size))
		o.Flux = &all
		o.Joined = c.Online >= int(o.Size)
		if o.Joined || !podsReady(*o) {
			delete(obs.w.waiting, o.Name)
			continue
		}
		since, ok := obs.w.waiting[o.Name]
		if !ok {
			since = now
			obs.w.waiting[o.Name] = now
		}
		settle(since)
		if left := r.opts.JoinTimeout - now.Sub(since); left > 0 {
			next = sooner(next, left)
			continue
		}
		// The message names the bound, not the time elapsed, so that it changes only with the
		// state: a stuck burst costs no status write per look.
		o.NotJoining = fmt.Sprintf("its %s, but the root's Flux instance has seen only %d of them online for more than %v: "+
			"check that the member reaches the lead broker at %s and that the brokers hold the root's certificate",
			text.Count(int(o.Size), "broker runs", "brokers run"), c.Online, r.opts.JoinTimeout, plan.Lead)
	}
	return next
}

// group returns the ranks of the burst named name.
func group(plan *bursting.Plan, name string) (bursting.Group, bool) {
	for _, g := range plan.Root.Groups[1:] {
		if g.Name == name {
			return g, true
		}
	}
	return bursting.Group{}, false
}
