package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/bursting"
	"github.com/fluxfed/fluxfed/hub/policy"
	"github.com/fluxfed/fluxfed/internal/metrics"
	"github.com/fluxfed/fluxfed/member/apply"
	"github.com/fluxfed/fluxfed/member/render"
)

// exposeLeadBroker applies the root's lead broker Service and returns it as stored. A Service of
// the name that is not the root's is a refusal: it is reported, never taken over.
func (r *Reconciler) exposeLeadBroker(ctx context.Context, root *fluxv1alpha2.MiniCluster) (*corev1.Service, error) {
	u, err := toUnstructured(LeadBrokerService(root))
	if err != nil {
		return nil, err
	}
	u.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(root, fluxv1alpha2.GroupVersion.WithKind("MiniCluster"))})
	applier := &apply.Applier{Client: r.client, Live: r.live, FieldOwner: fluxv1alpha2.FieldOwnerHub}
	obj, err := applier.Apply(ctx, u, apply.ControlledBy(root))
	if err != nil {
		return nil, fmt.Errorf("exposing the lead broker: %w", err)
	}
	return obj.(*corev1.Service), nil
}

// push applies every child of the plan, with the root's CURVE Secret, to its member, the members
// at once, and records the outcome in fed.bursts. Bursts whose member cannot be used now (see
// observe) are left as observed. Until the root's certificate exists (the member reconciler
// creates it in a moment, and its event brings the root back) the children are only read.
func (r *Reconciler) push(ctx context.Context, root *fluxv1alpha2.MiniCluster, fed *federation, events *eventQueue) {
	byMember := map[string][]int{}
	children := map[string]bursting.Child{}
	for _, c := range fed.plan.Children {
		children[c.Burst] = c
	}
	for i, o := range fed.bursts {
		if !o.Reserved && o.Err == nil && !o.Keep && o.Size > 0 {
			byMember[o.Cluster] = append(byMember[o.Cluster], i)
		}
	}
	l := r.ledgerOf(root)
	var waiting atomic.Bool
	r.forEachMember(ctx, keys(byMember), func(ctx context.Context, member string) error {
		start := time.Now()
		defer func() { metrics.PushDuration.WithLabelValues(member).Observe(time.Since(start).Seconds()) }()
		state := fed.bursts[byMember[member][0]].member
		key := syncKey(root, member)
		last, _ := r.synced.Load(key)
		live := last != state.Epoch
		ok := true
		mcl := &fedv1alpha1.MemberCluster{}
		if err := r.client.Get(ctx, client.ObjectKey{Name: member}, mcl); err != nil {
			for _, i := range byMember[member] {
				fed.bursts[i].Err = fmt.Errorf("reading MemberCluster %s: %w", member, err)
			}
			return nil
		}
		for _, i := range byMember[member] {
			o := &fed.bursts[i]
			// What the member's owner allows is asked before anything is sent for the burst;
			// what was pushed before the owner tightened the policy is withdrawn.
			if err := policy.Burst(mcl.Spec, root.Namespace, children[o.Name]); err != nil {
				o.Err, o.ErrReason, ok = err, policyReason(err), false
				o.Withdraw = o.ErrReason != fluxv1alpha2.ReasonInvalidSpec
				continue
			}
			// The hub pushes only where it watches: the member's owner let its identity watch
			// there, and its cache has caught up with the roots (the MemberCluster reconciler
			// widens it in a moment, and the MemberCluster's status brings the root back).
			if !state.Watched.Covers(o.Namespace) {
				ok = false
				if slices.Contains(state.Denied, o.Namespace) {
					o.Err, o.ErrReason = unwatchable(o.Namespace), fluxv1alpha2.ReasonNamespaceNotAllowed
				} else {
					o.Keep = true
					waiting.Store(true)
				}
				continue
			}
			c := children[o.Name]
			if o.Size != c.Size {
				// On-demand scaling runs the burst at another size than its spec's.
				mc, err := c.WithSize(o.Size)
				if err != nil {
					o.Err, ok = err, false
					continue
				}
				c.MiniCluster = mc
			}
			child, err := r.pushChild(ctx, l, state.Cluster, mcl.Spec, c, fed.cert, live)
			o.Child = child
			if err != nil {
				o.Err, o.ErrReason, ok = err, classify(err), false
			}
		}
		if ok && len(fed.cert) > 0 {
			r.synced.Store(key, state.Epoch)
		}
		return nil
	})
	if waiting.Load() && (fed.requeue == 0 || fed.requeue > scopeWait) {
		fed.requeue = scopeWait
	}
	r.reportMove(root, fed.lead.endpoint, events)
}

// scopeWait is how soon a root whose burst waits for the hub to watch its namespace on the
// member is looked at again, should the MemberCluster's status not bring it back first.
const scopeWait = 2 * time.Second

// unwatchable is the refusal of a burst into a namespace where the hub's identity on the member
// may not watch what it would push.
func unwatchable(namespace string) error {
	return &policy.NamespaceError{Namespace: namespace, Field: "the member's RBAC", Reason: "the hub's identity on the member may not " +
		"list and watch MiniClusters and Secrets there; its owner grants that with a RoleBinding to ClusterRole fluxfed-hub-burst " +
		"in the namespace (docs/bursting.md)"}
}

