package policy

import (
	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	"github.com/fluxfed/fluxfed/bursting"
)

// Burst checks child, a burst of a root in hub namespace rootNamespace, against the policy of
// its member, whose MemberCluster has spec member, before anything is sent there: first its
// namespace (Namespace), then its pods (PodSecurity). It returns the first refusal, a
// *NamespaceError or a *PodSecurityError, or the error of a child that cannot be rendered.
// Whether a missing namespace may be created is asked later, once the member was read
// (MayCreateNamespace).
func Burst(member fedv1alpha1.MemberClusterSpec, rootNamespace string, child bursting.Child) error {
	if err := Namespace(member.Namespaces, rootNamespace, child.Namespace); err != nil {
		return err
	}
	return PodSecurity(member.PodSecurity.Level, child.MiniCluster)
}
