package hub

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hub/members"
	"github.com/fluxfed/fluxfed/internal/text"
)

// Reasons of the hub's events on a root.
const (
	// EventBurstRemoved: a child was deleted because its burst left the member (the burst's
	// cluster or namespace changed).
	EventBurstRemoved = "BurstRemoved"
	// EventLeadBrokerMoved: rank 0 moved, and the children were given its new endpoint.
	EventLeadBrokerMoved = "LeadBrokerMoved"
	// EventCleanupPending: the root is being deleted and some members have not answered yet.
	EventCleanupPending = "CleanupPending"
	// EventCleanupIncomplete: the root's finalizer was released with children left on members
	// that did not answer; the orphan sweep deletes them when they do.
	EventCleanupIncomplete = "CleanupIncomplete"
)

// removeStale deletes the children of root that its plan no longer has (a burst moved to another
// member or namespace, or stopped naming a member) on the members it may reach now. The members'
// caches say where they are, so a settled root costs no request. A failed delete is returned, to
// be retried.
func (r *Reconciler) removeStale(ctx context.Context, root *fluxv1alpha2.MiniCluster, fed *federation, events *eventQueue) error {
	if fed.plan == nil {
		return nil
	}
	keep := map[string]bool{}
	for _, c := range fed.plan.Children {
		keep[c.Cluster+"/"+c.Namespace+"/"+c.Burst] = true
	}
	return r.deleteOnMembers(ctx, root, r.reachable(), false, events, func(member string, obj client.Object) bool {
		return !keep[member+"/"+obj.GetNamespace()+"/"+childNameOf(obj)]
	})
}

// unburst handles a live root without bursts to push: the children of the bursts moved off the
// members are deleted on every member the hub reaches, then the hub's status fields and
// finalizer go. What is on a member out of reach is the orphan sweep's.
func (r *Reconciler) unburst(ctx context.Context, root *fluxv1alpha2.MiniCluster) (reconcile.Result, error) {
	events := &eventQueue{}
	if err := r.deleteOnMembers(ctx, root, r.reachable(), false, events, func(string, client.Object) bool { return true }); err != nil {
		events.flush(r.recorder, root)
		return reconcile.Result{}, err
	}
	if err := r.applyStatus(ctx, root, federationStatus{}, nil, events); err != nil {
		return reconcile.Result{}, err
	}
	events.flush(r.recorder, root)
	r.forget(root)
	return reconcile.Result{}, r.releaseFinalizer(ctx, root)
}

// finalize deletes a root's children on its members before the root goes: the members its spec
// names and those whose cache holds its children. A member that is registered but cannot be
// reached now is waited for until CleanupTimeout after the deletion started; one that is not
// registered is not waited for. Then the finalizer is released and what is left is the orphan
// sweep's. Members that have none of the root's children are never waited for.
func (r *Reconciler) finalize(ctx context.Context, root *fluxv1alpha2.MiniCluster) (reconcile.Result, error) {
	if !slices.Contains(root.Finalizers, fluxv1alpha2.FinalizerBursts) {
		return reconcile.Result{}, nil
	}
	names := map[string]bool{}
	for _, b := range root.Spec.Flux.Bursting.Clusters {
		if b.Cluster != "" {
			names[b.Cluster] = true
		}
	}
	for _, name := range r.reachable() {
		if r.holdsChildrenOf(ctx, name, root) {
			names[name] = true
		}
	}
	var pending, unregistered, ready []string
	for _, name := range slices.Sorted(maps.Keys(names)) {
		switch s := r.members.State(ctx, name); s.Phase {
		case members.PhaseReady:
			ready = append(ready, name)
		case members.PhaseNotRegistered:
			unregistered = append(unregistered, fmt.Sprintf("%s (%s)", name, s.Message))
		default:
			pending = append(pending, fmt.Sprintf("%s (%s)", name, s.Message))
		}
	}
	events := &eventQueue{}
	if err := r.deleteOnMembers(ctx, root, ready, true, events, func(string, client.Object) bool { return true }); err != nil {
		pending = append(pending, err.Error())
	}
	if len(pending) > 0 {
		left := root.DeletionTimestamp.Add(r.opts.CleanupTimeout).Sub(r.opts.Clock())
		if left > 0 {
			r.recorder.Eventf(root, nil, corev1.EventTypeWarning, EventCleanupPending, "DeleteChildren",
				"the children on %s are not deleted yet; retrying for %v", strings.Join(pending, ", "), left.Round(time.Second))
			return reconcile.Result{RequeueAfter: min(left, r.opts.RetryMax/4+time.Second)}, nil
		}
		r.recorder.Eventf(root, nil, corev1.EventTypeWarning, EventCleanupIncomplete, "DeleteChildren",
			"gave up waiting after %v for %s; the orphan sweep deletes what is left when the member answers",
			r.opts.CleanupTimeout, strings.Join(pending, ", "))
	}
	if len(unregistered) > 0 {
		r.recorder.Eventf(root, nil, corev1.EventTypeWarning, EventCleanupIncomplete, "DeleteChildren",
			"cannot reach %s; the orphan sweep deletes what is left there once the member is registered again", strings.Join(unregistered, ", "))
	}
	r.forget(root)
	return reconcile.Result{}, r.releaseFinalizer(ctx, root)
}

