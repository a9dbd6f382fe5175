package member

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// A user who applies a thousand MiniClusters waits on the API server the manager writes to.
// Each new MiniCluster costs the server about five times what kubectl's create of it cost, so a
// manager that renders them while kubectl is still creating slows kubectl down threefold on two
// cores. New MiniClusters that arrive in bulk therefore wait until the creations slow down, and
// are then rendered at full speed: kubectl returns as soon as it would alone, and the last object
// exists about when it would have anyway, since the server's work is the same. Everything else
// (changes, deletions, drift, the objects of MiniClusters already rendered) is reconciled at once.

// Defaults of the bulk gate.
const (
	// DefaultBulkWindow is the window of the bulk gate: BulkCount creations within it make a
	// bulk, which lasts while they keep coming that fast. kubectl apply creates one object every
	// 5-110 ms, from an idle machine to a busy one.
	DefaultBulkWindow = time.Second
	// BulkCount creations within one window make a bulk: a few MiniClusters applied together,
	// or a steady trickle, are rendered at once.
	BulkCount = 5
	// DefaultBulkHoldMax bounds how long a MiniCluster waits for a bulk to end: one that never
	// ends is rendered in waves.
	DefaultBulkHoldMax = time.Minute
)

// bulkGate holds back MiniClusters created in bulk (BulkCount or more within window) until the
// creations slow below that rate (or they have waited holdMax), then adds them to the queue in
// the order they were created.
type bulkGate struct {
	window  time.Duration
	holdMax time.Duration
	now     func() time.Time
	// afterFunc starts the release timer: time.AfterFunc, or a recorder in tests.
	afterFunc func(time.Duration, func()) timer

	mu     sync.Mutex
	queue  workqueue.TypedRateLimitingInterface[reconcile.Request]
	recent []time.Time // creations within the last window, oldest first
	held   []heldRequest
	timer  timer
}

// timer is the part of *time.Timer the gate uses.
type timer interface{ Reset(time.Duration) bool }

type heldRequest struct {
	req   reconcile.Request
	since time.Time
}

func newBulkGate(window, holdMax time.Duration) *bulkGate {
	return &bulkGate{window: window, holdMax: holdMax, now: time.Now,
		afterFunc: func(d time.Duration, f func()) timer { return time.AfterFunc(d, f) }}
}

// created takes a MiniCluster created after the cache's first list: it goes to the queue at
// once, unless it is part of a bulk.
func (g *bulkGate) created(req reconcile.Request, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	g.queue = q
	g.recent = append(g.recent, now)
	g.forget(now)
	if len(g.held) == 0 && len(g.recent) < BulkCount {
		q.Add(req)
		return
	}
	g.held = append(g.held, heldRequest{req: req, since: now})
	g.schedule(now)
}

// forget drops the creations older than the window. Callers hold g.mu.
func (g *bulkGate) forget(now time.Time) {
	old := 0
	for old < len(g.recent) && now.Sub(g.recent[old]) >= g.window {
		old++
	}
	g.recent = g.recent[old:]
}

// schedule sets the timer to the next release: when, without another creation, fewer than
// BulkCount would be left within the window, or at the oldest held MiniCluster's bound, whichever
// comes first. Callers hold g.mu.
func (g *bulkGate) schedule(now time.Time) {
	next := now
	if len(g.recent) >= BulkCount {
		next = g.recent[len(g.recent)-BulkCount].Add(g.window)
	}
	if bound := g.held[0].since.Add(g.holdMax); bound.Before(next) {
		next = bound
	}
	if g.timer == nil {
		g.timer = g.afterFunc(next.Sub(now), g.release)
		return
	}
	g.timer.Reset(next.Sub(now))
}

// release adds to the queue every held MiniCluster once the creations slowed down, or those that
// waited holdMax while they go on.
func (g *bulkGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.held) == 0 {
		return
	}
	now := g.now()
	g.forget(now)
	ended := len(g.recent) < BulkCount
	n := 0
	for n < len(g.held) && (ended || now.Sub(g.held[n].since) >= g.holdMax) {
		g.queue.Add(g.held[n].req)
		n++
	}
	g.held = append(g.held[:0], g.held[n:]...)
	if len(g.held) > 0 {
		g.schedule(now)
	}
}

// handler returns the event handler of the MiniClusters the cache sees created after its first
// list, and the predicate that keeps exactly those events.
func (g *bulkGate) handler() (handler.EventHandler, predicate.Predicate) {
	return handler.Funcs{
			CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				g.created(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e.Object)}, q)
			},
		}, predicate.Funcs{
			CreateFunc:  func(e event.CreateEvent) bool { return !e.IsInInitialList },
			UpdateFunc:  func(event.UpdateEvent) bool { return false },
			DeleteFunc:  func(event.DeleteEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
		}
}

// everyEventButANewCreation keeps the events of MiniClusters the bulk gate does not take.
var everyEventButANewCreation = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return e.IsInInitialList },
}
