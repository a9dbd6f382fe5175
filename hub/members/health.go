package members

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
)

// This file is the health check every member gets each HealthInterval, and what a check's result
// does to the member: its phase, its identity, and which registration of a cluster is used.

// HealthUserAgent is the user agent of the hub's health checks of its members, so that a member's
// owner can tell them apart in its audit log.
const HealthUserAgent = "fluxfed-hub/member-health"

// watch checks member m every HealthInterval until ctx ends.
func (r *Registry) watch(ctx context.Context, m *member, gen uint64, cfg *rest.Config) {
	health := rest.CopyConfig(cfg)
	health.UserAgent = HealthUserAgent
	cs, err := kubernetes.NewForConfig(health)
	if err != nil {
		r.mu.Lock()
		if m.gen == gen {
			r.setState(m, State{Phase: PhaseNotReady, Reason: fedv1alpha1.ReasonKubeconfigRefused, Message: err.Error()})
		}
		r.mu.Unlock()
		return
	}
	ticker := time.NewTicker(r.opts.HealthInterval)
	defer ticker.Stop()
	for {
		r.mu.Lock()
		info := m.infoAt.IsZero() || r.opts.Clock().Sub(m.infoAt) >= r.opts.RecordInterval
		// A member without the MiniCluster API is asked again at every check, so that it is used
		// as soon as its owner installed fluxfed; one with it, with the rest of the information
		// (once a RecordInterval), as are the namespaces.
		ask := asking{info: info, crd: info || m.crd != crdServed}
		if info || !m.spaces.checked {
			ask.namespaces, ask.create = slices.Clone(m.namespaces), m.create
			ask.spaces = true
		}
		r.mu.Unlock()
		result := r.check(ctx, cs, ask)
		if ctx.Err() != nil {
			return
		}
		r.record(ctx, m, gen, cfg, result)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// asking is what one health check asks besides the cluster ID: info (version and nodes), crd
// (whether the member serves the MiniCluster API), spaces (the namespaces).
type asking struct {
	info, crd, spaces bool
	namespaces        []string
	create            bool
}

// checkResult is one health check.
type checkResult struct {
	err error
	// denied is true when the member refused the credentials (401) or what they may do (403):
	// definitive, no threshold; unauthorized tells the first.
	denied, unauthorized bool
	clusterID            string
	// crd is what was found of the MiniCluster API, crdUnknown when not asked.
	crd crdState
	// spaces is what was found of the namespaces, when asked.
	spaces *namespaceReport
	// info is true when version and nodes were read.
	info    bool
	version string
	nodes   *int32
}

// check reads the member's kube-system namespace, whose UID identifies the cluster; with info,
// also its version and node count. A member may not let the hub list nodes: then nodes is nil.
func (r *Registry) check(ctx context.Context, cs kubernetes.Interface, ask asking) checkResult {
	ctx, cancel := context.WithTimeout(ctx, r.opts.HealthTimeout)
	defer cancel()
	ns, err := cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		unauthorized := apierrors.IsUnauthorized(err)
		return checkResult{err: err, denied: unauthorized || apierrors.IsForbidden(err), unauthorized: unauthorized}
	}
	res := checkResult{clusterID: string(ns.UID)}
	if ask.crd {
		served, err := servesMiniClusters(ctx, cs)
		if err != nil {
			return checkResult{err: err}
		}
		res.crd = crdMissing
		if served {
			res.crd = crdServed
		}
	}
	if ask.spaces && res.crd != crdMissing {
		// A failure here says nothing of the member's health: the namespaces are looked at
		// again at the next check.
		if rep, err := checkNamespaces(ctx, cs, ask.namespaces, ask.create); err == nil {
			res.spaces = &rep
		}
	}
	if !ask.info {
		return res
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return checkResult{err: fmt.Errorf("reading the version: %w", err)}
	}
	res.info, res.version = true, v.GitVersion
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
	if err == nil {
		n := int32(len(nodes.Items))
		if nodes.RemainingItemCount != nil {
			n += int32(*nodes.RemainingItemCount)
		}
		res.nodes = &n
	}
	return res
}

// record applies a health check's result to member m, if it is still for the same kubeconfig.
func (r *Registry) record(ctx context.Context, m *member, gen uint64, cfg *rest.Config, res checkResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m.gen != gen {
		return
	}
	now := r.opts.Clock()
	if res.err != nil {
		m.fails++
		switch {
		case res.unauthorized:
			r.setState(m, State{Phase: PhaseNotReady, Reason: fedv1alpha1.ReasonCredentialsRefused, Message: refusedMessage(m, now)})
		case res.denied:
			r.setState(m, State{Phase: PhaseNotReady, Reason: fedv1alpha1.ReasonAccessDenied, Message: fmt.Sprintf(
				"the member accepted the hub's credentials but forbids what the health check reads: %v; "+
					"the hub's role on the member needs get on namespace kube-system (deploy/member-access)", res.err)})
		case m.fails >= r.opts.FailureThreshold:
			r.setState(m, State{Phase: PhaseNotReady, Reason: fedv1alpha1.ReasonUnreachable, Message: fmt.Sprintf(
				"the member's API server did not answer %d health checks in a row: %v", m.fails, res.err)})
		}
		return
	}
	m.fails, m.lastSeen = 0, now
	idChanged := m.clusterID != res.clusterID
	m.clusterID = res.clusterID
	if res.info {
		if m.version != res.version || !equalPtr(m.nodes, res.nodes) {
			idChanged = true
		}
		m.version, m.nodes, m.infoAt = res.version, res.nodes, now
	}
	if first := r.firstOf(m); first != "" {
		m.duplicate = true
		r.disengage(m)
		r.setState(m, State{Phase: PhaseNotReady, Reason: fedv1alpha1.ReasonDuplicateCluster, Message: fmt.Sprintf(
			"this is cluster %s, which MemberCluster %s registers already; this registration is never used: delete it", m.clusterID, first)})
		return
	}
	m.duplicate = false
	if res.crd != crdUnknown && res.crd != m.crd {
		m.crd, idChanged = res.crd, true
	}
	if res.spaces != nil && !res.spaces.equal(m.spaces) {
		m.spaces, idChanged = *res.spaces, true
	}
	switch {
	case m.crd == crdMissing:
		// Nothing can be pushed there, and a cache of MiniClusters would never fill: the
		// member is not engaged (an engaged one stays so, as through an outage) until the
		// MiniCluster API is served.
		r.setState(m, State{Phase: PhaseNotReady, Reason: fedv1alpha1.ReasonFluxfedMissing, Message: fluxfedMissing()})
	case m.cluster != nil:
		r.setState(m, State{Phase: PhaseReady, Reason: fedv1alpha1.ReasonConnected, Message: "the member answers the hub's health checks"})
		if res.info && len(m.denied) > 0 {
			// The member's owner may have granted the hub a namespace since: ask again.
			m.built = Scope{}
		}
		r.rescope(m)
	case !m.engaging:
		m.engaging = true
		go r.engage(ctx, m, gen, cfg)
	}
	if idChanged && r.changed != nil {
		r.changed(m.name)
	}
}

// refusedMessage says that member m refused the hub's credentials (401), when its token expired
// if it did, and how to give the hub new ones.
func refusedMessage(m *member, now time.Time) string {
	msg := "the member did not accept the hub's credentials (401 Unauthorized)"
	switch {
	case !m.expiry.IsZero() && !now.Before(m.expiry):
		msg += fmt.Sprintf(": the kubeconfig's %s expired at %s", m.expiryOf, m.expiry.UTC().Format(time.RFC3339))
	case !m.expiry.IsZero():
		msg += fmt.Sprintf(": the kubeconfig's %s, valid until %s, was revoked or is not the member's", m.expiryOf, m.expiry.UTC().Format(time.RFC3339))
	default:
		msg += ": they expired, were revoked, or are not the member's"
	}
	return msg + "; " + renewHint(m.secret)
}

// firstOf returns the member, other than m, that registers m's cluster first; "" when m is the
// first. A member in use is never displaced by one that is not; otherwise the first is the one
// whose status recorded the cluster (and not as a duplicate), then the oldest, then the first by
// name, which gives the same answer after a restart as before it.
func (r *Registry) firstOf(m *member) string {
	for _, o := range r.members {
		if o == m || o.refusal != nil {
			continue
		}
		id := o.clusterID
		if id == "" {
			id = o.recordedID
		}
		if id != m.clusterID {
			continue
		}
		oReady, mReady := o.state.Phase == PhaseReady, m.state.Phase == PhaseReady
		if (oReady && !mReady) || (oReady == mReady && registeredBefore(o, m)) {
			return o.name
		}
	}
	return ""
}

// registeredBefore orders two registrations of one cluster.
func registeredBefore(a, b *member) bool {
	aDup, bDup := a.duplicate || a.recordedDuplicate, b.duplicate || b.recordedDuplicate
	aRec, bRec := a.recordedID != "" && a.recordedID == a.clusterID, b.recordedID != "" && b.recordedID == b.clusterID
	switch {
	case aDup != bDup:
		return bDup
	case aRec != bRec:
		return aRec
	case !a.created.Equal(&b.created):
		return a.created.Before(&b.created)
	}
	return a.name < b.name
}

func equalPtr(a, b *int32) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}
