package members

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// This file engages a member with the manager's controllers: its cluster built for the scope it
// wants, its cache filled, and the cluster it replaces stopped.

// rescope engages member m again, with a cluster that watches the scope wanted now, when that is
// not the scope its cluster was built for; the cluster in use serves until the new one is
// filled. Callers hold r.mu.
func (r *Registry) rescope(m *member) {
	if m.cluster == nil || m.engaging || m.ctx == nil || m.built.Equal(m.want) {
		return
	}
	m.engaging = true
	go r.engage(m.ctx, m, m.gen, m.cfg)
}

// engage builds member m's cluster for the scope it wants, fills its cache, and engages it with
// the manager's controllers in place of the cluster it had, if any (a new scope). A member whose
// cache does not fill within SyncTimeout is tried again at its next check.
func (r *Registry) engage(ctx context.Context, m *member, gen uint64, cfg *rest.Config) {
	log := ctrl.Log.WithName("members").WithValues("member", m.name)
	fail := func(err error, stop context.CancelFunc) {
		if stop != nil {
			stop()
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if m.gen != gen {
			return
		}
		m.engaging = false
		// Tried again at every health check: said once, until the reason changes.
		if msg := err.Error(); msg != m.engageErr {
			m.engageErr = msg
			log.Info("Could not engage the member; the hub tries again at each health check and logs again only if the reason changes",
				"reason", msg)
		}
	}
	select {
	case <-r.started:
	case <-ctx.Done():
		return
	}
	r.mu.Lock()
	indexers := slices.Clone(r.indexers)
	aware := r.aware
	want, allowed := m.want, m.watched
	r.mu.Unlock()

	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fail(fmt.Errorf("building the member's client: %w", err), nil)
		return
	}
	watched, denied, err := access(ctx, cs, want, allowed)
	if err != nil {
		fail(err, nil)
		return
	}
	r.mu.Lock()
	if m.gen == gen && m.cluster != nil && watched.Equal(m.watched) {
		// The member allows what it allowed before: the cluster in use watches the same.
		changed := !slices.Equal(m.denied, denied)
		m.built, m.denied, m.engaging = want, denied, false
		if m.state.Phase == PhaseReady {
			m.state.Denied = denied
		}
		if changed && r.changed != nil {
			r.changed(m.name)
		}
		r.rescope(m)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	cl, err := cluster.New(cfg, append(slices.Clone(r.opts.ClusterOptions), watched.option())...)
	if err != nil {
		fail(fmt.Errorf("building the member's cluster: %w", err), nil)
		return
	}
	for _, ix := range indexers {
		if err := cl.GetFieldIndexer().IndexField(ctx, ix.obj, ix.field, ix.extract); err != nil {
			fail(fmt.Errorf("indexing %s: %w", ix.field, err), nil)
			return
		}
	}
	clCtx, stop := context.WithCancel(ctx)
	go func() {
		if err := cl.Start(clCtx); err != nil {
			log.Error(err, "Running the member's cache")
		}
	}()
	// The cache is filled before the cluster is engaged: the cluster it replaces serves until
	// then, and the controllers' watches start on a full cache.
	syncCtx, cancel := context.WithTimeout(clCtx, r.opts.SyncTimeout)
	synced := fill(syncCtx, cl)
	cancel()
	if !synced {
		fail(fmt.Errorf("the member's cache did not fill within %v", r.opts.SyncTimeout), stop)
		return
	}
	if err := aware.Engage(clCtx, multicluster.ClusterName(m.name), cl); err != nil {
		fail(err, stop)
		r.mu.Lock()
		defer r.mu.Unlock()
		if m.gen == gen && m.cluster != nil {
			// The controllers may have left the cluster in use for the one that failed: it is
			// engaged again from the start.
			r.disengage(m)
			r.setState(m, State{Phase: PhaseUnknown, Reason: fedv1alpha1.ReasonConnecting, Message: "the hub is connecting to the member again"})
		}
		return
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if m.gen != gen || m.duplicate {
		stop()
		return
	}
	if m.stopCl != nil {
		m.stopCl()
	}
	rescoped := m.cluster != nil
	m.cluster, m.stopCl, m.engaging = cl, stop, false
	m.built, m.watched, m.denied = want, watched, denied
	m.engageErr = ""
	log.Info("Engaged the member", "namespaces", watchedNames(watched), "denied", denied)
	r.setState(m, State{Phase: PhaseReady, Reason: fedv1alpha1.ReasonConnected, Message: "the member answers the hub's health checks"})
	if rescoped && r.changed != nil {
		r.changed(m.name)
	}
	// The scope wanted may have changed while this one was built.
	r.rescope(m)
}

// fill starts the informers of the kinds the hub watches on a member (those its scheme knows)
// and waits for them to sync.
func fill(ctx context.Context, cl cluster.Cluster) bool {
	for _, obj := range []client.Object{&fluxv1alpha2.MiniCluster{}, &corev1.Secret{}} {
		if _, err := apiutil.GVKForObject(obj, cl.GetScheme()); err != nil {
			continue
		}
		if _, err := cl.GetCache().GetInformer(ctx, obj); err != nil {
			return false
		}
	}
	return cl.GetCache().WaitForCacheSync(ctx)
}

// watchedNames is a scope for logs.
func watchedNames(s Scope) any {
	if s.All {
		return "all"
	}
	return s.Namespaces
}

// disengage stops the member's cluster: every controller's watches of it end. Callers hold r.mu.
func (r *Registry) disengage(m *member) {
	if m.stopCl != nil {
		m.stopCl()
	}
	m.cluster, m.stopCl, m.engaging = nil, nil, false
	m.built, m.watched, m.denied = Scope{}, Scope{}, nil
}
