// Package policy decides what a member's owner lets the hub do there, as the MemberCluster's
// spec.namespaces and spec.podSecurity say: which member namespaces a burst may use, and whether
// the pods of a child meet the member's Pod Security level. It is pure: no client, clock or
// logger, the same answer for the same input.
//
// The hub asks before it sends anything to a member for a burst, and pushes nothing for a burst
// that is refused (the member's own admission stays the last line). In push, for each
// bursting.Child c of the root's plan, with mcl the MemberCluster of c.Cluster:
//
//	switch err := policy.Burst(mcl.Spec, root.Namespace, c); {
//	case errors.As(err, new(*policy.NamespaceError)):
//		// the burst Fails: reason fluxv1alpha2.ReasonNamespaceNotAllowed, message err.Error()
//	case errors.As(err, new(*policy.PodSecurityError)):
//		// the burst Fails: reason fluxv1alpha2.ReasonPodSecurityViolation, message err.Error()
//	case err != nil:
//		// the child cannot be rendered: reason fluxv1alpha2.ReasonInvalidSpec
//	}
//
// and, where the hub creates a missing namespace (ensureNamespace), after reading it live:
//
//	if !policy.MayCreateNamespace(mcl.Spec.Namespaces) {
//		return policy.NamespaceMissing(c.Namespace) // a *NamespaceError, as above
//	}
//	ns.Labels = policy.NamespaceLabels(mcl.Spec.PodSecurity.Level) // plus the origin labels
//
// Burst is Namespace, then PodSecurity; Pods and PodTemplate return the violations themselves.
//
// Every message is at most MaxMessageLength bytes, so that it fits in an event as well as in a
// burst's status. PodSecurity admits and renders the child, a few milliseconds: a caller that
// reconciles often may keep its answer for as long as the child's spec and the level are the
// same.
package policy
