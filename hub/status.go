package hub

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// hubConditions are the condition types the hub owns on a root MiniCluster, in the order they
// are reported. The member reconciler owns the others (Ready, Complete, Failed).
var hubConditions = []string{
	fluxv1alpha2.ConditionBursting,
	fluxv1alpha2.ConditionBurstsReady,
	fluxv1alpha2.ConditionLeadBrokerReachable,
}

// BurstObservation is what the hub saw of one burst entry this reconcile.
type BurstObservation struct {
	// Name is the burst's name, as in spec.flux.bursting.clusters.
	Name string
	// Cluster is the member cluster the entry names; empty for a reserved burst.
	Cluster string
	// Namespace is the child's namespace on the member.
	Namespace string
	// Size is the number of brokers the burst is created with.
	Size int32
	// Reserved is true for an entry that names no cluster: the hub does not push it, someone
	// else brings its brokers up (the Flux Operator's model).
	Reserved bool
	// Err is nil, or why the child could not be applied or read: the member is unknown or
	// unreachable, its kubeconfig was refused, or its API server refused the child.
	Err error
	// ErrReason is the condition reason for Err: fluxv1alpha2.ReasonMemberNotFound,
	// ReasonMemberUnreachable, ReasonApplyFailed or ReasonKubeconfigRefused. Empty means
	// ReasonApplyFailed.
	ErrReason string
	// Child is the child MiniCluster as read back from the member, nil when it is not there.
	Child *fluxv1alpha2.MiniCluster
}

// reason returns the condition reason of a failed observation.
func (o BurstObservation) reason() string {
	if o.ErrReason == "" {
		return fluxv1alpha2.ReasonApplyFailed
	}
	return o.ErrReason
}

// ComputeFederationStatus returns status.bursts and the hub's conditions (Bursting, BurstsReady,
// LeadBrokerReachable) of root, computed from scratch from what the hub observed this reconcile.
// lead is the advertised lead broker endpoint (nil when unknown); leadReason and leadErr say why
// it is, or is not, reachable. now stamps conditions whose status changes; the others keep the
// LastTransitionTime they have in root.Status.Conditions.
//
// Reserved bursts are left out of status.bursts and of the conditions: the hub never creates
// them, so they have no state on a member it could report, and a burst listed as Pending forever
// would read as a stuck federation. When root has no burst that names a cluster, both results
// are nil: a root without pushed bursts carries no federation conditions.
//
// A burst whose member is not registered is reported Unreachable, as BurstUnreachable documents;
// any other error (kubeconfig refused, apply refused) is reported Failed.
func ComputeFederationStatus(root *fluxv1alpha2.MiniCluster, bursts []BurstObservation, lead *fluxv1alpha2.LeadBrokerStatus,
	leadReason string, leadErr error, now metav1.Time) ([]fluxv1alpha2.BurstStatus, []metav1.Condition) {
	var statuses []fluxv1alpha2.BurstStatus
	var pushed []BurstObservation
	for _, o := range bursts {
		if o.Reserved {
			continue
		}
		pushed = append(pushed, o)
		statuses = append(statuses, burstStatus(o))
	}
	if len(pushed) == 0 {
		return nil, nil
	}

	// Keep the transition times of the conditions we own: SetStatusCondition only moves them
	// when a condition's status changes.
	var conditions []metav1.Condition
	for _, t := range hubConditions {
		if c := meta.FindStatusCondition(root.Status.Conditions, t); c != nil {
			conditions = append(conditions, *c)
		}
	}
	set := func(conditionType string, status metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(&conditions, metav1.Condition{
			Type: conditionType, Status: status, Reason: reason, Message: message,
			ObservedGeneration: root.Generation, LastTransitionTime: now,
		})
	}

	// Bursting: every pushed burst exists on its member. A child that exists but failed is
	// applied; BurstsReady reports it.
	var notApplied []string
	bursting := fluxv1alpha2.ReasonBurstsPending
	failing := false
	for _, o := range pushed {
		switch {
		case o.Err != nil:
			notApplied = append(notApplied, fmt.Sprintf("%s on %s: %v", o.Name, o.Cluster, o.Err))
			if !failing {
				failing, bursting = true, o.reason()
			}
		case o.Child == nil:
			notApplied = append(notApplied, fmt.Sprintf("%s on %s: not applied yet", o.Name, o.Cluster))
		}
	}
	if len(notApplied) == 0 {
		set(fluxv1alpha2.ConditionBursting, metav1.ConditionTrue, fluxv1alpha2.ReasonBurstsApplied,
			fmt.Sprintf("%d of %d bursts applied", len(pushed), len(pushed)))
	} else {
		set(fluxv1alpha2.ConditionBursting, metav1.ConditionFalse, bursting,
			fmt.Sprintf("%d of %d bursts applied; %s", len(pushed)-len(notApplied), len(pushed), strings.Join(notApplied, "; ")))
	}

	// BurstsReady: every pushed burst reports all of its brokers ready. An unreachable member
	// leaves readiness unknown, which the reason says.
	var notReady []string
	readyReason := fluxv1alpha2.ReasonBurstsNotReady
	for i, s := range statuses {
		if s.Phase == fluxv1alpha2.BurstReady {
			continue
		}
		notReady = append(notReady, s.Name)
		if pushed[i].Err != nil && pushed[i].reason() == fluxv1alpha2.ReasonMemberUnreachable {
			readyReason = fluxv1alpha2.ReasonMemberUnreachable
		}
	}
	ready := len(pushed) - len(notReady)
	if len(notReady) == 0 {
		set(fluxv1alpha2.ConditionBurstsReady, metav1.ConditionTrue, fluxv1alpha2.ReasonAllBurstsReady,
			fmt.Sprintf("%d of %d bursts ready", ready, len(pushed)))
	} else {
		set(fluxv1alpha2.ConditionBurstsReady, metav1.ConditionFalse, readyReason,
			fmt.Sprintf("%d of %d bursts ready; not ready: %s", ready, len(pushed), strings.Join(notReady, ", ")))
	}

	if leadErr == nil {
		if leadReason == "" {
			leadReason = fluxv1alpha2.ReasonAddressAssigned
		}
		msg := "the lead broker is exposed"
		if lead != nil && lead.Address != "" {
			msg = fmt.Sprintf("the lead broker is reachable at %s:%d", lead.Address, lead.Port)
		}
		set(fluxv1alpha2.ConditionLeadBrokerReachable, metav1.ConditionTrue, leadReason, msg)
	} else {
		if leadReason == "" {
			leadReason = fluxv1alpha2.ReasonAddressPending
		}
		set(fluxv1alpha2.ConditionLeadBrokerReachable, metav1.ConditionFalse, leadReason, leadErr.Error())
	}
	return statuses, conditions
}

