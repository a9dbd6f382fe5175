package hub

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/bursting"
	"github.com/fluxfed/fluxfed/hub/policy"
	"github.com/fluxfed/fluxfed/internal/apply"
	"github.com/fluxfed/fluxfed/internal/metrics"
	"github.com/fluxfed/fluxfed/internal/report"
	"github.com/fluxfed/fluxfed/member/render"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// push applies every child of the plan, with the root's CURVE Secret, to its member, the members
// at once, and records the outcome in fed.bursts. Bursts whose member cannot be used now (see
// observe) are left as observed. Until the root's certificate exists (the member reconciler
// creates it in a moment, and its event brings the root back) the children are only read.
//
// Before anything is created, the objects to create are entered in the root's ledger and, when
// the root's status does not name them yet, written there (intend): whenever the hub dies, it
// knows where to look for what it created.
func (r *Reconciler) push(ctx context.Context, root *fluxv1alpha2.MiniCluster, p *prover, fed *federation, events *report.Events) {
	plan := r.pushTargets(ctx, root, fed)
	if plan.waiting {
		fed.requeue = sooner(fed.requeue, scopeWait)
	}
	l := r.ledgerOf(root)
	if len(fed.cert) > 0 {
		if err := r.intend(ctx, root, l, plan.targets); err != nil {
			for _, targets := range plan.targets {
				for _, t := range targets {
					fed.bursts[t.burst].Err = failed(fluxv1alpha2.ReasonApplyFailed, err)
				}
			}
			return
		}
	}
	var waited atomic.Bool
	r.forEachMember(ctx, keys(plan.targets), func(ctx context.Context, member string) error {
		start := time.Now()
		defer func() { metrics.PushDuration.WithLabelValues(member).Observe(time.Since(start).Seconds()) }()
		targets := plan.targets[member]
		state := fed.bursts[targets[0].burst].member
		memory := r.memory.of(root.UID)
		// What was pushed under an earlier epoch of the member is read past its cache: it may
		// have changed while the hub could not see it. A root never pushed while the member has
		// been Ready since the hub first saw it (a new root, most often) trusts the cache, which
		// has watched the member all along: a create finds what the cache misses.
		last, synced := memory.syncedEpoch(member)
		live := last != state.Epoch && (synced || state.Epoch > 1)
		ok := !plan.held[member]
		for _, t := range targets {
			o := &fed.bursts[t.burst]
			child, err := r.pushChild(ctx, p, l, state.Cluster, plan.specs[member], t.child, fed.cert, live)
			o.Child = child
			var wait *waitError
			switch {
			case errors.As(err, &wait):
				o.Waiting, ok = wait.Error(), false
				waited.Store(true)
			case err != nil:
				o.Err, ok = fromMember(err), false
			}
		}
		if ok && len(fed.cert) > 0 {
			memory.setSynced(member, state.Epoch)
		}
		return nil
	})
	if waited.Load() {
		fed.requeue = sooner(fed.requeue, scopeWait)
	}
	r.reportMove(root, fed.lead.endpoint, events)
}

// pushPlan is what push sends where: the children to apply on each member, and why the others
// are not applied.
type pushPlan struct {
	// targets are the bursts to apply, by member.
	targets map[string][]pushTarget
	// specs are the members' MemberCluster specs, by member.
	specs map[string]fedv1alpha1.MemberClusterSpec
	// held names the members where a burst was held back: their pushes are not complete.
	held map[string]bool
	// waiting is true when a burst waits for the hub to watch its namespace on its member.
	waiting bool
}

// pushTarget is a burst whose child is applied, with the child at the size the burst runs at.
type pushTarget struct {
	burst int
	child bursting.Child
}

