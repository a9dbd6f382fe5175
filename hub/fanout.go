package hub

import (
	"context"
	"sync"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/fluxfed/fluxfed/hub/members"
)

// forEachMember runs fn for every member at once, each with its own MemberTimeout, and returns
// the errors by member: a member that hangs delays the others by no more than its timeout.
func (r *Reconciler) forEachMember(ctx context.Context, names []string, fn func(ctx context.Context, member string) error) map[string]error {
	var mu sync.Mutex
	errs := map[string]error{}
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, r.opts.MemberTimeout)
			defer cancel()
			if err := fn(ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("member", name)), name); err != nil {
				mu.Lock()
				errs[name] = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errs
}

// reachable returns the members the hub may push to now.
func (r *Reconciler) reachable() []string {
	var out []string
	for _, n := range r.members.ListClusters() {
		out = append(out, string(n))
	}
	return out
}

// Members is what the hub asks of its members: the registry (members.Registry).
type Members interface {
	// State returns what the hub knows of a member now.
	State(ctx context.Context, name string) members.State
	// ListClusters returns the members the hub may push to now.
	ListClusters() []multicluster.ClusterName
}