// burstStatus returns the status of one pushed burst.
func burstStatus(o BurstObservation) fluxv1alpha2.BurstStatus {
	s := fluxv1alpha2.BurstStatus{Name: o.Name, Cluster: o.Cluster, Namespace: o.Namespace, Size: o.Size}
	if o.Child != nil {
		s.Ready = o.Child.Status.Ready
	}
	switch {
	case o.Err != nil:
		switch o.reason() {
		case fluxv1alpha2.ReasonMemberUnreachable:
			s.Phase, s.Message = fluxv1alpha2.BurstUnreachable, fmt.Sprintf("member %s is unreachable: %v", o.Cluster, o.Err)
		case fluxv1alpha2.ReasonMemberNotFound:
			s.Phase, s.Message = fluxv1alpha2.BurstUnreachable, fmt.Sprintf("member %s is not registered: %v", o.Cluster, o.Err)
		default:
			s.Phase, s.Message = fluxv1alpha2.BurstFailed, fmt.Sprintf("%s: %v", o.reason(), o.Err)
		}
	case o.Child == nil:
		s.Phase, s.Message = fluxv1alpha2.BurstPending, "the child MiniCluster is not applied yet"
	case childFailed(o.Child) != nil:
		c := childFailed(o.Child)
		s.Phase, s.Message = fluxv1alpha2.BurstFailed, fmt.Sprintf("the child MiniCluster failed (%s): %s", c.Reason, c.Message)
	case meta.IsStatusConditionTrue(o.Child.Status.Conditions, fluxv1alpha2.ConditionReady) && s.Ready >= o.Size:
		s.Phase, s.Message = fluxv1alpha2.BurstReady, fmt.Sprintf("%d of %d brokers ready", s.Ready, o.Size)
	default:
		s.Phase, s.Message = fluxv1alpha2.BurstApplied, fmt.Sprintf("%d of %d brokers ready", s.Ready, o.Size)
	}
	return s
}

// childFailed returns the child's Failed condition when it is True.
func childFailed(child *fluxv1alpha2.MiniCluster) *metav1.Condition {
	c := meta.FindStatusCondition(child.Status.Conditions, fluxv1alpha2.ConditionFailed)
	if c == nil || c.Status != metav1.ConditionTrue {
		return nil
	}
	return c
}
