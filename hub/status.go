package hub

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/internal/metrics"
	"github.com/fluxfed/fluxfed/internal/report"
)

// hubConditions are the condition types the hub owns on a root MiniCluster, in the order they
// are reported. The member reconciler owns the others (Ready, Complete, Failed).
var hubConditions = report.Conditions{Types: []string{
	fluxv1alpha2.ConditionBursting,
	fluxv1alpha2.ConditionBurstsReady,
	fluxv1alpha2.ConditionLeadBrokerReachable,
}}

// FederationStatus is the part of a root's status the hub owns.
type FederationStatus struct {
	// Bursts is status.bursts.
	Bursts []fluxv1alpha2.BurstStatus
	// Conditions are Bursting, BurstsReady and LeadBrokerReachable.
	Conditions []metav1.Condition
	// Summary is status.burstSummary: "<ready>/<bursts>", and the bursts at size 0 apart.
	Summary string
	// Pushed is status.pushed: the root's ledger, what the hub created on members.
	Pushed []fluxv1alpha2.PushedObject
	// Flux is status.flux.
	Flux *fluxv1alpha2.FluxStatus
}

// federationStatus is the hub's part of a status as computed; its zero value clears it.
type federationStatus = FederationStatus

// ComputeFederationStatus returns the hub's part of root's status, computed from scratch from
// what the hub observed this reconcile. lead is the advertised lead broker endpoint (nil when
// unknown); leadReason and leadErr say why it is, or is not, reachable. now stamps conditions
// whose status changes; the others keep the LastTransitionTime they have in root's status.
//
// Reserved bursts are left out: the hub never creates them, so they have no state on a member
// it could report, and a burst listed as Pending forever would read as a stuck federation. When
// root has no burst that names a cluster, the result is empty: such a root carries no federation
// status.
//
// A burst whose member has not been checked yet (Keep) keeps the status it had, and so do
// Bursting and BurstsReady, which depend on every burst: the hub concludes nothing before its
// first health check of a member, so a restarted hub never reports a burst Unreachable that is
// not. A burst whose member is not registered, or does not answer, is reported Unreachable, as
// BurstUnreachable documents; any other error (the member is not ready, a refusal) Failed.
func ComputeFederationStatus(root *fluxv1alpha2.MiniCluster, bursts []BurstObservation, lead *fluxv1alpha2.LeadBrokerStatus,
	leadReason string, leadErr error, now metav1.Time) FederationStatus {
	var st FederationStatus
	var pushed []BurstObservation
	keep := false
	for _, o := range bursts {
		if o.Reserved {
			continue
		}
		pushed = append(pushed, o)
		if o.Keep {
			keep = true
			st.Bursts = append(st.Bursts, keptStatus(root, o))
			continue
		}
		st.Bursts = append(st.Bursts, burstStatus(o))
	}
	if len(pushed) == 0 {
		return FederationStatus{}
	}
	ready := 0
	for _, s := range st.Bursts {
		if settled(s.Phase) {
			ready++
		}
	}
	st.Summary = burstSummary(st.Bursts)

	// Keep the transition times of the conditions we own: SetStatusCondition only moves them
	// when a condition's status changes.
	for _, t := range hubConditions.Types {
		if c := meta.FindStatusCondition(root.Status.Conditions, t); c != nil {
			st.Conditions = append(st.Conditions, *c)
		}
	}
	set := func(conditionType string, status metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: conditionType, Status: status, Reason: reason, Message: message,
			ObservedGeneration: root.Generation, LastTransitionTime: now,
		})
	}
	if !keep || meta.FindStatusCondition(root.Status.Conditions, fluxv1alpha2.ConditionBursting) == nil {
		setBursting(set, pushed)
		setBurstsReady(set, pushed, st.Bursts, ready)
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
	return st
}

// burstSummary is status.burstSummary, the BURSTS column: "<ready>/<bursts>" over the bursts
// that run brokers, and the bursts at size 0 apart ("1/2 (+1 reserved)"). A burst at size 0 is
// as its spec asks, but nothing of it runs: counted as ready, it would read as brokers at work.
func burstSummary(bursts []fluxv1alpha2.BurstStatus) string {
	ready, running, reserved := 0, 0, 0
	for _, s := range bursts {
		switch {
		case s.Phase == fluxv1alpha2.BurstReserved:
			reserved++
		case settled(s.Phase):
			ready++
			running++
		default:
			running++
		}
	}
	if reserved == 0 {
		return fmt.Sprintf("%d/%d", ready, running)
	}
	return fmt.Sprintf("%d/%d (+%d reserved)", ready, running, reserved)
}

