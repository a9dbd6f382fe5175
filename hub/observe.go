package hub

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/bursting"
	"github.com/fluxfed/fluxfed/hub/members"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// observe finds the lead broker's endpoint (svc is its Service as applied, nil if it could not
// be), greets it, plans the federation and asks each burst's member whether it can be used. A
// federation that cannot be planned is an *invalidError.
func (r *Reconciler) observe(ctx context.Context, root *fluxv1alpha2.MiniCluster, svc *corev1.Service, svcErr error) (*federation, error) {
	fed := &federation{}
	if svcErr != nil {
		fed.lead = lead{reason: reasonOf(svcErr), err: svcErr}
	} else {
		node, err := r.leadNode(ctx, root)
		if err != nil {
			return nil, err
		}
		endpoint, reason, err := AdvertisedEndpoint(root, svc, node)
		fed.lead = lead{endpoint: endpoint, reason: reason, err: err}
	}
	if fed.lead.endpoint.Address == "" {
		// Nothing to greet until there is an endpoint again.
		if m, ok := r.memory.peek(root.UID); ok {
			m.forgetProbe()
		}
	} else {
		if fed.lead.err = r.probe(ctx, root, fed.lead); fed.lead.err != nil {
			fed.lead.reason = fluxv1alpha2.ReasonNotAnswering
		}
		// Greeted again, answering or not, so that an endpoint that stops answering is
		// reported within LeadProbeBound: by the lead prober, which wakes the root when the
		// greeting changes, or else by a reconcile each interval.
		if !r.probing.Load() {
			fed.requeue = r.opts.ProbeInterval
		}
		plan, err := bursting.NewPlan(root, fed.lead.endpoint, r.opts.Name)
		if err != nil {
			return nil, &invalidError{err}
		}
		fed.plan = plan
	}
	cert := &corev1.Secret{}
	switch err := r.client.Get(ctx, client.ObjectKey{Namespace: root.Namespace, Name: names.CurveSecretName(root)}, cert); {
	case err == nil:
		fed.cert = cert.Data[names.KeyCurveCert]
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading the root's CURVE Secret: %w", err)
	}

	for _, b := range root.Spec.Flux.Bursting.Clusters {
		o := BurstObservation{Name: b.Name, Cluster: b.Cluster, Namespace: bursting.ChildNamespace(root, b), Size: b.Size, MaxSize: b.Reserved(),
			Reserved: b.Cluster == ""}
		if !o.Reserved {
			o.member = r.members.State(ctx, b.Cluster)
			o.observeMember()
		}
		fed.bursts = append(fed.bursts, o)
	}
	return fed, nil
}

// observeMember records, from the member's state, why a burst cannot be pushed now: the member
// is not registered, or not ready; or that nothing can be said yet (Keep).
func (o *BurstObservation) observeMember() {
	s := o.member
	switch s.Phase {
	case members.PhaseReady:
	case members.PhaseUnknown:
		o.Keep = true
	case members.PhaseNotRegistered:
		o.Err = failed(fluxv1alpha2.ReasonMemberNotFound, errors.New(s.Message))
	case members.PhaseNotReady:
		reason := fluxv1alpha2.ReasonMemberNotReady
		switch s.Reason {
		case fedv1alpha1.ReasonUnreachable:
			// The status says "member X is unreachable: " before it.
			o.Err = failed(fluxv1alpha2.ReasonMemberUnreachable, errors.New(s.Message))
			return
		case fedv1alpha1.ReasonKubeconfigRefused:
			reason = fluxv1alpha2.ReasonKubeconfigRefused
		case fedv1alpha1.ReasonDuplicateCluster:
			reason = fluxv1alpha2.ReasonDuplicateCluster
		}
		o.Err = failed(reason, fmt.Errorf("member %s is not ready (%s): %s", o.Cluster, s.Reason, s.Message))
	}
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

// probe greets the lead broker at the endpoint, at most once per ProbeInterval, whether it
// answered or not (greetLead says how); the lead prober greets it again from then on.
func (r *Reconciler) probe(ctx context.Context, root *fluxv1alpha2.MiniCluster, l lead) error {
	now := r.opts.Clock()
	m := r.memory.of(root.UID)
	if last, ok := m.lastProbe(); ok && last.lead.endpoint == l.endpoint && last.lead.reason == l.reason && now.Sub(last.at) < r.opts.ProbeInterval {
		return last.err
	}
	err := r.greetLead(ctx, l)
	m.setProbe(probeResult{root: client.ObjectKeyFromObject(root), lead: l, err: err, at: now})
	return err
}
