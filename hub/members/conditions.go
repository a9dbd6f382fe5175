package members

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// This file computes the conditions that say what a member lacks: FluxfedInstalled,
// NamespacesAvailable and CredentialsValid.

// ManagerGrace is how long a child pushed to a member may go without a status from the member's
// fluxfed manager before the member is reported ManagerNotAnswering.
const ManagerGrace = 2 * time.Minute

// Children is what the hub's cache of an engaged member holds of its children.
type Children struct {
	// Count is the number of children; nil when the member is not engaged.
	Count *int32
	// Reconciled is true when a child has a status from the member's manager.
	Reconciled bool
	// Unreconciled names ("namespace/name") a child older than ManagerGrace that has none.
	Unreconciled string
}

// CountChildren reports on the children of a member at now.
func CountChildren(children []fluxv1alpha2.MiniCluster, now time.Time) Children {
	n := int32(len(children))
	out := Children{Count: &n}
	for i := range children {
		c := &children[i]
		switch {
		case c.Status.ObservedGeneration > 0:
			out.Reconciled = true
		case out.Unreconciled == "" && now.Sub(c.CreationTimestamp.Time) >= ManagerGrace:
			out.Unreconciled = c.Namespace + "/" + c.Name
		}
	}
	return out
}

// lackConditions sets on conditions the conditions that say what the member lacks, from what
// the registry and the member's cache know. What is not known now keeps its last value, or is
// Unknown.
func lackConditions(conditions *[]metav1.Condition, mc *fedv1alpha1.MemberCluster, snap Snapshot, children Children, now metav1.Time) {
	set := func(t string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(conditions, metav1.Condition{Type: t, Status: status, Reason: reason, Message: msg,
			ObservedGeneration: mc.Generation, LastTransitionTime: now})
	}
	keepOrUnknown := func(t, msg string) {
		if c := meta.FindStatusCondition(*conditions, t); c != nil {
			c.ObservedGeneration = mc.Generation
			return
		}
		set(t, metav1.ConditionUnknown, fedv1alpha1.ReasonNotChecked, msg)
	}
	notYet := "the hub has not checked this on the member yet"

	switch {
	case snap.Fluxfed == nil:
		keepOrUnknown(fedv1alpha1.ConditionFluxfedInstalled, notYet)
	case !*snap.Fluxfed:
		set(fedv1alpha1.ConditionFluxfedInstalled, metav1.ConditionFalse, fedv1alpha1.ReasonFluxfedMissing, fluxfedMissing())
	case children.Count == nil && managerSeen(*conditions):
		// Not engaged now: what the children showed still holds.
		keepOrUnknown(fedv1alpha1.ConditionFluxfedInstalled, "")
	case children.Reconciled:
		set(fedv1alpha1.ConditionFluxfedInstalled, metav1.ConditionTrue, fedv1alpha1.ReasonFluxfedAnswering,
			"the member serves the MiniCluster API and its fluxfed manager reconciles the children the hub pushed there")
	case children.Unreconciled != "":
		set(fedv1alpha1.ConditionFluxfedInstalled, metav1.ConditionFalse, fedv1alpha1.ReasonManagerNotAnswering, fmt.Sprintf(
			"child MiniCluster %s has had no status from the member's fluxfed manager for %v: the manager is not installed, "+
				"not running or stuck on the member (the hub may not read the member's Deployments; look at Deployment "+
				"fluxfed-controller-manager in namespace fluxfed-system there), or %s", children.Unreconciled, ManagerGrace, InstallHint))
	default:
		set(fedv1alpha1.ConditionFluxfedInstalled, metav1.ConditionTrue, fedv1alpha1.ReasonCRDInstalled,
			"the member serves the MiniCluster API; whether its fluxfed manager runs shows once a child the hub pushed there "+
				"gets a status (the hub may not read the member's Deployments)")
	}

	switch {
	case !snap.NamespacesChecked:
		keepOrUnknown(fedv1alpha1.ConditionNamespacesAvailable, notYet)
	case len(snap.MissingNamespaces)+len(snap.UnlentNamespaces) == 0:
		set(fedv1alpha1.ConditionNamespacesAvailable, metav1.ConditionTrue, fedv1alpha1.ReasonNamespacesAvailable,
			"every namespace roots burst into, or spec.namespaces lists, can be used by the hub")
	default:
		var parts []string
		reason := fedv1alpha1.ReasonNamespaceNotLent
		if ns := snap.MissingNamespaces; len(ns) > 0 {
			reason = fedv1alpha1.ReasonNamespaceMissing
			parts = append(parts, fmt.Sprintf("%s not exist on the member: create %s there, or let the hub create "+
				"namespaces (spec.namespaces.create, with deploy/member-access-any on the member)",
				plural(len(ns), "namespace "+quoted(ns)+" does", "namespaces "+quoted(ns)+" do"), plural(len(ns), "it", "them")))
		}
		if ns := snap.UnlentNamespaces; len(ns) > 0 {
			parts = append(parts, fmt.Sprintf("the hub's identity on the member may not use %s %s: %s not exist, or the member's owner "+
				"has not bound ClusterRole fluxfed-hub-burst there (kubectl create rolebinding fluxfed-hub-burst -n %s "+
				"--clusterrole=fluxfed-hub-burst --serviceaccount=fluxfed-system:fluxfed-hub); the hub may not read namespaces "+
				"on the member, so it cannot tell which", plural(len(ns), "namespace", "namespaces"), quoted(ns),
				plural(len(ns), "it does", "they do"), ns[0]))
		}
		set(fedv1alpha1.ConditionNamespacesAvailable, metav1.ConditionFalse, reason, strings.Join(parts, "; "))
	}

	expiry, what := snap.Expiry, snap.ExpiryOf
	switch {
	case expiry.IsZero():
		set(fedv1alpha1.ConditionCredentialsValid, metav1.ConditionTrue, fedv1alpha1.ReasonNoExpiry,
			"the kubeconfig's credentials carry no expiry the hub can read")
	case !now.Time.Before(expiry):
		set(fedv1alpha1.ConditionCredentialsValid, metav1.ConditionFalse, fedv1alpha1.ReasonExpired, fmt.Sprintf(
			"the kubeconfig's %s expired at %s; %s", what, expiry.Format(time.RFC3339), renewHint(snap.Secret)))
	case expiry.Sub(now.Time) < ExpiryWindow:
		set(fedv1alpha1.ConditionCredentialsValid, metav1.ConditionFalse, fedv1alpha1.ReasonExpiresSoon, fmt.Sprintf(
			"the kubeconfig's %s expires at %s, within a day; %s", what, expiry.Format(time.RFC3339), renewHint(snap.Secret)))
	default:
		set(fedv1alpha1.ConditionCredentialsValid, metav1.ConditionTrue, fedv1alpha1.ReasonExpiresLater, fmt.Sprintf(
			"the kubeconfig's %s expires at %s", what, expiry.Format(time.RFC3339)))
	}
}

// managerSeen reports whether the recorded FluxfedInstalled says what the children showed.
func managerSeen(conditions []metav1.Condition) bool {
	c := meta.FindStatusCondition(conditions, fedv1alpha1.ConditionFluxfedInstalled)
	return c != nil && (c.Reason == fedv1alpha1.ReasonFluxfedAnswering || c.Reason == fedv1alpha1.ReasonManagerNotAnswering)
}

// plural returns one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// quoted lists names for a message.
func quoted(names []string) string {
	return strings.Join(names, ", ")
}