// pushTargets decides which bursts push applies: those whose member the hub may push to now,
// whose member's owner allows them (what was pushed before the owner tightened the policy is
// withdrawn) and where the hub watches what it would push. The others get their reason in
// fed.bursts.
func (r *Reconciler) pushTargets(ctx context.Context, root *fluxv1alpha2.MiniCluster, fed *federation) pushPlan {
	plan := pushPlan{targets: map[string][]pushTarget{}, specs: map[string]fedv1alpha1.MemberClusterSpec{}, held: map[string]bool{}}
	members := map[string]*fedv1alpha1.MemberCluster{}
	memory := r.memory.of(root.UID)
	children := map[string]bursting.Child{}
	for _, c := range fed.plan.Children {
		children[c.Burst] = c
	}
	for i := range fed.bursts {
		o := &fed.bursts[i]
		if o.Reserved || o.Err != nil || o.Keep || o.Size == 0 {
			continue
		}
		mcl, known := members[o.Cluster]
		if !known {
			mcl = &fedv1alpha1.MemberCluster{}
			if err := r.client.Get(ctx, client.ObjectKey{Name: o.Cluster}, mcl); err != nil {
				o.Err, plan.held[o.Cluster] = failed(fluxv1alpha2.ReasonApplyFailed, fmt.Errorf("reading MemberCluster %s: %w", o.Cluster, err)), true
				continue
			}
			members[o.Cluster], plan.specs[o.Cluster] = mcl, mcl.Spec
		}
		// What the member's owner allows is asked before anything is sent for the burst, once
		// for each version of the root, its lead broker endpoint and the MemberCluster: the
		// check renders the child's pods.
		key := verdictKey{root: root.Generation, endpoint: fed.lead.endpoint.String(), member: mcl.Generation}
		if err := memory.judge(o.Name, key, func() error { return policy.Burst(mcl.Spec, root.Namespace, children[o.Name]) }); err != nil {
			// The owner's refusal withdraws what was pushed; a child that cannot be rendered to be
			// checked is a spec to fix.
			if _, o.Withdraw = ownerRefusal(err); !o.Withdraw {
				err = failed(fluxv1alpha2.ReasonInvalidSpec, err)
			}
			o.Err, plan.held[o.Cluster] = err, true
			continue
		}
		// The hub pushes only where it watches: the member's owner let its identity watch
		// there, and its cache has caught up with the roots (the MemberCluster reconciler
		// widens it in a moment, and the MemberCluster's status brings the root back).
		if !o.member.Watched.Covers(o.Namespace) {
			plan.held[o.Cluster] = true
			if slices.Contains(o.member.Denied, o.Namespace) {
				o.Err = unwatchable(o.Namespace)
			} else {
				o.Keep, plan.waiting = true, true
			}
			continue
		}
		c := children[o.Name]
		if o.Size != c.Size {
			// On-demand scaling runs the burst at another size than its spec's.
			mc, err := c.WithSize(o.Size)
			if err != nil {
				o.Err, plan.held[o.Cluster] = failed(fluxv1alpha2.ReasonApplyFailed, err), true
				continue
			}
			c.MiniCluster = mc
		}
		plan.targets[o.Cluster] = append(plan.targets[o.Cluster], pushTarget{burst: i, child: c})
	}
	return plan
}

// intend enters in the root's ledger the child and CURVE Secret of every target, and when one of
// them is not in the root's status.pushed yet, writes it there first: the hub's other status
// fields are written as they are. A status that cannot be written holds back every create.
func (r *Reconciler) intend(ctx context.Context, root *fluxv1alpha2.MiniCluster, l *ledger, targets map[string][]pushTarget) error {
	var slots []ledgerKey
	for member, ts := range targets {
		for _, t := range ts {
			mc := t.child.MiniCluster
			slots = append(slots, ledgerKey{member, "MiniCluster", mc.Namespace, mc.Name},
				ledgerKey{member, "Secret", mc.Namespace, names.CurveSecretName(mc)})
		}
	}
	if !l.intend(slots) {
		return nil
	}
	st := FederationStatus{Bursts: root.Status.Bursts, Summary: root.Status.BurstSummary, Flux: root.Status.Flux, Pushed: l.list()}
	for _, t := range hubConditions.Types {
		if c := meta.FindStatusCondition(root.Status.Conditions, t); c != nil {
			st.Conditions = append(st.Conditions, *c)
		}
	}
	if err := r.applyStatus(ctx, root, st, r.lastLead(root), &report.Events{}); err != nil {
		return fmt.Errorf("recording in the root's status.pushed what the hub is about to create, which comes first: %w", err)
	}
	l.persist(st.Pushed)
	return nil
}

// scopeWait is how soon a root whose burst waits (for the hub to watch its namespace on the
// member, or for an object left by a root that is gone to be deleted) is looked at again, should
// no event bring it back first.
const scopeWait = 2 * time.Second

// unwatchable is the refusal of a burst into a namespace where the hub's identity on the member
// may not watch what it would push.
func unwatchable(namespace string) error {
	return &policy.NamespaceError{Namespace: namespace, Field: "the member's RBAC", Reason: "the hub's identity on the member may not " +
		"list and watch MiniClusters and Secrets there; its owner grants that with a RoleBinding to ClusterRole fluxfed-hub-burst " +
		"in the namespace (docs/bursting.md)"}
}