type setCondition func(conditionType string, status metav1.ConditionStatus, reason, message string)

// setBursting sets Bursting: every pushed burst exists on its member. A child that exists but
// failed is applied; BurstsReady reports it. The message names every burst that is not applied,
// with its member.
func setBursting(set setCondition, pushed []BurstObservation) {
	var notApplied []string
	reason := fluxv1alpha2.ReasonBurstsPending
	failing := false
	for _, o := range pushed {
		switch {
		case o.Keep:
			notApplied = append(notApplied, fmt.Sprintf("%s on %s: the hub has not checked the member yet", o.Name, o.Cluster))
		case o.Err != nil:
			notApplied = append(notApplied, fmt.Sprintf("%s on %s: %v", o.Name, o.Cluster, o.Err))
			if !failing {
				failing, reason = true, o.reason()
			}
		case o.Child == nil && o.Size > 0 && o.Waiting != "":
			notApplied = append(notApplied, fmt.Sprintf("%s on %s: %s", o.Name, o.Cluster, o.Waiting))
		case o.Child == nil && o.Size > 0:
			notApplied = append(notApplied, fmt.Sprintf("%s on %s: not applied yet", o.Name, o.Cluster))
		}
	}
	if len(notApplied) == 0 {
		set(fluxv1alpha2.ConditionBursting, metav1.ConditionTrue, fluxv1alpha2.ReasonBurstsApplied,
			fmt.Sprintf("%d of %d bursts applied", len(pushed), len(pushed)))
		return
	}
	set(fluxv1alpha2.ConditionBursting, metav1.ConditionFalse, reason,
		fmt.Sprintf("%d of %d bursts applied; %s", len(pushed)-len(notApplied), len(pushed), strings.Join(notApplied, "; ")))
}

// setBurstsReady sets BurstsReady: every pushed burst reports all of its brokers ready. An
// unreachable member leaves readiness unknown, which the reason says, naming the member.
func setBurstsReady(set setCondition, pushed []BurstObservation, statuses []fluxv1alpha2.BurstStatus, ready int) {
	var notReady []string
	reason := fluxv1alpha2.ReasonBurstsNotReady
	for i, s := range statuses {
		if settled(s.Phase) {
			continue
		}
		if pushed[i].Err != nil && pushed[i].reason() == fluxv1alpha2.ReasonMemberUnreachable {
			reason = fluxv1alpha2.ReasonMemberUnreachable
			notReady = append(notReady, fmt.Sprintf("%s (member %s is unreachable)", s.Name, s.Cluster))
			continue
		}
		notReady = append(notReady, s.Name)
	}
	if len(notReady) == 0 {
		set(fluxv1alpha2.ConditionBurstsReady, metav1.ConditionTrue, fluxv1alpha2.ReasonAllBurstsReady,
			fmt.Sprintf("%d of %d bursts ready", ready, len(pushed)))
		return
	}
	set(fluxv1alpha2.ConditionBurstsReady, metav1.ConditionFalse, reason,
		fmt.Sprintf("%d of %d bursts ready; not ready: %s", ready, len(pushed), strings.Join(notReady, ", ")))
}

// settled reports whether a burst in phase p is as its spec asks: all of its brokers ready (and
// joined, when the root's instance could be asked), or none running at size 0.
func settled(p fluxv1alpha2.BurstPhase) bool {
	return p == fluxv1alpha2.BurstReady || p == fluxv1alpha2.BurstJoined || p == fluxv1alpha2.BurstReserved
}

// keptStatus is the status a burst had, for a burst whose member has not been checked yet.
func keptStatus(root *fluxv1alpha2.MiniCluster, o BurstObservation) fluxv1alpha2.BurstStatus {
	for _, s := range root.Status.Bursts {
		if s.Name == o.Name && s.Cluster == o.Cluster && s.Namespace == o.Namespace {
			return s
		}
	}
	return fluxv1alpha2.BurstStatus{Name: o.Name, Cluster: o.Cluster, Namespace: o.Namespace, Size: o.Size, MaxSize: o.MaxSize,
		Phase: fluxv1alpha2.BurstPending, Message: fmt.Sprintf("the hub has not checked member %s yet", o.Cluster)}
}

