// Package policy decides what a member's owner lets the hub do there, as the MemberCluster's
// spec.namespaces and spec.podSecurity say: which member namespaces a burst may use, and whether
// the pods of a child meet the member's Pod Security level. It is pure: no client, clock or
// logger, the same answer for the same input.
//
// The hub asks before it sends anything to a member for a burst, in this order, and pushes
// nothing for a burst that is refused (the member's own admission stays the last line):
//
//	// child is a bursting.Child of the root's plan, mcl its member's MemberCluster.
//	if err := policy.Namespace(mcl.Spec.Namespaces, root.Namespace, child.Namespace); err != nil {
//		// the burst Fails: reason fluxv1alpha2.ReasonNamespaceNotAllowed, message err.Error()
//	}
//	if err := policy.PodSecurity(mcl.Spec.PodSecurity.Level, child.MiniCluster); err != nil {
//		// *PodSecurityError: reason fluxv1alpha2.ReasonPodSecurityViolation, message err.Error();
//		// any other error: the child cannot be rendered, reason fluxv1alpha2.ReasonInvalidSpec
//	}
//	// Only when the namespace is missing on the member (read live):
//	if !policy.MayCreateNamespace(mcl.Spec.Namespaces) {
//		// the burst Fails: reason fluxv1alpha2.ReasonNamespaceNotAllowed, message from
//		// policy.NamespaceMissing(child.Namespace)
//	}
//	ns.Labels = policy.NamespaceLabels(mcl.Spec.PodSecurity.Level) // plus the origin labels
//
// Every message is at most MaxMessageLength bytes, so that it fits in an event as well as in a
// burst's status. PodSecurity admits and renders the child, a few milliseconds: a caller that
// reconciles often may keep its answer for as long as the child's spec and the level are the
// same.
package policy