// pushChild applies one child and its CURVE Secret to its member and returns the child as
// stored. With live, the member is read past its cache. Without a certificate yet, the child is
// only read.
//
// Only an object that carries the hub's proof for this root is changed, and every object is
// created with that proof. Any other object of the child's name (someone else's MiniCluster, or
// one that forged the root's labels) is a Conflict, left alone, and gets no certificate; one
// that the hub created for a root that is gone is deleted, and the burst waits for it to go.
func (r *Reconciler) pushChild(ctx context.Context, p *prover, l *ledger, cl cluster.Cluster,
	spec fedv1alpha1.MemberClusterSpec, child bursting.Child, cert []byte, live bool) (*fluxv1alpha2.MiniCluster, error) {
	member := child.Cluster
	origin, _ := fluxv1alpha2.OriginOf(child.MiniCluster)
	owns := p.ownedBy(member, "MiniCluster", origin.UID)
	if len(cert) == 0 {
		current := &fluxv1alpha2.MiniCluster{}
		switch err := cl.GetClient().Get(ctx, client.ObjectKeyFromObject(child.MiniCluster), current); {
		case apierrors.IsNotFound(err):
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("reading the child: %w", err)
		case !owns(current):
			return nil, nil
		}
		l.record(member, current)
		return current, nil
	}
	if err := r.ensureNamespace(ctx, cl, child.Cluster, child.Namespace, spec); err != nil {
		return nil, err
	}
	applier := &apply.Applier{Client: cl.GetClient(), Live: cl.GetAPIReader(), FieldOwner: fluxv1alpha2.FieldOwnerHub, LiveOnly: live}
	mc := child.MiniCluster.DeepCopy()
	if err := p.mark(member, "MiniCluster", mc); err != nil {
		return nil, err
	}
	obj, err := applier.Apply(ctx, mc, owns)
	if err != nil {
		if apierrors.IsNotFound(err) {
			r.namespaces.Delete(child.Cluster + "/" + child.Namespace)
			if !r.mayCreateNamespace(spec) {
				return nil, policy.NamespaceMissing(child.Namespace)
			}
		}
		return nil, r.judgeConflict(ctx, p, applier, member, &fluxv1alpha2.MiniCluster{ObjectMeta: metav1.ObjectMeta{
			Namespace: child.Namespace, Name: child.MiniCluster.Name}}, err)
	}
	applied := obj.(*fluxv1alpha2.MiniCluster)
	l.record(member, applied)
	if err := r.pushSecret(ctx, p, l, applier, member, applied, cert); err != nil {
		return applied, err
	}
	return applied, nil
}

// mayCreateNamespace reports whether the hub creates a missing namespace on a member: the
// member's owner lets it (spec.namespaces.create), and the hub was not told never to.
func (r *Reconciler) mayCreateNamespace(spec fedv1alpha1.MemberClusterSpec) bool {
	return !r.opts.SkipNamespaces && policy.MayCreateNamespace(spec.Namespaces)
}

// ensureNamespace creates the child's namespace on the member, when the member's owner lets the
// hub, unless it is known to exist. A namespace the hub creates enforces the member's Pod
// Security level. An existing namespace is never changed.
func (r *Reconciler) ensureNamespace(ctx context.Context, cl cluster.Cluster, member, namespace string, spec fedv1alpha1.MemberClusterSpec) error {
	if !r.mayCreateNamespace(spec) {
		return nil
	}
	key := member + "/" + namespace
	if v, ok := r.namespaces.Load(key); ok && v == cl {
		return nil
	}
	labels := policy.NamespaceLabels(spec.PodSecurity.Level)
	labels[fluxv1alpha2.LabelOriginHub] = r.opts.Name
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: labels}}
	if err := cl.GetClient().Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", namespace, err)
	}
	r.namespaces.Store(key, cl)
	return nil
}

