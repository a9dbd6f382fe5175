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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hub/members"
	"github.com/fluxfed/fluxfed/internal/metrics"
	"github.com/fluxfed/fluxfed/internal/report"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// removeStale deletes, on the members the hub may reach now, the children of root that its plan
// no longer has (a burst moved to another member or namespace, or stopped naming a member),
// those of bursts scaled to size 0, and those the member's owner no longer allows (push marked
// their bursts Withdraw). The root's
// ledger says where to look, so a settled root costs no request. A failed delete is returned, to
// be retried.
func (r *Reconciler) removeStale(ctx context.Context, root *fluxv1alpha2.MiniCluster, p *prover, fed *federation, events *report.Events) error {
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
	return r.deleteOnMembers(ctx, p, root, r.ledgerOf(root), r.reachable(), false, events, func(o fluxv1alpha2.PushedObject) string {
		if reason, planned := why[o.Cluster+"/"+o.Namespace+"/"+childNameOf(o)]; planned {
			return reason
		}
		return "its burst left the member"
	})
}

// unburst handles a live root without bursts to push: the children of the bursts moved off the
// members are deleted on every member the hub reaches, then the hub's status fields and
// finalizer go. What is on a member out of reach is left to the orphan sweep.
func (r *Reconciler) unburst(ctx context.Context, root *fluxv1alpha2.MiniCluster) (reconcile.Result, error) {
	p, err := r.prover(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	events := &report.Events{}
	l := r.ledgerOf(root)
	if err := r.discover(ctx, p, root, l, r.reachable()); err != nil {
		return reconcile.Result{}, err
	}
	if err := r.deleteOnMembers(ctx, p, root, l, r.reachable(), false, events, everything); err != nil {
		events.Record(r.recorder, root)
		return reconcile.Result{}, err
	}
	if err := r.orphan(ctx, l); err != nil {
		events.Record(r.recorder, root)
		return reconcile.Result{}, err
	}
	if err := r.applyStatus(ctx, root, federationStatus{}, nil, events); err != nil {
		return reconcile.Result{}, err
	}
	events.Record(r.recorder, root)
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
	p, err := r.prover(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	l := r.ledgerOf(root)
	// What the cache holds of the root on the members it reaches is looked for too: the ledger
	// names everything the hub created, unless someone rewrote the root's status.
	if err := r.discover(ctx, p, root, l, r.reachable()); err != nil {
		return reconcile.Result{}, err
	}
	var pending, unregistered, ready []string
	for _, name := range l.clusters() {
		switch s := r.members.State(ctx, name); s.Phase {
		case members.PhaseReady:
			ready = append(ready, name)
		case members.PhaseNotRegistered:
			unregistered = append(unregistered, fmt.Sprintf("%s (%s)", name, s.Message))
		default:
			pending = append(pending, fmt.Sprintf("%s (%s)", name, s.Message))
		}
	}
	// A final deletion records no event per child (deleteOnMembers logs them); what this one
	// waits for, or gave up on, is told.
	events := &report.Events{}
	defer events.Record(r.recorder, root)
	if err := r.deleteOnMembers(ctx, p, root, l, ready, true, events, everything); err != nil {
		pending = append(pending, err.Error())
	}
	if len(pending) > 0 {
		left := root.DeletionTimestamp.Add(r.opts.CleanupTimeout).Sub(r.opts.Clock())
		if left > 0 {
			metrics.SetCleanupPending(root.Namespace, root.Name)
			// Told once per wait: each retry would repeat it with a shorter time left.
			if waiting := strings.Join(pending, ", "); r.memory.of(root.UID).waitsFor(waiting) {
				events.Add(corev1.EventTypeWarning, fluxv1alpha2.EventCleanupPending, "DeleteChildren",
					"the children on %s are not deleted yet; retrying for %v", waiting, left.Round(time.Second))
			}
			return reconcile.Result{RequeueAfter: min(left, r.opts.RetryMax/4+time.Second)}, nil
		}
		events.Add(corev1.EventTypeWarning, fluxv1alpha2.EventCleanupIncomplete, "DeleteChildren",
			"gave up waiting after %v for %s; the orphan sweep deletes what is left when the member answers",
			r.opts.CleanupTimeout, strings.Join(pending, ", "))
	}
	if len(unregistered) > 0 {
		events.Add(corev1.EventTypeWarning, fluxv1alpha2.EventCleanupIncomplete, "DeleteChildren",
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
	// The list is always sent, empty too: applied with force, it replaces a list that another
	// field manager wrote, which an apply that left it out would keep.
	orphans := status["orphans"]
	if orphans == nil {
		orphans = []any{}
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"orphans": orphans}}}
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

// deleteOnMembers deletes, on the given members at once, the objects of root's ledger l for which
// remove says why they go (it returns "" for those that stay), forgets them in l, and queues an
// event for each child, saying why (with final, a root being deleted, they are logged instead).
// Only an object that carries the hub's proof for root is deleted (deleteProven); an entry that
// names anything else is forgotten.
func (r *Reconciler) deleteOnMembers(ctx context.Context, p *prover, root *fluxv1alpha2.MiniCluster, l *ledger, names []string, final bool,
	events *report.Events, remove func(fluxv1alpha2.PushedObject) string) error {
	var mu sync.Mutex
	errs := r.forEachMember(ctx, names, func(ctx context.Context, member string) error {
		var selected []fluxv1alpha2.PushedObject
		why := map[string]string{}
		for _, o := range l.on(member) {
			if reason := remove(o); reason != "" {
				selected = append(selected, o)
				why[o.Namespace+"/"+childNameOf(o)] = reason
			}
		}
		deleted, done, err := r.deleteProven(ctx, p, member, selected, root)
		for _, o := range done {
			l.drop(o)
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
			events.Add(corev1.EventTypeNormal, fluxv1alpha2.EventBurstRemoved, "DeleteChild "+member+"/"+child,
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

// deleteProven deletes on member each of objects that is the hub's and root's: each is read
// from the member's API server and deleted only if it carries the hub's proof for root (with
// root nil, for a root that is gone or no longer bursts: an orphan), with the UID it was read
// with as a precondition. It returns what it deleted by child ("namespace/child"), and the
// objects that are done with: deleted, gone, or not the hub's to delete (a record that names
// someone else's object is never acted on).
func (r *Reconciler) deleteProven(ctx context.Context, p *prover, member string, objects []fluxv1alpha2.PushedObject,
	root *fluxv1alpha2.MiniCluster) (map[string][]string, []fluxv1alpha2.PushedObject, error) {
	if len(objects) == 0 {
		return nil, nil, nil
	}
	s := r.members.State(ctx, member)
	if s.Cluster == nil {
		return nil, nil, nil
	}
	log := ctrl.LoggerFrom(ctx)
	deleted := map[string][]string{}
	var done []fluxv1alpha2.PushedObject
	var failed []error
	for _, o := range objects {
		obj := recordedObject(o)
		switch err := s.Cluster.GetAPIReader().Get(ctx, client.ObjectKeyFromObject(obj), obj); {
		case apierrors.IsNotFound(err):
			done = append(done, o)
			continue
		case err != nil:
			failed = append(failed, fmt.Errorf("reading %s: %w", describe(obj), err))
			continue
		}
		origin, ours := p.verify(member, o.Kind, obj)
		switch {
		case ours && root != nil:
			ours = origin.UID == root.UID
		case ours:
			var err error
			if ours, err = r.rootGone(ctx, origin); err != nil {
				failed = append(failed, err)
				continue
			}
		}
		if !ours {
			log.V(1).Info("Leaving alone an object recorded as the hub's that is not", "object", describe(obj), "recordedUID", o.UID)
			done = append(done, o)
			continue
		}
		switch err := deleteByUID(ctx, s.Cluster.GetClient(), obj); {
		case err == nil:
			child := o.Namespace + "/" + childNameOf(o)
			deleted[child] = append(deleted[child], describe(obj))
			done = append(done, o)
		case apierrors.IsConflict(err):
			// Another object of that name since it was read: judged again next time.
		default:
			failed = append(failed, err)
		}
	}
	return deleted, done, errors.Join(failed...)
}

// discover enters in root's ledger l what the caches of the given members hold of the root and
// carries the hub's proof for it: it finds what the hub created even when the root's
// status.pushed does not say so. It costs no request.
func (r *Reconciler) discover(ctx context.Context, p *prover, root *fluxv1alpha2.MiniCluster, l *ledger, names []string) error {
	labels := fluxv1alpha2.RootOrigin(r.opts.Name, root).Labels()
	var errs []error
	for _, member := range names {
		found, err := r.cached(ctx, member, client.MatchingLabels(labels))
		if err != nil {
			errs = append(errs, fmt.Errorf("member %s: %w", member, err))
			continue
		}
		for _, obj := range found {
			if origin, ok := p.verify(member, kindOf(obj), obj); ok && origin.UID == root.UID {
				l.record(member, obj)
			}
		}
	}
	return errors.Join(errs...)
}

// cached returns the children and Secrets that member's cache holds (only the hub's labelled
// objects, in the namespaces it watches), selected by opts; nothing when the hub may not use
// the member now.
func (r *Reconciler) cached(ctx context.Context, member string, opts ...client.ListOption) ([]client.Object, error) {
	s := r.members.State(ctx, member)
	if s.Cluster == nil {
		return nil, nil
	}
	var children fluxv1alpha2.MiniClusterList
	var secrets corev1.SecretList
	if err := s.Cluster.GetClient().List(ctx, &children, opts...); err != nil {
		return nil, fmt.Errorf("listing the children the hub holds: %w", err)
	}
	if err := s.Cluster.GetClient().List(ctx, &secrets, opts...); err != nil {
		return nil, fmt.Errorf("listing the Secrets the hub holds: %w", err)
	}
	out := make([]client.Object, 0, len(children.Items)+len(secrets.Items))
	for i := range children.Items {
		out = append(out, &children.Items[i])
	}
	for i := range secrets.Items {
		out = append(out, &secrets.Items[i])
	}
	return out, nil
}

// Sweep deletes, on every member the hub reaches, what the hub created for roots that are gone
// but could not be deleted with them, and returns what it deleted. It looks where the
// MemberClusters' status.orphans say, and at everything the members' caches hold; it deletes
// only objects that carry the hub's proof for a root that no longer exists (or no longer
// bursts), each read first and deleted with its UID as a precondition.
func (r *Reconciler) Sweep(ctx context.Context) ([]string, error) {
	p, err := r.prover(ctx)
	if err != nil {
		return nil, err
	}
	var list fedv1alpha1.MemberClusterList
	if err := r.client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing the MemberClusters: %w", err)
	}
	hints := map[string][]fluxv1alpha2.PushedObject{}
	for _, mcl := range list.Items {
		for _, o := range mcl.Status.Orphans {
			hints[mcl.Name] = append(hints[mcl.Name], fluxv1alpha2.PushedObject{Cluster: mcl.Name, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, UID: o.UID})
		}
	}
	var mu sync.Mutex
	var deleted []string
	errs := r.forEachMember(ctx, r.reachable(), func(ctx context.Context, member string) error {
		candidates, err := r.orphansIn(ctx, p, member)
		if err != nil {
			return err
		}
		for _, o := range hints[member] {
			if !slices.ContainsFunc(candidates, func(c fluxv1alpha2.PushedObject) bool { return pushedKey(c) == pushedKey(o) }) {
				candidates = append(candidates, o)
			}
		}
		d, done, err := r.deleteProven(ctx, p, member, candidates, nil)
		var forget []fluxv1alpha2.PushedObject
		for _, o := range done {
			if slices.Contains(hints[member], o) {
				forget = append(forget, o)
			}
		}
		if len(forget) > 0 {
			forgotten := map[fedv1alpha1.OrphanObject]bool{}
			for _, o := range forget {
				forgotten[fedv1alpha1.OrphanObject{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, UID: o.UID}] = true
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

// orphansIn returns what member's cache holds that carries the hub's proof for a root that is
// gone.
func (r *Reconciler) orphansIn(ctx context.Context, p *prover, member string) ([]fluxv1alpha2.PushedObject, error) {
	found, err := r.cached(ctx, member)
	if err != nil {
		return nil, err
	}
	var out []fluxv1alpha2.PushedObject
	for _, obj := range found {
		origin, ok := p.verify(member, kindOf(obj), obj)
		if !ok {
			continue
		}
		switch gone, err := r.rootGone(ctx, origin); {
		case err != nil:
			return nil, err
		case gone:
			out = append(out, fluxv1alpha2.PushedObject{Cluster: member, Kind: kindOf(obj), Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: string(obj.GetUID())})
		}
	}
	return out, nil
}

// rootGone reports whether the root origin names no longer exists, or exists but bursts no more
// (its children were deleted and its finalizer released): what the hub created for it is an
// orphan.
func (r *Reconciler) rootGone(ctx context.Context, origin fluxv1alpha2.Origin) (bool, error) {
	root, err := r.rootOf(ctx, origin)
	if err != nil {
		return false, err
	}
	return root == nil || !isRootOfHub(root), nil
}

// childNameOf returns the name of the child a recorded object belongs to: the MiniCluster
// itself, or the one whose CURVE Secret it is.
func childNameOf(p fluxv1alpha2.PushedObject) string {
	if p.Kind == "Secret" {
		return strings.TrimSuffix(p.Name, names.CurveSecretSuffix)
	}
	return p.Name
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
