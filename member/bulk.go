package member

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
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
// cores. New MiniClusters that arrive in bulk therefore wait until the creations pause, and are
// then rendered at full speed: kubectl returns as soon as it would alone, and the last object
// exists about when it would have anyway. Everything else (changes, deletions, drift, the
// objects of MiniClusters already rendered) is reconciled at once.

// Defaults of the bulk gate.
const (
	// DefaultBulkPause is how long creations must pause before MiniClusters created in bulk are
	// rendered. kubectl apply creates one object every 5-60 ms, from an idle machine to a busy
	// one.
	DefaultBulkPause = 500 * time.Millisecond
	// BulkCount creations within one pause of each other make a bulk: a few MiniClusters applied
	// together are rendered at once.
	BulkCount = 5
	// DefaultBulkHoldMax bounds how long a MiniCluster waits for a bulk to pause: one that
	// never pauses is rendered in waves.
	DefaultBulkHoldMax = 10 * time.Second
)

// bulkGate holds back MiniClusters created in bulk until the creations pause (or they have
// waited holdMax), then adds them to the queue in the order they were created.
type bulkGate struct {
	pause   time.Duration
	count   int
	holdMax time.Duration
	now     func() time.Time
	// afterFunc starts the release timer: time.AfterFunc, or a recorder in tests.
	afterFunc func(time.Duration, func()) timer

	mu     sync.Mutex
	queue  workqueue.TypedRateLimitingInterface[reconcile.Request]
	recent []time.Time // creations within the last pause, oldest first
	held   []heldRequest
	timer  timer
}

// timer is the part of *time.Timer the gate uses.
type timer interface{ Reset(time.Duration) bool }

type heldRequest struct {
	req   reconcile.Request
	since time.Time
}

func newBulkGate(pause, holdMax time.Duration) *bulkGate {
	return &bulkGate{pause: pause, count: BulkCount, holdMax: holdMax, now: time.Now,
		afterFunc: func(d time.Duration, f func()) timer { return time.AfterFunc(d, f) }}
}

// created takes a MiniCluster created after the cache's first list: it goes to the queue at
// once, unless it is part of a bulk.
func (g *bulkGate) created(req reconcile.Request, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	g.queue = q
	keep := 0
	for keep < len(g.recent) && now.Sub(g.recent[keep]) >= g.pause {
		keep++
	}
	g.recent = append(g.recent[keep:], now)
	if len(g.held) == 0 && len(g.recent) < g.count {
		q.Add(req)
		return
	}
	g.held = append(g.held, heldRequest{req: req, since: now})
	g.schedule(now)
}

// schedule sets the timer to the next release: the pause after the last creation, or the
// oldest held MiniCluster's bound, whichever comes first. Callers hold g.mu.
func (g *bulkGate) schedule(now time.Time) {
	next := g.recent[len(g.recent)-1].Add(g.pause)
	if bound := g.held[0].since.Add(g.holdMax); bound.Before(next) {
		next = bound
	}
	if g.timer == nil {
		g.timer = g.afterFunc(next.Sub(now), g.release)
		return
	}
	g.timer.Reset(next.Sub(now))
}

// release adds to the queue every held MiniCluster once the creations paused, or those that
// waited holdMax while they go on.
func (g *bulkGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.held) == 0 {
		return
	}
	now := g.now()
	paused := now.Sub(g.recent[len(g.recent)-1]) >= g.pause
	n := 0
	for n < len(g.held) && (paused || now.Sub(g.held[n].since) >= g.holdMax) {
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
				g.created(requestFor(e.Object), q)
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

func requestFor(obj client.Object) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}}
}
