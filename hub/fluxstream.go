package hub

import (
	"bytes"
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/flux"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// The hub follows the Flux instance of each on-demand root (docs/bursting.md): a follower,
// flux.FollowCommand, runs in the lead broker's container through one exec session that stays
// open, and prints a line whenever a job or the resources change. A line wakes the root, whose
// reconcile then asks the instance at once (flux.ObserveCommand): the ask stays the one source of
// what the instance says, the follower only says when to ask. While a follower runs, the asks
// back off to FluxIntervalMax; without one (the container has no flux python, the exec is
// refused, it ended) the hub asks as often as it did before there were followers.

// followDelay is how long a follower's line waits before it wakes the root: the lines of one
// change (a job that runs at once is allocated, freed and cleaned within milliseconds) wake it
// once.
const followDelay = 100 * time.Millisecond

// firstFollowRetry is the first wait before a follower that ended is started again; the wait
// doubles each time one ends before it ran for FluxIntervalMax, up to FluxIntervalMax.
const firstFollowRetry = time.Second

// follower is one running follower of a root's instance.
type follower struct {
	cancel context.CancelFunc
	// ready is when it said it follows both journals; zero before.
	ready time.Time
}

// follow starts a follower of root's instance when one should run and none does, and stops the
// one that runs when none should. It returns how soon to come back to start one that is not
// due yet (0 when none is awaited). w.mu is held.
func (r *Reconciler) follow(ctx context.Context, root *fluxv1alpha2.MiniCluster, w *fluxWatch) time.Duration {
	onDemand, _ := root.Spec.Flux.Bursting.OnDemand()
	want := onDemand && !root.Spec.Flux.DisableSocket && r.opts.ExecStream != nil &&
		w.view != nil && w.view.Uptime.State == "run"
	if !want {
		if w.follower != nil {
			w.follower.cancel()
			w.follower = nil
		}
		return 0
	}
	if w.follower != nil {
		return 0
	}
	now := r.opts.Clock()
	if wait := w.followAt.Sub(now); wait > 0 {
		return wait
	}
	parent, ok := r.wakes.started()
	if !ok {
		return 0
	}
	pod, container, err := r.leadContainer(ctx, root)
	if err != nil {
		return 0 // the ask says why; the next reconcile tries again
	}
	fctx, cancel := context.WithCancel(parent)
	f := &follower{cancel: cancel}
	w.follower = f
	key := types.NamespacedName{Namespace: root.Namespace, Name: root.Name}
	log := ctrl.LoggerFrom(ctx).WithValues("pod", pod.Name)
	argv := flux.FollowCommand(names.MountPath(root))
	log.V(1).Info("Following the root's Flux instance")
	go func() {
		lines := &lineWriter{line: func(line string) { r.heard(key, w, f, line) }}
		err := r.opts.ExecStream(fctx, pod.Namespace, pod.Name, container, argv, lines)
		cancel()
		r.followerEnded(key, w, f)
		log.V(1).Info("The follower of the root's Flux instance ended; the hub asks it as often as without one until another follows it", "error", err)
	}()
	return 0
}

// heard takes one line of follower f of root key: every line says something changed, so that the
// next reconcile asks at once; flux.FollowReady, that from now on every change is told.
func (r *Reconciler) heard(key types.NamespacedName, w *fluxWatch, f *follower, line string) {
	w.mu.Lock()
	if w.follower != f {
		w.mu.Unlock()
		return
	}
	if line == flux.FollowReady && f.ready.IsZero() {
		f.ready = r.opts.Clock()
	}
	w.woken = true
	w.mu.Unlock()
	r.wakes.wake(key, followDelay)
}

// followerEnded forgets follower f of root key, and wakes the root: what changed while nobody
// followed is read now, and the asks come as often as without a follower.
func (r *Reconciler) followerEnded(key types.NamespacedName, w *fluxWatch, f *follower) {
	w.mu.Lock()
	if w.follower != f {
		w.mu.Unlock()
		return
	}
	now := r.opts.Clock()
	w.follower = nil
	switch {
	case !f.ready.IsZero() && now.Sub(f.ready) >= r.opts.FluxIntervalMax:
		w.followRetry = firstFollowRetry
	default:
		w.followRetry = min(max(2*w.followRetry, firstFollowRetry), r.opts.FluxIntervalMax)
	}
	w.followAt = now.Add(w.followRetry)
	w.interval = min(w.interval, r.opts.FluxInterval)
	w.woken = true
	w.mu.Unlock()
	r.wakes.wake(key, followDelay)
}

// stopFollowing stops the follower of the instance, if one runs: the hub forgets the root (it
// was deleted, or stopped bursting), while its lead broker may run on.
func (w *fluxWatch) stopFollowing() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.follower != nil {
		w.follower.cancel()
		w.follower = nil
	}
}

// followed reports whether a follower runs and follows both journals. w.mu is held.
func (w *fluxWatch) followed() bool { return w.follower != nil && !w.follower.ready.IsZero() }

// eventless reports whether the instance, as view shows it, waits for a change that Flux tells
// its followers nothing of, so that the hub must keep asking as it would without one: the
// instance does not run yet, its queue was stopped while jobs wait (flux queue start has no
// event), or ranks are in housekeeping or torpid (their end has no event of its own).
func eventless(view *flux.View) bool {
	if view == nil || view.Uptime.State != "run" {
		return true
	}
	if view.Uptime.SchedulerStopped && view.Demand().Jobs > 0 {
		return true
	}
	for _, rank := range view.Ranks {
		if rank.Housekeeping || rank.Torpid {
			return true
		}
	}
	return false
}

// lineWriter calls line for each line written to it, without its newline; a line longer than
// maxLine is cut there.
type lineWriter struct {
	buf  []byte
	line func(string)
}

const maxLine = 4 << 10

func (l *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			room := max(maxLine-len(l.buf), 0)
			l.buf = append(l.buf, p[:min(len(p), room)]...)
			return n, nil
		}
		room := max(maxLine-len(l.buf), 0)
		l.buf = append(l.buf, p[:min(i, room)]...)
		l.line(string(l.buf))
		l.buf = l.buf[:0]
		p = p[i+1:]
	}
	return n, nil
}