// burstStatus returns the status of one pushed burst.
func burstStatus(o BurstObservation) fluxv1alpha2.BurstStatus {
	s := fluxv1alpha2.BurstStatus{Name: o.Name, Cluster: o.Cluster, Namespace: o.Namespace, Size: o.Size, MaxSize: o.MaxSize}
	if o.Child != nil {
		s.Ready = o.Child.Status.Ready
	}
	if o.Flux != nil {
		s.Online, s.Draining, s.Drained = int32(o.Flux.Online), int32(o.Flux.Draining), int32(o.Flux.Drained)
	}
	switch {
	case o.Size == 0 && o.Err == nil:
		s.Phase, s.Message = fluxv1alpha2.BurstReserved, "size 0: "+reservedNoneRuns(int(o.MaxSize))
	case o.Err != nil:
		switch o.reason() {
		case fluxv1alpha2.ReasonMemberUnreachable:
			s.Phase, s.Message = fluxv1alpha2.BurstUnreachable, fmt.Sprintf("member %s is unreachable: %v", o.Cluster, o.Err)
		case fluxv1alpha2.ReasonMemberNotFound:
			s.Phase, s.Message = fluxv1alpha2.BurstUnreachable, fmt.Sprintf("member %s is not registered: %v", o.Cluster, o.Err)
		default:
			s.Phase, s.Message = fluxv1alpha2.BurstFailed, fmt.Sprintf("%s: %v", o.reason(), o.Err)
		}
	case o.Child == nil && o.Waiting != "":
		s.Phase, s.Message = fluxv1alpha2.BurstPending, o.Waiting
	case o.Child == nil:
		s.Phase, s.Message = fluxv1alpha2.BurstPending, "the child MiniCluster is not applied yet"
	case childFailed(o.Child) != nil:
		c := childFailed(o.Child)
		s.Phase, s.Message = fluxv1alpha2.BurstFailed, fmt.Sprintf("the child MiniCluster failed (%s): %s", c.Reason, c.Message)
	case podsReady(o) && o.Joined:
		s.Phase, s.Message = fluxv1alpha2.BurstJoined, fmt.Sprintf("%d of %d brokers ready and online in the root's Flux instance", o.Size, o.Size)
	case podsReady(o) && o.NotJoining != "":
		s.Phase, s.Message = fluxv1alpha2.BurstNotJoining, o.NotJoining
	case podsReady(o):
		s.Phase, s.Message = fluxv1alpha2.BurstReady, fmt.Sprintf("%d of %d brokers ready", o.Size, o.Size)
	default:
		s.Phase, s.Message = fluxv1alpha2.BurstApplied, fmt.Sprintf("%d of %d brokers ready", min(s.Ready, o.Size), o.Size)
	}
	return s
}

// reservedNoneRuns says that a burst of size 0 has n ranks reserved and runs none of them.
func reservedNoneRuns(n int) string {
	if n == 1 {
		return "its 1 rank is reserved and does not run"
	}
	return fmt.Sprintf("its %d ranks are reserved and none runs", n)
}

// podsReady reports whether the burst's child reports all of its brokers' pods ready.
func podsReady(o BurstObservation) bool {
	return o.Child != nil && o.Err == nil && o.Size > 0 && childFailed(o.Child) == nil &&
		meta.IsStatusConditionTrue(o.Child.Status.Conditions, fluxv1alpha2.ConditionReady) && o.Child.Status.Ready >= o.Size
}

// childFailed returns the child's Failed condition when it is True.
func childFailed(child *fluxv1alpha2.MiniCluster) *metav1.Condition {
	c := meta.FindStatusCondition(child.Status.Conditions, fluxv1alpha2.ConditionFailed)
	if c == nil || c.Status != metav1.ConditionTrue {
		return nil
	}
	return c
}

// writeStatus reports the federation observed this reconcile on the root. A root that was
// stale when the reconcile began (the cache had not seen the hub's last status write) is not
// written: its status would be computed from an older one, with new transition times, and the
// watch brings the root back once the cache has the write.
func (r *Reconciler) writeStatus(ctx context.Context, root *fluxv1alpha2.MiniCluster, fed *federation, stale bool, events *report.Events) error {
	// While the endpoint is pending (rank 0 is being rescheduled), the children keep the one they
	// were given, and so does the status: LeadBrokerReachable says it is pending.
	leadStatus := r.lastLead(root)
	if a := fed.lead.endpoint; a.Address != "" {
		leadStatus = &fluxv1alpha2.LeadBrokerStatus{Address: a.Address, Port: a.Port, Endpoint: a.String()}
		r.memory.of(root.UID).setLead(leadStatus)
	}
	if stale {
		return nil
	}
	st := ComputeFederationStatus(root, fed.bursts, leadStatus, fed.lead.reason, fed.lead.err, r.now())
	l := r.ledgerOf(root)
	st.Pushed = l.list()
	st.Flux = fed.flux
	if err := r.applyStatus(ctx, root, st, leadStatus, events); err != nil {
		return err
	}
	l.persist(st.Pushed)
	reportRoot(root, st)
	return nil
}