func syncKey(root *fluxv1alpha2.MiniCluster, member string) string {
	return string(root.UID) + "/" + member
}

// pushChild applies one child and its CURVE Secret to its member and returns the child as
// stored. With live, the member is read past its cache. Without a certificate yet, the child is
// only read.
//
// Only what l records is changed: an object of the child's name that the hub did not create for
// this root (someone else's MiniCluster, or one that forged the root's labels) is a Conflict,
// left alone, and gets no certificate. What the hub creates is recorded in l at once.
func (r *Reconciler) pushChild(ctx context.Context, l *ledger, cl cluster.Cluster,
	spec fedv1alpha1.MemberClusterSpec, child bursting.Child, cert []byte, live bool) (*fluxv1alpha2.MiniCluster, error) {
	member := child.Cluster
	owns := func(existing metav1.Object) bool { return l.owns(member, existing) }
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
		return current, nil
	}
	if err := r.ensureNamespace(ctx, cl, child.Cluster, child.Namespace, spec); err != nil {
		return nil, err
	}
	applier := &apply.Applier{Client: cl.GetClient(), Live: cl.GetAPIReader(), FieldOwner: fluxv1alpha2.FieldOwnerHub, LiveOnly: live}
	u, err := toUnstructured(child.MiniCluster)
	if err != nil {
		return nil, err
	}
	obj, err := applier.Apply(ctx, u, owns)
	if err != nil {
		if apierrors.IsNotFound(err) {
			r.namespaces.Delete(child.Cluster + "/" + child.Namespace)
			if !r.mayCreateNamespace(spec) {
				return nil, policy.NamespaceMissing(child.Namespace)
			}
		}
		return nil, err
	}
	applied := obj.(*fluxv1alpha2.MiniCluster)
	l.record(member, applied)
	if err := r.pushSecret(ctx, applier, owns, applied, cert, func(s metav1.Object) { l.record(member, s) }); err != nil {
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
// the child so that the member deletes it with the child, and calls record with it as stored.
// The data of the Secret is immutable: one the hub pushed with another certificate (the root's
// was generated anew) is replaced.
func (r *Reconciler) pushSecret(ctx context.Context, applier *apply.Applier, owns apply.Owns, child *fluxv1alpha2.MiniCluster,
	cert []byte, record func(metav1.Object)) error {
	origin, _ := fluxv1alpha2.OriginOf(child)
	secret := render.CurveSecret(child, cert)
	secret.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}
	origin.Mark(secret)
	secret.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: fluxv1alpha2.GroupVersion.String(), Kind: "MiniCluster", Name: child.Name, UID: child.UID, Controller: ptr.To(true),
	}}
	u, err := toUnstructured(secret)
	if err != nil {
		return err
	}
	obj, err := applier.Apply(ctx, u, owns)
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
		obj, err = applier.Apply(ctx, u, owns)
	}
	if err != nil {
		return err
	}
	record(obj)
	return nil
}

// classify returns the condition reason of an error met pushing to a member: a refusal's own
// reason, ApplyFailed when the member answered and refused, MemberUnreachable when it did not
// answer (or answered that it could not serve).
func classify(err error) string {
	var refusal *apply.Refusal
	if errors.As(err, &refusal) {
		return refusal.Reason
	}
	if reason := policyReason(err); reason != fluxv1alpha2.ReasonInvalidSpec {
		return reason
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code > 0 && status.Status().Code < 500 &&
		!apierrors.IsTimeout(err) && !apierrors.IsTooManyRequests(err) {
		return fluxv1alpha2.ReasonApplyFailed
	}
	return fluxv1alpha2.ReasonMemberUnreachable
}

// policyReason returns the condition reason of a refusal by the member's policy: the namespace,
// the pods' Pod Security level, or else a child that cannot be rendered to be checked.
func policyReason(err error) string {
	var nsErr *policy.NamespaceError
	var podErr *policy.PodSecurityError
	switch {
	case errors.As(err, &nsErr):
		return fluxv1alpha2.ReasonNamespaceNotAllowed
	case errors.As(err, &podErr):
		return fluxv1alpha2.ReasonPodSecurityViolation
	}
	return fluxv1alpha2.ReasonInvalidSpec
}

// reportMove queues an event when the advertised endpoint changed: the children were given the
// new one.
func (r *Reconciler) reportMove(root *fluxv1alpha2.MiniCluster, endpoint bursting.Endpoint, events *eventQueue) {
	old := r.lastLead(root)
	if old == nil || old.Address == "" || (old.Address == endpoint.Address && old.Port == endpoint.Port) {
		return
	}
	events.add(corev1.EventTypeNormal, EventLeadBrokerMoved, "UpdateChildren",
		"the lead broker moved from %s:%d to %s; the children were given the new endpoint", old.Address, old.Port, endpoint)
}

// toUnstructured converts a typed object or apply configuration into the request of a
// server-side apply, without the fields a client never sends (status, creation timestamp).
func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", obj, err)
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(data, &u.Object); err != nil {
		return nil, fmt.Errorf("decoding %T: %w", obj, err)
	}
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