// reachable returns the members the hub may push to now.
func (r *Reconciler) reachable() []string {
	var out []string
	for _, n := range r.members.ListClusters() {
		out = append(out, string(n))
	}
	return out
}

// holdsChildrenOf reports whether the cache of member holds objects pushed for root.
func (r *Reconciler) holdsChildrenOf(ctx context.Context, member string, root *fluxv1alpha2.MiniCluster) bool {
	s := r.members.State(ctx, member)
	if s.Cluster == nil {
		return false
	}
	objects, err := listPushed(ctx, s.Cluster.GetClient(), client.MatchingLabels(fluxv1alpha2.RootOrigin(r.opts.Name, root).Labels()))
	return err != nil || len(objects) > 0
}

// forget drops what the hub remembers of a root.
func (r *Reconciler) forget(root *fluxv1alpha2.MiniCluster) {
	r.probes.Delete(root.UID)
	r.synced.Range(func(k, _ any) bool {
		if strings.HasPrefix(k.(string), string(root.UID)+"/") {
			r.synced.Delete(k)
		}
		return true
	})
}

// deleteOnMembers deletes, on the given members at once, the objects pushed for root that remove
// selects, and queues an event for each. With live, the members are read past their caches (a
// child pushed a moment ago may not be cached yet). Only objects root provably owns are deleted.
func (r *Reconciler) deleteOnMembers(ctx context.Context, root *fluxv1alpha2.MiniCluster, names []string, live bool,
	events *eventQueue, remove func(member string, obj client.Object) bool) error {
	origin := fluxv1alpha2.RootOrigin(r.opts.Name, root)
	var mu sync.Mutex
	errs := r.forEachMember(ctx, names, func(ctx context.Context, member string) error {
		s := r.members.State(ctx, member)
		if s.Cluster == nil {
			return nil
		}
		var reader client.Reader = s.Cluster.GetClient()
		if live {
			reader = s.Cluster.GetAPIReader()
		}
		objects, err := listPushed(ctx, reader, client.MatchingLabels(origin.Labels()))
		if err != nil {
			return err
		}
		var failed []error
		deleted := map[string][]string{}
		for _, obj := range objects {
			if !origin.Marks(obj) || !remove(member, obj) || obj.GetDeletionTimestamp() != nil {
				continue
			}
			if err := deleteExactly(ctx, s.Cluster.GetClient(), obj); err != nil {
				failed = append(failed, err)
				continue
			}
			child := obj.GetNamespace() + "/" + childNameOf(obj)
			deleted[child] = append(deleted[child], describe(obj))
		}
		// One event per child, with its Secret: the events library folds events of the same
		// reason and action into one series, so the action names the child.
		mu.Lock()
		defer mu.Unlock()
		for _, child := range slices.Sorted(maps.Keys(deleted)) {
			what := strings.Join(deleted[child], " and ")
			if live {
				ctrl.LoggerFrom(ctx).Info("Deleted a child of a deleted root", "deleted", what)
				continue
			}
			events.add(corev1.EventTypeNormal, EventBurstRemoved, text.Truncate("DeleteChild "+member+"/"+child, maxEventAction),
				"deleted %s on member %s: its burst left the member", what, member)
		}
		return errors.Join(failed...)
	})
	var out []error
	for _, name := range slices.Sorted(maps.Keys(errs)) {
		out = append(out, fmt.Errorf("member %s: %w", name, errs[name]))
	}
	return errors.Join(out...)
}

// Sweep deletes, on every member the hub reaches, the children and Secrets this hub pushed for
// roots that no longer exist (or were re-created with another UID), and returns what it deleted.
// Members are read live; the roots are listed after the children, so that a child pushed for a
// root created during the sweep is never taken for an orphan.
func (r *Reconciler) Sweep(ctx context.Context) ([]string, error) {
	var mu sync.Mutex
	var deleted []string
	errs := r.forEachMember(ctx, r.reachable(), func(ctx context.Context, member string) error {
		d, err := r.sweepMember(ctx, member)
		mu.Lock()
		deleted = append(deleted, d...)
		mu.Unlock()
		return err
	})
	var out []error
	for _, name := range slices.Sorted(maps.Keys(errs)) {
		out = append(out, fmt.Errorf("member %s: %w", name, errs[name]))
	}
	slices.Sort(deleted)
	return deleted, errors.Join(out...)
}