// pushSecret applies the child's CURVE Secret: the root's certificate, byte for byte, owned by
// the child so that the member deletes it with the child, and records it in l as stored. The
// data of the Secret is immutable: one the hub pushed with another certificate (the root's was
// generated anew) is replaced.
func (r *Reconciler) pushSecret(ctx context.Context, p *prover, l *ledger, applier *apply.Applier, member string,
	child *fluxv1alpha2.MiniCluster, cert []byte) error {
	origin, _ := fluxv1alpha2.OriginOf(child)
	owns := p.ownedBy(member, "Secret", origin.UID)
	secret := render.CurveSecret(child, cert)
	secret.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}
	origin.Mark(secret)
	if err := p.mark(member, "Secret", secret); err != nil {
		return err
	}
	secret.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: fluxv1alpha2.GroupVersion.String(), Kind: "MiniCluster", Name: child.Name, UID: child.UID, Controller: ptr.To(true),
	}}
	obj, err := applier.Apply(ctx, secret, owns)
	var refusal *apply.Refusal
	if errors.As(err, &refusal) && refusal.Reason == fluxv1alpha2.ReasonImmutableFieldChanged {
		current := &corev1.Secret{}
		if err := applier.Live.Get(ctx, client.ObjectKeyFromObject(secret), current); err != nil {
			return fmt.Errorf("reading the CURVE Secret to replace: %w", err)
		}
		if !owns(current) {
			return err
		}
		if err := deleteExactly(ctx, applier.Client, current); err != nil {
			return fmt.Errorf("replacing the CURVE Secret: %w", err)
		}
		obj, err = applier.Apply(ctx, secret, owns)
	}
	if err != nil {
		return r.judgeConflict(ctx, p, applier, member, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
			Namespace: secret.Namespace, Name: secret.Name}}, err)
	}
	l.record(member, obj)
	return nil
}

// judgeConflict tells apart, when err refused to apply obj (named by its namespace and name) on
// member because it is not this root's, what is in the way: an object the hub created for a root
// that is gone (an earlier root of the same name, whose children are still going) is deleted,
// and a *waitError returned; one the hub created for a live root is a Conflict that names it; any
// other object is someone else's, and err is returned as it is. Any other error is returned as it
// is.
func (r *Reconciler) judgeConflict(ctx context.Context, p *prover, applier *apply.Applier, member string, obj client.Object, err error) error {
	var refusal *apply.Refusal
	if !errors.As(err, &refusal) || refusal.Reason != fluxv1alpha2.ReasonConflict {
		return err
	}
	kind := kindOf(obj)
	switch gerr := applier.Live.Get(ctx, client.ObjectKeyFromObject(obj), obj); {
	case apierrors.IsNotFound(gerr):
		return fmt.Errorf("%s %s/%s was deleted while it was read; trying again", kind, obj.GetNamespace(), obj.GetName())
	case gerr != nil:
		return fmt.Errorf("reading %s %s/%s, which is in the way: %w", kind, obj.GetNamespace(), obj.GetName(), gerr)
	}
	origin, ours := p.verify(member, kind, obj)
	if !ours {
		return err
	}
	root, rerr := r.rootOf(ctx, origin)
	switch {
	case rerr != nil:
		return rerr
	case root != nil && root.DeletionTimestamp.IsZero():
		return &apply.Refusal{Reason: fluxv1alpha2.ReasonConflict, Object: refusal.Object, Message: fmt.Sprintf(
			"was created by this hub for root %s/%s, which still uses it: give the bursts of one of the roots other names or namespaces",
			origin.Namespace, origin.Name)}
	case root != nil:
		return &waitError{fmt.Sprintf("%s belongs to root %s/%s, which is being deleted with its children; this burst's is created once it is gone",
			refusal.Object, origin.Namespace, origin.Name)}
	}
	if obj.GetDeletionTimestamp().IsZero() {
		if err := deleteByUID(ctx, applier.Client, obj); err != nil {
			return err
		}
		ctrl.LoggerFrom(ctx).Info("Deleted what a root that is gone left in a burst's way", "object", refusal.Object, "root", origin.Namespace+"/"+origin.Name, "rootUID", origin.UID)
	}
	return &waitError{fmt.Sprintf("%s was left by an earlier root %s/%s (uid %s) and is being deleted; this burst's is created once it is gone",
		refusal.Object, origin.Namespace, origin.Name, origin.UID)}
}

// reportMove queues an event when the advertised endpoint changed: the children were given the
// new one.
func (r *Reconciler) reportMove(root *fluxv1alpha2.MiniCluster, endpoint bursting.Endpoint, events *report.Events) {
	old := r.lastLead(root)
	if old == nil || old.Address == "" || (old.Address == endpoint.Address && old.Port == endpoint.Port) {
		return
	}
	events.Add(corev1.EventTypeNormal, fluxv1alpha2.EventLeadBrokerMoved, "UpdateChildren",
		"the lead broker moved from %s:%d to %s; the children were given the new endpoint", old.Address, old.Port, endpoint)
}
