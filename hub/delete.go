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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hub/members"
	"github.com/fluxfed/fluxfed/internal/metrics"
	"github.com/fluxfed/fluxfed/internal/text"
	"github.com/fluxfed/fluxfed/member/render/names"
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

// removeStale deletes, on the members the hub may reach now, the children of root that its plan
// no longer has (a burst moved to another member or namespace, or stopped naming a member),
// those of bursts scaled to size 0, and those the member's owner no longer allows (push marked
// their bursts Withdraw). The root's
// ledger says what there is, so a settled root costs no request. A failed delete is returned, to
// be retried.
func (r *Reconciler) removeStale(ctx context.Context, root *fluxv1alpha2.MiniCluster, fed *federation, events *eventQueue) error {
	if fed.plan == nil {
		return nil
	}
	// Why each planned child goes, by cluster/namespace/burst; "" keeps it.
	why := map[string]string{}
	for _, c := range fed.plan.Children {
		why[c.Cluster+"/"+c.Namespace+"/"+c.Burst] = ""
	}
	for _, o := range fed.bursts {
		k := o.Cluster + "/" + o.Namespace + "/" + o.Name
		switch {
		case o.Withdraw:
			why[k] = "the member's owner no longer allows its burst there"
		case o.Size == 0 && !o.Reserved:
			why[k] = "its burst's size is 0"
		}
	}
	return r.deleteOnMembers(ctx, r.ledgerOf(root), r.reachable(), false, events, func(p fluxv1alpha2.PushedObject) string {
		if reason, planned := why[p.Cluster+"/"+p.Namespace+"/"+childNameOf(p)]; planned {
			return reason
		}
		return "its burst left the member"
	})
}

// unburst handles a live root without bursts to push: the children of the bursts moved off the
// members are deleted on every member the hub reaches, then the hub's status fields and
// finalizer go. What is on a member out of reach is left to the orphan sweep.
func (r *Reconciler) unburst(ctx context.Context, root *fluxv1alpha2.MiniCluster) (reconcile.Result, error) {
	events := &eventQueue{}
	l := r.ledgerOf(root)
	if err := r.deleteOnMembers(ctx, l, r.reachable(), false, events, everything); err != nil {
		events.flush(r.recorder, root)
		return reconcile.Result{}, err
	}
	if err := r.orphan(ctx, l); err != nil {
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

// everything selects every object of a ledger, whose root stopped bursting or is deleted.
func everything(fluxv1alpha2.PushedObject) string { return "its burst left the member" }

// finalize deletes a root's children on its members before the root goes: the members its spec
// names and those its ledger records children on. A member that is registered but cannot be
// reached now is waited for until CleanupTimeout after the deletion started; one that is not
// registered is not waited for. Then the finalizer is released and what is left is the orphan
// sweep's. Members that have none of the root's children are never waited for.
func (r *Reconciler) finalize(ctx context.Context, root *fluxv1alpha2.MiniCluster) (reconcile.Result, error) {
	if !slices.Contains(root.Finalizers, fluxv1alpha2.FinalizerBursts) {
		return reconcile.Result{}, nil
	}
	l := r.ledgerOf(root)
	names := map[string]bool{}
	for _, p := range l.list() {
		names[p.Cluster] = true
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
	if err := r.deleteOnMembers(ctx, l, ready, true, events, everything); err != nil {
		pending = append(pending, err.Error())
	}
	if len(pending) > 0 {
		left := root.DeletionTimestamp.Add(r.opts.CleanupTimeout).Sub(r.opts.Clock())
		if left > 0 {
			metrics.SetCleanupPending(root.Namespace, root.Name)
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
			"cannot reach %s, which is not registered: what the hub created there is left for the member's owner to delete", strings.Join(unregistered, ", "))
	}
	if err := r.orphan(ctx, l); err != nil {
		return reconcile.Result{}, err
	}
	r.forget(root)
	return reconcile.Result{}, r.releaseFinalizer(ctx, root)
}

// orphan hands what is left in a ledger to the orphan sweep: it is recorded in the status of
// each member's MemberCluster, where it outlives the root and a restart of the hub. What was
// created on a member that is no longer registered has nowhere to be recorded, and stays.
func (r *Reconciler) orphan(ctx context.Context, l *ledger) error {
	byMember := map[string][]fedv1alpha1.OrphanObject{}
	for _, p := range l.list() {
		byMember[p.Cluster] = append(byMember[p.Cluster], fedv1alpha1.OrphanObject{Kind: p.Kind, Namespace: p.Namespace, Name: p.Name, UID: p.UID})
	}
	var errs []error
	for _, member := range slices.Sorted(maps.Keys(byMember)) {
		errs = append(errs, r.updateOrphans(ctx, member, func(current []fedv1alpha1.OrphanObject) []fedv1alpha1.OrphanObject {
			out := slices.Clone(current)
			for _, o := range byMember[member] {
				if !slices.Contains(out, o) {
					out = append(out, o)
				}
			}
			return out
		}))
	}
	return errors.Join(errs...)
}

// updateOrphans writes status.orphans of member's MemberCluster as change makes it from the
// current list, read from the API server. A member that is not registered has no list.
func (r *Reconciler) updateOrphans(ctx context.Context, member string, change func([]fedv1alpha1.OrphanObject) []fedv1alpha1.OrphanObject) error {
	r.orphansMu.Lock()
	defer r.orphansMu.Unlock()
	mcl := &fedv1alpha1.MemberCluster{}
	switch err := r.live.Get(ctx, client.ObjectKey{Name: member}, mcl); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading MemberCluster %s: %w", member, err)
	}
	next := change(mcl.Status.Orphans)
	if slices.Equal(next, mcl.Status.Orphans) {
		return nil
	}
	status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&fedv1alpha1.MemberClusterStatus{Orphans: next})
	if err != nil {
		return fmt.Errorf("encoding the orphans: %w", err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"orphans": status["orphans"]}}}
	if len(next) == 0 {
		u.Object["status"] = map[string]any{}
	}
	u.SetGroupVersionKind(fedv1alpha1.GroupVersion.WithKind("MemberCluster"))
	u.SetName(member)
	u.SetUID(mcl.UID)
	if err := r.client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(fieldOwnerOrphans), client.ForceOwnership); err != nil {
		return fmt.Errorf("recording the orphans on MemberCluster %s: %w", member, err)
	}
	return nil
}

