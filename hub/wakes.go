package hub

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

// wakes is the source through which what the hub runs beside the watches wakes roots: the
// followers of Flux instances (fluxstream.go) and the lead prober (leadprobe.go). Once the
// controller started it, it holds the controller's queue, and the context they run in.
type wakes struct {
	mu    sync.Mutex
	ctx   context.Context
	queue workqueue.TypedRateLimitingInterface[mcreconcile.Request]
}

var _ source.TypedSource[mcreconcile.Request] = &wakes{}

// Start keeps the controller's queue; what wakes roots runs until ctx ends.
func (s *wakes) Start(ctx context.Context, queue workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ctx, s.queue = ctx, queue
	return nil
}

// started returns the context what wakes roots runs in, once the controller started.
func (s *wakes) started() (context.Context, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ctx, s.ctx != nil
}

// wake queues a reconcile of the root key after delay.
func (s *wakes) wake(key types.NamespacedName, delay time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queue != nil {
		s.queue.AddAfter(rootRequest(key.Namespace, key.Name), delay)
	}
}

// rootRequest is the request that reconciles the root namespace/name.
func rootRequest(namespace, name string) mcreconcile.Request {
	return mcreconcile.Request{Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}}
}
