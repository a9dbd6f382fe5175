package members

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
)

// This file is what the rest of the hub reads of a member: its Phase and State, and the Snapshot
// the MemberCluster's status reports.

// Phase is where a member stands for the hub.
type Phase int

const (
	// PhaseUnknown is a member registered but not checked yet (the hub just started, or the
	// kubeconfig changed). Nothing is concluded about its bursts.
	PhaseUnknown Phase = iota
	// PhaseReady is a member that answers, is the only registration of its cluster, and whose
	// cache is filled: the hub may push to it.
	PhaseReady
	// PhaseNotReady is a member that cannot be used; Reason says why.
	PhaseNotReady
	// PhaseNotRegistered is a name no MemberCluster has.
	PhaseNotRegistered
)

// State is what the hub knows of one member right now.
type State struct {
	Phase Phase
	// Reason and Message explain the phase with a fedv1alpha1 reason, for conditions.
	Reason, Message string
	// Cluster is the engaged member cluster when Phase is PhaseReady; nil otherwise.
	Cluster cluster.Cluster
	// Epoch counts the member's returns to Ready. What was pushed under another epoch may have
	// changed while the hub could not see it: a caller re-reads it from the API server.
	Epoch uint64
	// Watched is where Cluster's cache watches; Denied are the namespaces of the wanted scope
	// where the hub's identity on the member may not watch (see Scope).
	Watched Scope
	Denied  []string
}

// Snapshot is what the MemberCluster's status reports.
type Snapshot struct {
	State
	// ClusterID, Version and Nodes are as last observed; Nodes is nil when unknown.
	ClusterID, Version string
	Nodes              *int32
	// LastSeen is when the member last answered a health check; zero if never.
	LastSeen time.Time
	// Wanted is the scope last registered.
	Wanted Scope
	// Fluxfed says whether the member serves the MiniCluster API: nil until the hub asked.
	Fluxfed *bool
	// NamespacesChecked is true once the registered namespaces were looked at: then
	// MissingNamespaces do not exist, and UnlentNamespaces may not be used by the hub and it
	// cannot tell whether they exist.
	NamespacesChecked                   bool
	MissingNamespaces, UnlentNamespaces []string
	// Expiry is when the kubeconfig's credentials expire, zero when the hub cannot tell;
	// ExpiryOf says what expires: "token" or "client certificate".
	Expiry   time.Time
	ExpiryOf string
	// Secret is where the kubeconfig is, "namespace/name".
	Secret string
}

// State returns what the hub knows of member name now.
func (r *Registry) State(ctx context.Context, name string) State {
	r.mu.Lock()
	m, ok := r.members[name]
	var s State
	if ok {
		s = m.state
	}
	r.mu.Unlock()
	if ok {
		return s
	}
	// Not seen yet by the MemberCluster reconciler (the hub just started), or not registered.
	mc := &fedv1alpha1.MemberCluster{}
	switch err := r.local.Get(ctx, client.ObjectKey{Name: name}, mc); {
	case err == nil:
		return State{Phase: PhaseUnknown, Reason: fedv1alpha1.ReasonConnecting, Message: fmt.Sprintf("the hub has not checked member %s yet", name)}
	case apierrors.IsNotFound(err):
		return State{Phase: PhaseNotRegistered, Message: fmt.Sprintf("no MemberCluster %s is registered on the hub", name)}
	default:
		return State{Phase: PhaseUnknown, Reason: fedv1alpha1.ReasonConnecting, Message: fmt.Sprintf("reading MemberCluster %s: %v", name, err)}
	}
}

// Snapshot returns what the status of member name reports; ok is false for an unknown member.
func (r *Registry) Snapshot(name string) (Snapshot, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.members[name]
	if !ok {
		return Snapshot{}, false
	}
	snap := Snapshot{State: m.state, ClusterID: m.clusterID, Version: m.version, Nodes: m.nodes, LastSeen: m.lastSeen, Wanted: m.want,
		NamespacesChecked: m.spaces.checked, MissingNamespaces: slices.Clone(m.spaces.missing), UnlentNamespaces: slices.Clone(m.spaces.unlent),
		Expiry: m.expiry, ExpiryOf: m.expiryOf, Secret: m.secret}
	if m.crd != crdUnknown {
		served := m.crd == crdServed
		snap.Fluxfed = &served
	}
	return snap, true
}