func (r *Reconciler) sweepMember(ctx context.Context, member string) ([]string, error) {
	s := r.members.State(ctx, member)
	if s.Cluster == nil {
		return nil, nil
	}
	pushed, err := listPushed(ctx, s.Cluster.GetAPIReader(), client.MatchingLabels{fluxv1alpha2.LabelOriginHub: r.opts.Name})
	if err != nil || len(pushed) == 0 {
		return nil, err
	}
	objects := make([]metav1.Object, 0, len(pushed))
	for _, obj := range pushed {
		objects = append(objects, obj)
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
		if err := deleteExactly(ctx, s.Cluster.GetClient(), o); err != nil {
			errs = append(errs, err)
			continue
		}
		d := describe(o) + " on member " + member
		ctrl.LoggerFrom(ctx).Info("Deleted an orphan", "object", d)
		deleted = append(deleted, d)
	}
	return deleted, errors.Join(errs...)
}

// childNameOf returns the name of the child an object on a member belongs to: the MiniCluster
// itself, or the one a Secret is labelled with.
func childNameOf(obj client.Object) string {
	if _, ok := obj.(*corev1.Secret); ok {
		return obj.GetLabels()[fluxv1alpha2.LabelMiniCluster]
	}
	return obj.GetName()
}

// listPushed lists, through reader, the kinds the hub pushes to a member (child MiniClusters
// and their CURVE Secrets) that match selector.
func listPushed(ctx context.Context, reader client.Reader, selector client.MatchingLabels) ([]client.Object, error) {
	var children fluxv1alpha2.MiniClusterList
	if err := reader.List(ctx, &children, selector); err != nil {
		return nil, fmt.Errorf("listing the children: %w", err)
	}
	var secrets corev1.SecretList
	if err := reader.List(ctx, &secrets, selector); err != nil {
		return nil, fmt.Errorf("listing the CURVE Secrets: %w", err)
	}
	objects := make([]client.Object, 0, len(children.Items)+len(secrets.Items))
	for i := range children.Items {
		objects = append(objects, &children.Items[i])
	}
	for i := range secrets.Items {
		objects = append(objects, &secrets.Items[i])
	}
	return objects, nil
}

// deleteExactly deletes obj as it was read: a changed object (adopted by a re-created root, for
// example) is left alone. An object already gone counts as deleted.
func deleteExactly(ctx context.Context, c client.Client, obj client.Object) error {
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	err := c.Delete(ctx, obj, client.Preconditions{UID: &uid, ResourceVersion: &rv}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s: %w", describe(obj), err)
	}
	return nil
}

// describe names an object pushed to a member: "MiniCluster ns/name" or "Secret ns/name".
func describe(obj client.Object) string {
	kind := "MiniCluster"
	if _, ok := obj.(*corev1.Secret); ok {
		kind = "Secret"
	}
	return kind + " " + obj.GetNamespace() + "/" + obj.GetName()
}

// ensureFinalizer adds the hub's finalizer to root with server-side apply: the hub owns that
// entry of metadata.finalizers and nothing else.
func (r *Reconciler) ensureFinalizer(ctx context.Context, root *fluxv1alpha2.MiniCluster) error {
	if slices.Contains(root.Finalizers, fluxv1alpha2.FinalizerBursts) {
		return nil
	}
	return r.applyFinalizer(ctx, root, []string{fluxv1alpha2.FinalizerBursts})
}

// releaseFinalizer removes the hub's finalizer: applying no finalizers as the hub's field owner
// drops the one entry it owns.
func (r *Reconciler) releaseFinalizer(ctx context.Context, root *fluxv1alpha2.MiniCluster) error {
	if !slices.Contains(root.Finalizers, fluxv1alpha2.FinalizerBursts) {
		return nil
	}
	return r.applyFinalizer(ctx, root, []string{})
}

func (r *Reconciler) applyFinalizer(ctx context.Context, root *fluxv1alpha2.MiniCluster, finalizers []string) error {
	u := metaApplyObject(root)
	u.SetFinalizers(finalizers)
	u.SetUID(root.UID)
	err := r.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fluxv1alpha2.FieldOwnerHub), client.ForceOwnership)
	// Releasing the finalizer of a root that is gone (or re-created: the UID does not match) is
	// done already.
	if apierrors.IsNotFound(err) || (apierrors.IsConflict(err) && len(finalizers) == 0) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("applying the finalizer %s: %w", fluxv1alpha2.FinalizerBursts, err)
	}
	return nil
}

// metaApplyObject is an apply request for root that carries only its identity.
func metaApplyObject(root *fluxv1alpha2.MiniCluster) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(fluxv1alpha2.GroupVersion.WithKind("MiniCluster"))
	u.SetNamespace(root.Namespace)
	u.SetName(root.Name)
	return u
}