// reportRoot sets the series of a root (internal/metrics) from the status the hub wrote.
func reportRoot(root *fluxv1alpha2.MiniCluster, st FederationStatus) {
	phases := make([]fluxv1alpha2.BurstPhase, 0, len(st.Bursts))
	for _, b := range st.Bursts {
		phases = append(phases, b.Phase)
	}
	metrics.SetBursts(root.Namespace, root.Name, phases)
	metrics.SetFlux(root.Namespace, root.Name, st.Flux)
}

// lastLead returns the lead broker endpoint root's children were last given: as kept since the
// last reconcile, else as its status records it (after a restart of the hub).
func (r *Reconciler) lastLead(root *fluxv1alpha2.MiniCluster) *fluxv1alpha2.LeadBrokerStatus {
	if m, ok := r.memory.peek(root.UID); ok {
		if l, ok := m.lastLead(); ok {
			return l
		}
	}
	return root.Status.LeadBroker
}

// refuse reports a root whose bursts cannot be planned: a terminal condition, nothing pushed,
// until the spec changes.
func (r *Reconciler) refuse(ctx context.Context, root *fluxv1alpha2.MiniCluster, err error) error {
	if r.status.Lags(root) {
		return reconcile.TerminalError(err)
	}
	events := &report.Events{}
	st := FederationStatus{Conditions: InvalidFederationConditions(root, err, r.now()), Pushed: r.ledgerOf(root).list()}
	if werr := r.applyStatus(ctx, root, st, nil, events); werr != nil {
		return werr
	}
	reportRoot(root, st)
	events.Record(r.recorder, root)
	return reconcile.TerminalError(err)
}

// InvalidFederationConditions returns the hub's conditions of a root whose bursts cannot be
// planned: Bursting and BurstsReady are False with reason InvalidFederation and err as message;
// LeadBrokerReachable is not reported, as nothing is exposed for such a root.
func InvalidFederationConditions(root *fluxv1alpha2.MiniCluster, err error, now metav1.Time) []metav1.Condition {
	var conditions []metav1.Condition
	for _, t := range []string{fluxv1alpha2.ConditionBursting, fluxv1alpha2.ConditionBurstsReady} {
		if c := meta.FindStatusCondition(root.Status.Conditions, t); c != nil {
			conditions = append(conditions, *c)
		}
	}
	for _, t := range []string{fluxv1alpha2.ConditionBursting, fluxv1alpha2.ConditionBurstsReady} {
		meta.SetStatusCondition(&conditions, metav1.Condition{
			Type: t, Status: metav1.ConditionFalse, Reason: fluxv1alpha2.ReasonInvalidFederation,
			Message: err.Error(), ObservedGeneration: root.Generation, LastTransitionTime: now,
		})
	}
	return conditions
}

// applyStatus writes the hub's status fields with server-side apply under the hub's field
// owner, when they changed, and queues an event for each condition that moved. The member
// reconciler owns the other fields and conditions.
func (r *Reconciler) applyStatus(ctx context.Context, root *fluxv1alpha2.MiniCluster, st FederationStatus,
	leadStatus *fluxv1alpha2.LeadBrokerStatus, events *report.Events) error {
	if !federationStatusChanged(root.Status, st, leadStatus) {
		return nil
	}
	if err := r.status.Apply(ctx, root, &fluxv1alpha2.MiniClusterStatus{
		Bursts: st.Bursts, BurstSummary: st.Summary, Conditions: st.Conditions, LeadBroker: leadStatus, Pushed: st.Pushed, Flux: st.Flux}); err != nil {
		return err
	}
	events.Append(hubConditions.Events(root.Status.Conditions, st.Conditions)...)
	return nil
}

// federationStatusChanged reports whether the hub's fields differ between the current status
// and the computed one, so that an unchanged federation costs no status write.
func federationStatusChanged(current fluxv1alpha2.MiniClusterStatus, st FederationStatus, leadStatus *fluxv1alpha2.LeadBrokerStatus) bool {
	if !equality.Semantic.DeepEqual(current.Bursts, st.Bursts) && (len(current.Bursts) > 0 || len(st.Bursts) > 0) {
		return true
	}
	if !equality.Semantic.DeepEqual(current.Pushed, st.Pushed) && (len(current.Pushed) > 0 || len(st.Pushed) > 0) {
		return true
	}
	if current.BurstSummary != st.Summary || !equality.Semantic.DeepEqual(current.LeadBroker, leadStatus) ||
		!equality.Semantic.DeepEqual(current.Flux, st.Flux) {
		return true
	}
	return hubConditions.Changed(current.Conditions, st.Conditions)
}
