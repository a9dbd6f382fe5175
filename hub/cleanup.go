package hub

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// finalize deletes a root's children on every member before the root goes. A member that
// cannot be reached is waited for until CleanupTimeout after the deletion started; then the
// finalizer is released and what is left there is the orphan sweep's.
func (r *Reconciler) finalize(ctx context.Context, root *fluxv1alpha2.MiniCluster) (reconcile.Result, error) {
	if !slices.Contains(root.Finalizers, fluxv1alpha2.FinalizerBursts) {
		return reconcile.Result{}, nil
	}
	// Every engaged member, read live (a child pushed a moment ago may not be cached yet), and
	// every member the spec names, engaged or not.
	names := map[string]bool{}
	for _, n := range r.members.ListClusters() {
		names[string(n)] = false
	}
	for _, b := range root.Spec.Flux.Bursting.Clusters {
		if b.Cluster != "" {
			names[b.Cluster] = true
		}
	}
	var pending, unregistered []string
	for _, name := range slices.Sorted(maps.Keys(names)) {
		cl, reason, err := r.member(ctx, name)
		switch {
		case err != nil && !names[name]:
			continue
		case err != nil && reason == fluxv1alpha2.ReasonMemberUnreachable:
			pending = append(pending, fmt.Sprintf("%s (%v)", name, err))
			continue
		case err != nil:
			// Not registered, or its kubeconfig refused: waiting cannot help. Whatever this hub
			// pushed there is the orphan sweep's once the member is registered again.
			unregistered = append(unregistered, fmt.Sprintf("%s (%v)", name, err))
			continue
		}
		memberCtx, cancel := context.WithTimeout(ctx, r.opts.MemberTimeout)
		deleted, err := r.deleteChildren(memberCtx, cl, root, cl.GetAPIReader(), func(client.Object) bool { return true })
		cancel()
		if err != nil {
			pending = append(pending, fmt.Sprintf("%s (%v)", name, err))
		}
		if len(deleted) > 0 {
			ctrl.LoggerFrom(ctx).Info("Deleted the children of a deleted root", "member", name, "deleted", deleted)
		}
	}
	if len(pending) > 0 {
		left := root.DeletionTimestamp.Add(r.opts.CleanupTimeout).Sub(r.opts.Clock())
		if left > 0 {
			r.eventf(root, corev1.EventTypeWarning, "CleanupPending", "DeleteChildren",
				"the children on %s are not deleted yet; retrying for %v", strings.Join(pending, ", "), left.Round(time.Second))
			return reconcile.Result{RequeueAfter: min(left, r.opts.RetryMax/4+time.Second)}, nil
		}
		r.eventf(root, corev1.EventTypeWarning, "CleanupIncomplete", "DeleteChildren",
			"gave up waiting after %v for %s; the orphan sweep deletes what is left when the member answers",
			r.opts.CleanupTimeout, strings.Join(pending, ", "))
	}
	if len(unregistered) > 0 {
		r.eventf(root, corev1.EventTypeWarning, "CleanupIncomplete", "DeleteChildren",
			"cannot reach %s; the orphan sweep deletes what is left there once the member is registered again", strings.Join(unregistered, ", "))
	}
	r.probes.Delete(root.UID)
	return reconcile.Result{}, r.releaseFinalizer(ctx, root)
}

// unburst handles a live root without bursts to push: the children of the bursts removed from
// its spec are deleted on every engaged member, then the hub's status fields and finalizer go.
func (r *Reconciler) unburst(ctx context.Context, root *fluxv1alpha2.MiniCluster) (reconcile.Result, error) {
	var errs []error
	for _, name := range r.members.ListClusters() {
		cl, err := r.mgr.GetCluster(ctx, name)
		if err != nil {
			continue
		}
		memberCtx, cancel := context.WithTimeout(ctx, r.opts.MemberTimeout)
		deleted, err := r.deleteChildren(memberCtx, cl, root, cl.GetClient(), func(client.Object) bool { return true })
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("member %s: %w", name, err))
		}
		for _, d := range deleted {
			r.eventf(root, corev1.EventTypeNormal, "BurstRemoved", "DeleteChild", "deleted %s on member %s: its burst is no longer in the spec", d, name)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return reconcile.Result{}, err
	}
	if !slices.Contains(root.Finalizers, fluxv1alpha2.FinalizerBursts) {
		return reconcile.Result{}, nil
	}
	if err := r.applyStatus(ctx, root, nil, nil, nil); err != nil {
		return reconcile.Result{}, err
	}
	r.probes.Delete(root.UID)
	return reconcile.Result{}, r.releaseFinalizer(ctx, root)
}

// sweeper runs the orphan sweep every SweepInterval.
type sweeper struct{ r *Reconciler }

func (s *sweeper) Start(ctx context.Context) error {
	ticker := time.NewTicker(s.r.opts.SweepInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			if _, err := s.r.Sweep(ctx); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "Orphan sweep")
			}
		}
	}
}

// NeedLeaderElection is true: only the leading hub deletes.
func (s *sweeper) NeedLeaderElection() bool { return true }

// Sweep deletes, on every engaged member, the children and Secrets this hub pushed for roots
// that no longer exist (or were re-created with another UID), and returns what it deleted.
// Members are read live; the roots are listed after the children, so that a child pushed for
// a root created during the sweep is never taken for an orphan.
func (r *Reconciler) Sweep(ctx context.Context) ([]string, error) {
	var deleted []string
	var errs []error
	for _, name := range r.members.ListClusters() {
		d, err := r.sweepMember(ctx, name)
		deleted = append(deleted, d...)
		if err != nil {
			errs = append(errs, fmt.Errorf("member %s: %w", name, err))
		}
	}
	return deleted, errors.Join(errs...)
}

func (r *Reconciler) sweepMember(ctx context.Context, name multicluster.ClusterName) ([]string, error) {
	cl, err := r.mgr.GetCluster(ctx, name)
	if err != nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.MemberTimeout)
	defer cancel()
	pushed, err := listPushed(ctx, cl.GetAPIReader(), client.MatchingLabels{fluxv1alpha2.LabelOriginHub: r.opts.Name})
	if err != nil {
		return nil, err
	}
	objects := make([]metav1.Object, 0, len(pushed))
	for _, obj := range pushed {
		objects = append(objects, obj)
	}
	if len(objects) == 0 {
		return nil, nil
	}

	var list fluxv1alpha2.MiniClusterList
	if err := r.client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing the roots: %w", err)
	}
	roots := map[types.NamespacedName]types.UID{}
	for _, mc := range list.Items {
		roots[types.NamespacedName{Namespace: mc.Namespace, Name: mc.Name}] = mc.UID
	}
	var deleted []string
	var errs []error
	for _, obj := range Orphans(r.opts.Name, objects, roots) {
		o := obj.(client.Object)
		if err := deleteExactly(ctx, cl.GetClient(), o); err != nil {
			errs = append(errs, err)
			continue
		}
		d := fmt.Sprintf("%s %s/%s on member %s", kindOf(o), o.GetNamespace(), o.GetName(), name)
		ctrl.LoggerFrom(ctx).Info("Deleted an orphan", "object", d)
		deleted = append(deleted, d)
	}
	return deleted, errors.Join(errs...)
}