// fieldOwnerOrphans owns status.orphans of the MemberClusters; the MemberCluster reconciler,
// under the hub's field owner, owns the rest of their status.
const fieldOwnerOrphans = fluxv1alpha2.FieldOwnerHub + "-orphans"

// reachable returns the members the hub may push to now.
func (r *Reconciler) reachable() []string {
	var out []string
	for _, n := range r.members.ListClusters() {
		out = append(out, string(n))
	}
	return out
}

// forget drops what the hub remembers of a root.
func (r *Reconciler) forget(root *fluxv1alpha2.MiniCluster) {
	r.probes.Delete(root.UID)
	r.fluxWatches.Delete(root.UID)
	r.ledgers.Delete(root.UID)
	r.leads.Delete(root.UID)
	metrics.ForgetRoot(root.Namespace, root.Name)
	r.synced.Range(func(k, _ any) bool {
		if strings.HasPrefix(k.(string), string(root.UID)+"/") {
			r.synced.Delete(k)
		}
		return true
	})
}

// deleteOnMembers deletes, on the given members at once, the objects of ledger l for which remove
// says why they go (it returns "" for those that stay), forgets them in l, and queues an event
// for each child, saying why (with final, a root being
// deleted, they are logged instead). Each is deleted by name with its recorded UID as a
// precondition: an object of that name that the hub did not create is never deleted, and one
// already gone counts as deleted. Nothing is read first, so a settled root costs no request.
func (r *Reconciler) deleteOnMembers(ctx context.Context, l *ledger, names []string, final bool,
	events *eventQueue, remove func(fluxv1alpha2.PushedObject) string) error {
	var mu sync.Mutex
	errs := r.forEachMember(ctx, names, func(ctx context.Context, member string) error {
		var selected []fluxv1alpha2.PushedObject
		why := map[string]string{}
		for _, p := range l.on(member) {
			if reason := remove(p); reason != "" {
				selected = append(selected, p)
				why[p.Namespace+"/"+childNameOf(p)] = reason
			}
		}
		deleted, gone, err := r.deleteRecorded(ctx, member, selected)
		for _, p := range gone {
			l.drop(p)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, child := range slices.Sorted(maps.Keys(deleted)) {
			what := strings.Join(deleted[child], " and ")
			if final {
				ctrl.LoggerFrom(ctx).Info("Deleted a child of a deleted root", "deleted", what)
				continue
			}
			// One event per child, with its Secret: the events library folds events of the
			// same reason and action into one series, so the action names the child.
			events.add(corev1.EventTypeNormal, EventBurstRemoved, text.Truncate("DeleteChild "+member+"/"+child, maxEventAction),
				"deleted %s on member %s: %s", what, member, why[child])
		}
		return err
	})
	var out []error
	for _, name := range slices.Sorted(maps.Keys(errs)) {
		out = append(out, fmt.Errorf("member %s: %w", name, errs[name]))
	}
	return errors.Join(out...)
}

// deleteRecorded deletes the recorded objects on member, each only if it still has its recorded
// UID. It returns what it deleted by child ("namespace/child"), and the objects that are gone
// now (deleted, or not there any more), which the caller forgets.
func (r *Reconciler) deleteRecorded(ctx context.Context, member string, objects []fluxv1alpha2.PushedObject) (map[string][]string, []fluxv1alpha2.PushedObject, error) {
	if len(objects) == 0 {
		return nil, nil, nil
	}
	s := r.members.State(ctx, member)
	if s.Cluster == nil {
		return nil, nil, nil
	}
	deleted := map[string][]string{}
	var gone []fluxv1alpha2.PushedObject
	var failed []error
	for _, p := range objects {
		obj := recordedObject(p)
		uid := types.UID(p.UID)
		err := s.Cluster.GetClient().Delete(ctx, obj, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		switch {
		case err == nil:
			child := p.Namespace + "/" + childNameOf(p)
			deleted[child] = append(deleted[child], describe(obj))
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			// Gone, or another object of that name now (the UID precondition failed): not ours.
		default:
			failed = append(failed, fmt.Errorf("deleting %s: %w", describe(obj), err))
			continue
		}
		gone = append(gone, p)
	}
	return deleted, gone, errors.Join(failed...)
}

// recordedObject returns an object that names p, with its recorded UID.
func recordedObject(p fluxv1alpha2.PushedObject) client.Object {
	meta := metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: types.UID(p.UID)}
	if p.Kind == "Secret" {
		return &corev1.Secret{ObjectMeta: meta}
	}
	return &fluxv1alpha2.MiniCluster{ObjectMeta: meta}
}

// Sweep deletes, on every member the hub reaches, what the hub created for roots that are gone
// but could not be deleted with them (their member did not answer then), and returns what it
// deleted. Only recorded objects with their recorded UIDs are deleted: objects that merely
// carry this hub's labels are never taken for orphans.
func (r *Reconciler) Sweep(ctx context.Context) ([]string, error) {
	var list fedv1alpha1.MemberClusterList
	if err := r.client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing the MemberClusters: %w", err)
	}
	orphans := map[string][]fluxv1alpha2.PushedObject{}
	for _, mcl := range list.Items {
		for _, o := range mcl.Status.Orphans {
			orphans[mcl.Name] = append(orphans[mcl.Name], fluxv1alpha2.PushedObject{Cluster: mcl.Name, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, UID: o.UID})
		}
	}
	if len(orphans) == 0 {
		return nil, nil
	}
	var mu sync.Mutex
	var deleted []string
	errs := r.forEachMember(ctx, r.reachable(), func(ctx context.Context, member string) error {
		d, gone, err := r.deleteRecorded(ctx, member, orphans[member])
		if len(gone) > 0 {
			forgotten := map[fedv1alpha1.OrphanObject]bool{}
			for _, p := range gone {
				forgotten[fedv1alpha1.OrphanObject{Kind: p.Kind, Namespace: p.Namespace, Name: p.Name, UID: p.UID}] = true
			}
			err = errors.Join(err, r.updateOrphans(ctx, member, func(current []fedv1alpha1.OrphanObject) []fedv1alpha1.OrphanObject {
				return slices.DeleteFunc(slices.Clone(current), func(o fedv1alpha1.OrphanObject) bool { return forgotten[o] })
			}))
		}
		mu.Lock()
		defer mu.Unlock()
		for _, objects := range d {
			for _, o := range objects {
				ctrl.LoggerFrom(ctx).Info("Deleted an orphan", "object", o)
				deleted = append(deleted, o+" on member "+member)
			}
		}
		return err
	})
	var out []error
	for _, name := range slices.Sorted(maps.Keys(errs)) {
		out = append(out, fmt.Errorf("member %s: %w", name, errs[name]))
	}
	slices.Sort(deleted)
	return deleted, errors.Join(out...)
}

// childNameOf returns the name of the child a recorded object belongs to: the MiniCluster
// itself, or the one whose CURVE Secret it is.
func childNameOf(p fluxv1alpha2.PushedObject) string {
	if p.Kind == "Secret" {
		return strings.TrimSuffix(p.Name, names.CurveSecretSuffix)
	}
	return p.Name
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
