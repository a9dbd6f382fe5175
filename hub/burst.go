package hub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/bursting"
	"github.com/fluxfed/fluxfed/member/render"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// lead is what the hub found out about a root's lead broker this reconcile.
type lead struct {
	// endpoint is the advertised endpoint; its Address is empty while it is pending.
	endpoint bursting.Endpoint
	// reason and err say where the endpoint came from, or why it is pending or not answering.
	reason string
	err    error
}

// burst reconciles a root with bursts to push: expose, probe, plan, push, report.
func (r *Reconciler) burst(ctx context.Context, root *fluxv1alpha2.MiniCluster) (reconcile.Result, error) {
	if err := bursting.ValidateFederation(root); err != nil {
		return reconcile.Result{}, r.writeInvalid(ctx, root, err)
	}
	ld, err := r.exposeLeadBroker(ctx, root)
	if err != nil {
		return reconcile.Result{}, err
	}

	var result reconcile.Result
	var observations []BurstObservation
	if ld.endpoint.Address == "" {
		// Without an address there is nothing to tell the children: report what exists.
		observations = r.observe(ctx, root)
	} else {
		if ld.err = r.probe(ctx, root, ld.endpoint); ld.err != nil {
			ld.reason = fluxv1alpha2.ReasonNotAnswering
			result.RequeueAfter = r.opts.ProbeInterval
		}
		plan, err := bursting.NewPlan(root, ld.endpoint, r.opts.Name)
		if err != nil {
			return reconcile.Result{}, r.writeInvalid(ctx, root, err)
		}
		if observations, err = r.push(ctx, root, plan); err != nil {
			return reconcile.Result{}, err
		}
		r.removeStale(ctx, root, plan)
		r.reportMove(root, ld.endpoint)
	}

	if err := r.writeStatus(ctx, root, observations, ld); err != nil {
		return reconcile.Result{}, err
	}
	var failed []error
	for _, o := range observations {
		if o.Err != nil {
			failed = append(failed, fmt.Errorf("burst %s on member %s: %w", o.Name, o.Cluster, o.Err))
		}
	}
	if len(failed) > 0 {
		// Retried with backoff; the other members are done.
		return reconcile.Result{}, errors.Join(failed...)
	}
	return result, nil
}

// exposeLeadBroker applies the root's lead broker Service and finds the endpoint to advertise.
// An error is one of the hub's API server; a pending endpoint is in the result.
func (r *Reconciler) exposeLeadBroker(ctx context.Context, root *fluxv1alpha2.MiniCluster) (lead, error) {
	svc, err := r.applyLeadBrokerService(ctx, root)
	if err != nil {
		return lead{}, err
	}
	node, err := r.leadNode(ctx, root)
	if err != nil {
		return lead{}, err
	}
	endpoint, reason, err := AdvertisedEndpoint(root, svc, node)
	return lead{endpoint: endpoint, reason: reason, err: err}, nil
}

// applyLeadBrokerService applies the lead broker Service unless the cached one holds it.
func (r *Reconciler) applyLeadBrokerService(ctx context.Context, root *fluxv1alpha2.MiniCluster) (*corev1.Service, error) {
	u, err := toUnstructured(LeadBrokerService(root))
	if err != nil {
		return nil, err
	}
	u.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(root, fluxv1alpha2.GroupVersion.WithKind("MiniCluster"))})
	if err := render.StampAppliedHash(u); err != nil {
		return nil, err
	}
	current := &corev1.Service{}
	switch err := r.client.Get(ctx, client.ObjectKeyFromObject(u), current); {
	case err == nil:
		if render.UpToDate(current, u) {
			return current, nil
		}
		if owner := metav1.GetControllerOf(current); owner == nil || owner.UID != root.UID {
			return nil, fmt.Errorf("service %s exists and does not belong to this MiniCluster", current.Name)
		}
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading the lead broker Service: %w", err)
	}
	if err := r.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fluxv1alpha2.FieldOwnerHub), client.ForceOwnership); err != nil {
		return nil, fmt.Errorf("applying the lead broker Service: %w", err)
	}
	svc := &corev1.Service{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, svc); err != nil {
		return nil, fmt.Errorf("decoding the lead broker Service: %w", err)
	}
	return svc, nil
}

// leadNode returns the node that runs the root's rank 0, nil when it is not scheduled.
func (r *Reconciler) leadNode(ctx context.Context, root *fluxv1alpha2.MiniCluster) (*corev1.Node, error) {
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(root.Namespace), client.MatchingLabels(LeadBrokerSelector(root))); err != nil {
		return nil, fmt.Errorf("listing the lead broker pod: %w", err)
	}
	var pod *corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if pod == nil || p.CreationTimestamp.After(pod.CreationTimestamp.Time) {
			pod = p
		}
	}
	if pod == nil {
		return nil, nil
	}
	node := &corev1.Node{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading node %s: %w", pod.Spec.NodeName, err)
	}
	return node, nil
}

// probeResult is the last greeting of a root's lead broker.
type probeResult struct {
	endpoint bursting.Endpoint
	err      error
	at       time.Time
}

// probe greets the lead broker at endpoint, at most once per ProbeInterval for an endpoint that
// did not answer, and once per endpoint otherwise.
func (r *Reconciler) probe(ctx context.Context, root *fluxv1alpha2.MiniCluster, endpoint bursting.Endpoint) error {
	now := r.opts.Clock()
	if v, ok := r.probes.Load(root.UID); ok {
		last := v.(probeResult)
		if last.endpoint == endpoint && (last.err == nil || now.Sub(last.at) < r.opts.ProbeInterval) {
			return last.err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.ProbeTimeout)
	defer cancel()
	err := r.opts.Probe(ctx, endpoint.Address, endpoint.Port)
	r.probes.Store(root.UID, probeResult{endpoint: endpoint, err: err, at: now})
	return err
}

// reportMove records an event when the advertised endpoint changed: the children were updated
// with the new one.
func (r *Reconciler) reportMove(root *fluxv1alpha2.MiniCluster, endpoint bursting.Endpoint) {
	old := root.Status.LeadBroker
	if old == nil || old.Address == "" || (old.Address == endpoint.Address && old.Port == endpoint.Port) {
		return
	}
	r.eventf(root, corev1.EventTypeNormal, "LeadBrokerMoved", "UpdateChildren",
		"the lead broker moved from %s:%d to %s; the children were given the new endpoint", old.Address, old.Port, endpoint)
}

// push applies every child of plan to its member, the members in parallel, and returns what
// was observed of each burst; reserved bursts are observed as such. An error is one of the hub
// itself (the root's CURVE Secret cannot be read).
func (r *Reconciler) push(ctx context.Context, root *fluxv1alpha2.MiniCluster, plan *bursting.Plan) ([]BurstObservation, error) {
	cert := &corev1.Secret{}
	certKey := client.ObjectKey{Namespace: root.Namespace, Name: names.CurveSecretName(root)}
	certData := []byte(nil)
	switch err := r.client.Get(ctx, certKey, cert); {
	case err == nil:
		certData = cert.Data[names.KeyCurveCert]
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading the root's CURVE Secret: %w", err)
	}

	observations := r.reserved(root)
	pushed := make([]BurstObservation, len(plan.Children))
	var wg sync.WaitGroup
	for i, child := range plan.Children {
		wg.Go(func() {
			if len(certData) == 0 {
				// The member reconciler creates it in a moment; the Secret's event brings the
				// root back.
				pushed[i] = r.observeChild(ctx, root, child.Burst, child.Cluster, child.Namespace, child.MiniCluster.Spec.Size)
				return
			}
			pushed[i] = r.pushChild(ctx, root, child, certData)
		})
	}
	wg.Wait()
	return append(observations, pushed...), nil
}

// reserved returns the observations of the root's reserved bursts (no cluster).
func (r *Reconciler) reserved(root *fluxv1alpha2.MiniCluster) []BurstObservation {
	var out []BurstObservation
	for _, b := range root.Spec.Flux.Bursting.Clusters {
		if b.Cluster == "" {
			out = append(out, BurstObservation{Name: b.Name, Size: b.Size, Reserved: true})
		}
	}
	return out
}

// observe reads every pushed burst's child as it is, without changing anything.
func (r *Reconciler) observe(ctx context.Context, root *fluxv1alpha2.MiniCluster) []BurstObservation {
	observations := r.reserved(root)
	for _, b := range root.Spec.Flux.Bursting.Clusters {
		if b.Cluster == "" {
			continue
		}
		observations = append(observations, r.observeChild(ctx, root, b.Name, b.Cluster, bursting.ChildNamespace(root, b), b.Size))
	}
	return observations
}

// observeChild reads one burst's child from its member's cache.
func (r *Reconciler) observeChild(ctx context.Context, root *fluxv1alpha2.MiniCluster, burst, member, namespace string, size int32) BurstObservation {
	o := BurstObservation{Name: burst, Cluster: member, Namespace: namespace, Size: size}
	cl, reason, err := r.member(ctx, member)
	if err != nil {
		o.Err, o.ErrReason = err, reason
		return o
	}
	child := &fluxv1alpha2.MiniCluster{}
	switch err := cl.GetClient().Get(ctx, types.NamespacedName{Namespace: namespace, Name: burst}, child); {
	case err == nil:
		if Owns(r.opts.Name, root, child) {
			o.Child = child
		}
	case !apierrors.IsNotFound(err):
		o.Err, o.ErrReason = err, fluxv1alpha2.ReasonMemberUnreachable
	}
	return o
}

// removeStale deletes the children of root that its plan no longer has (a burst was removed,
// or moved to another member or namespace), on every engaged member. Failures are logged and
// retried with the next reconcile; the orphan sweep does not cover a live root.
func (r *Reconciler) removeStale(ctx context.Context, root *fluxv1alpha2.MiniCluster, plan *bursting.Plan) {
	keep := map[string]bool{}
	for _, c := range plan.Children {
		keep[c.Cluster+"/"+c.Namespace+"/"+c.Burst] = true
	}
	var wg sync.WaitGroup
	for _, name := range r.members.ListClusters() {
		cl, err := r.mgr.GetCluster(ctx, name)
		if err != nil {
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, r.opts.MemberTimeout)
			defer cancel()
			deleted, err := r.deleteChildren(ctx, cl, root, cl.GetClient(), func(obj client.Object) bool {
				return !keep[string(name)+"/"+obj.GetNamespace()+"/"+childNameOf(obj)]
			})
			if err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "Removing the children of removed bursts", "member", name)
			}
			for _, d := range deleted {
				r.eventf(root, corev1.EventTypeNormal, "BurstRemoved", "DeleteChild", "deleted %s on member %s: its burst is no longer in the spec", d, name)
			}
		})
	}
	wg.Wait()
}
