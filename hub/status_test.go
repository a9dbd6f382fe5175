package hub

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
)

var (
	statusEarlier = metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	statusNow     = metav1.NewTime(time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC))
	addressed     = &fluxv1alpha2.LeadBrokerStatus{Address: "127.0.3.7", Port: 30093}
)

func statusRoot(conditions ...metav1.Condition) *fluxv1alpha2.MiniCluster {
	mc := v1alpha2test.MiniCluster("flux-sample").Namespace("hpc").Obj()
	mc.Generation = 3
	mc.Status.Conditions = conditions
	return mc
}

// child is a child MiniCluster as read back from a member, with ready brokers and its Ready
// condition.
func child(ready int32, readyCond metav1.ConditionStatus) *fluxv1alpha2.MiniCluster {
	mc := &fluxv1alpha2.MiniCluster{}
	mc.Status.Ready = ready
	mc.Status.Conditions = []metav1.Condition{{Type: fluxv1alpha2.ConditionReady, Status: readyCond, Reason: "Test"}}
	return mc
}

func obs(name string, size int32) BurstObservation {
	return BurstObservation{Name: name, Cluster: "member-" + name, Namespace: "hpc", Size: size}
}

func (o BurstObservation) with(mutate func(*BurstObservation)) BurstObservation {
	mutate(&o)
	return o
}

func TestStatusBurstPhases(t *testing.T) {
	failedChild := child(0, metav1.ConditionFalse)
	failedChild.Status.Conditions = append(failedChild.Status.Conditions, metav1.Condition{
		Type: fluxv1alpha2.ConditionFailed, Status: metav1.ConditionTrue, Reason: fluxv1alpha2.ReasonJobFailed, Message: "BackoffLimitExceeded"})
	tests := []struct {
		name      string
		obs       BurstObservation
		wantPhase fluxv1alpha2.BurstPhase
		wantReady int32
		wantMsg   string
	}{
		{name: "not applied yet", obs: obs("a", 2), wantPhase: fluxv1alpha2.BurstPending, wantMsg: "the child MiniCluster is not applied yet"},
		{name: "member unreachable", obs: obs("a", 2).with(func(o *BurstObservation) {
			o.Err = failed(fluxv1alpha2.ReasonMemberUnreachable, errors.New("dial tcp: i/o timeout"))
		}), wantPhase: fluxv1alpha2.BurstUnreachable, wantMsg: "member member-a is unreachable: dial tcp: i/o timeout"},
		{name: "member not registered", obs: obs("a", 2).with(func(o *BurstObservation) {
			o.Err = failed(fluxv1alpha2.ReasonMemberNotFound, errors.New("no such cluster"))
		}), wantPhase: fluxv1alpha2.BurstUnreachable, wantMsg: "member member-a is not registered: no such cluster"},
		{name: "apply refused", obs: obs("a", 2).with(func(o *BurstObservation) {
			o.Err = failed(fluxv1alpha2.ReasonApplyFailed, errors.New("forbidden"))
		}), wantPhase: fluxv1alpha2.BurstFailed, wantMsg: "ApplyFailed: forbidden"},
		{name: "kubeconfig refused", obs: obs("a", 2).with(func(o *BurstObservation) {
			o.Err = failed(fluxv1alpha2.ReasonKubeconfigRefused, errors.New("exec plugin not allowed"))
		}), wantPhase: fluxv1alpha2.BurstFailed, wantMsg: "KubeconfigRefused: exec plugin not allowed"},
		{name: "error without a reason is an apply failure", obs: obs("a", 2).with(func(o *BurstObservation) {
			o.Err = errors.New("boom")
		}), wantPhase: fluxv1alpha2.BurstFailed, wantMsg: "ApplyFailed: boom"},
		{name: "error wins over an existing child", obs: obs("a", 2).with(func(o *BurstObservation) {
			o.Err, o.Child = failed(fluxv1alpha2.ReasonApplyFailed, errors.New("forbidden")), child(2, metav1.ConditionTrue)
		}), wantPhase: fluxv1alpha2.BurstFailed, wantReady: 2, wantMsg: "ApplyFailed: forbidden"},
		{name: "applied, brokers starting", obs: obs("a", 4).with(func(o *BurstObservation) { o.Child = child(1, metav1.ConditionFalse) }),
			wantPhase: fluxv1alpha2.BurstApplied, wantReady: 1, wantMsg: "1 of 4 brokers ready"},
		{name: "applied, no status yet", obs: obs("a", 4).with(func(o *BurstObservation) { o.Child = &fluxv1alpha2.MiniCluster{} }),
			wantPhase: fluxv1alpha2.BurstApplied, wantMsg: "0 of 4 brokers ready"},
		{name: "all ready but Ready condition not True yet", obs: obs("a", 4).with(func(o *BurstObservation) { o.Child = child(4, metav1.ConditionFalse) }),
			wantPhase: fluxv1alpha2.BurstApplied, wantReady: 4, wantMsg: "4 of 4 brokers ready"},
		{name: "ready", obs: obs("a", 4).with(func(o *BurstObservation) { o.Child = child(4, metav1.ConditionTrue) }),
			wantPhase: fluxv1alpha2.BurstReady, wantReady: 4, wantMsg: "4 of 4 brokers ready"},
		{name: "child failed", obs: obs("a", 4).with(func(o *BurstObservation) { o.Child = failedChild }),
			wantPhase: fluxv1alpha2.BurstFailed, wantMsg: "the child MiniCluster failed (JobFailed): BackoffLimitExceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bursts := ComputeFederationStatus(statusRoot(), []BurstObservation{tt.obs}, addressed, fluxv1alpha2.ReasonAddressAssigned, nil, statusNow)
			want := []fluxv1alpha2.BurstStatus{{
				Name: tt.obs.Name, Cluster: tt.obs.Cluster, Namespace: tt.obs.Namespace, Size: tt.obs.Size,
				Phase: tt.wantPhase, Ready: tt.wantReady, Message: tt.wantMsg,
			}}
			require.Empty(t, cmp.Diff(want, bursts.Bursts))
		})
	}
}

func TestStatusConditions(t *testing.T) {
	unreachable := func(o *BurstObservation) {
		o.Err = failed(fluxv1alpha2.ReasonMemberUnreachable, errors.New("dial tcp: i/o timeout"))
	}
	notFound := func(o *BurstObservation) {
		o.Err = failed(fluxv1alpha2.ReasonMemberNotFound, errors.New("not registered"))
	}
	applyFailed := func(o *BurstObservation) {
		o.Err = failed(fluxv1alpha2.ReasonApplyFailed, errors.New("forbidden"))
	}
	ready := func(o *BurstObservation) { o.Child = child(o.Size, metav1.ConditionTrue) }
	starting := func(o *BurstObservation) { o.Child = child(0, metav1.ConditionFalse) }

	type cond struct {
		status  metav1.ConditionStatus
		reason  string
		message string
	}
	tests := []struct {
		name            string
		bursts          []BurstObservation
		wantBursting    cond
		wantBurstsReady cond
	}{
		{
			name:            "all ready",
			bursts:          []BurstObservation{obs("a", 2).with(ready), obs("b", 1).with(ready)},
			wantBursting:    cond{metav1.ConditionTrue, fluxv1alpha2.ReasonBurstsApplied, "2 of 2 bursts applied"},
			wantBurstsReady: cond{metav1.ConditionTrue, fluxv1alpha2.ReasonAllBurstsReady, "2 of 2 bursts ready"},
		},
		{
			name:            "applied, some not ready",
			bursts:          []BurstObservation{obs("a", 2).with(ready), obs("b", 1).with(starting), obs("c", 1).with(ready)},
			wantBursting:    cond{metav1.ConditionTrue, fluxv1alpha2.ReasonBurstsApplied, "3 of 3 bursts applied"},
			wantBurstsReady: cond{metav1.ConditionFalse, fluxv1alpha2.ReasonBurstsNotReady, "2 of 3 bursts ready; not ready: b"},
		},
		{
			name:            "pending",
			bursts:          []BurstObservation{obs("a", 2).with(ready), obs("b", 1)},
			wantBursting:    cond{metav1.ConditionFalse, fluxv1alpha2.ReasonBurstsPending, "1 of 2 bursts applied; b on member-b: not applied yet"},
			wantBurstsReady: cond{metav1.ConditionFalse, fluxv1alpha2.ReasonBurstsNotReady, "1 of 2 bursts ready; not ready: b"},
		},
		{
			name:            "member not found",
			bursts:          []BurstObservation{obs("a", 2).with(notFound)},
			wantBursting:    cond{metav1.ConditionFalse, fluxv1alpha2.ReasonMemberNotFound, "0 of 1 bursts applied; a on member-a: not registered"},
			wantBurstsReady: cond{metav1.ConditionFalse, fluxv1alpha2.ReasonBurstsNotReady, "0 of 1 bursts ready; not ready: a"},
		},
		{
			name:            "member unreachable",
			bursts:          []BurstObservation{obs("a", 2).with(ready), obs("b", 1).with(unreachable)},
			wantBursting:    cond{metav1.ConditionFalse, fluxv1alpha2.ReasonMemberUnreachable, "1 of 2 bursts applied; b on member-b: dial tcp: i/o timeout"},
			wantBurstsReady: cond{metav1.ConditionFalse, fluxv1alpha2.ReasonMemberUnreachable, "1 of 2 bursts ready; not ready: b (member member-b is unreachable)"},
		},
		{
			name:            "apply failed",
			bursts:          []BurstObservation{obs("a", 2).with(applyFailed)},
			wantBursting:    cond{metav1.ConditionFalse, fluxv1alpha2.ReasonApplyFailed, "0 of 1 bursts applied; a on member-a: forbidden"},
			wantBurstsReady: cond{metav1.ConditionFalse, fluxv1alpha2.ReasonBurstsNotReady, "0 of 1 bursts ready; not ready: a"},
		},
		{
			name:            "the first failing burst gives the reason, a pending one does not hide it",
			bursts:          []BurstObservation{obs("a", 2), obs("b", 1).with(applyFailed), obs("c", 1).with(unreachable)},
			wantBursting:    cond{metav1.ConditionFalse, fluxv1alpha2.ReasonApplyFailed, "0 of 3 bursts applied; a on member-a: not applied yet; b on member-b: forbidden; c on member-c: dial tcp: i/o timeout"},
			wantBurstsReady: cond{metav1.ConditionFalse, fluxv1alpha2.ReasonMemberUnreachable, "0 of 3 bursts ready; not ready: a, b, c (member member-c is unreachable)"},
		},
		{
			name:            "reserved bursts are not counted",
			bursts:          []BurstObservation{obs("a", 2).with(ready), {Name: "r", Size: 4, Reserved: true}},
			wantBursting:    cond{metav1.ConditionTrue, fluxv1alpha2.ReasonBurstsApplied, "1 of 1 bursts applied"},
			wantBurstsReady: cond{metav1.ConditionTrue, fluxv1alpha2.ReasonAllBurstsReady, "1 of 1 bursts ready"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conditions := ComputeFederationStatus(statusRoot(), tt.bursts, addressed, fluxv1alpha2.ReasonAddressAssigned, nil, statusNow).Conditions
			want := []metav1.Condition{
				{Type: fluxv1alpha2.ConditionBursting, Status: tt.wantBursting.status, Reason: tt.wantBursting.reason, Message: tt.wantBursting.message,
					ObservedGeneration: 3, LastTransitionTime: statusNow},
				{Type: fluxv1alpha2.ConditionBurstsReady, Status: tt.wantBurstsReady.status, Reason: tt.wantBurstsReady.reason, Message: tt.wantBurstsReady.message,
					ObservedGeneration: 3, LastTransitionTime: statusNow},
				{Type: fluxv1alpha2.ConditionLeadBrokerReachable, Status: metav1.ConditionTrue, Reason: fluxv1alpha2.ReasonAddressAssigned,
					Message: "the lead broker is reachable at 127.0.3.7:30093", ObservedGeneration: 3, LastTransitionTime: statusNow},
			}
			require.Empty(t, cmp.Diff(want, conditions))
		})
	}
}

func TestStatusLeadBrokerReachable(t *testing.T) {
	tests := []struct {
		name        string
		lead        *fluxv1alpha2.LeadBrokerStatus
		leadReason  string
		leadErr     error
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage string
	}{
		{name: "address assigned", lead: addressed, leadReason: fluxv1alpha2.ReasonAddressAssigned,
			wantStatus: metav1.ConditionTrue, wantReason: fluxv1alpha2.ReasonAddressAssigned, wantMessage: "the lead broker is reachable at 127.0.3.7:30093"},
		{name: "address overridden", lead: &fluxv1alpha2.LeadBrokerStatus{Address: "lead.example.org", Port: 8050}, leadReason: fluxv1alpha2.ReasonAddressOverridden,
			wantStatus: metav1.ConditionTrue, wantReason: fluxv1alpha2.ReasonAddressOverridden, wantMessage: "the lead broker is reachable at lead.example.org:8050"},
		{name: "address pending", leadReason: fluxv1alpha2.ReasonAddressPending, leadErr: errors.New("the load balancer has no ingress yet"),
			wantStatus: metav1.ConditionFalse, wantReason: fluxv1alpha2.ReasonAddressPending, wantMessage: "the load balancer has no ingress yet"},
		{name: "error without a reason", leadErr: errors.New("no node address"),
			wantStatus: metav1.ConditionFalse, wantReason: fluxv1alpha2.ReasonAddressPending, wantMessage: "no node address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conditions := ComputeFederationStatus(statusRoot(), []BurstObservation{obs("a", 1)}, tt.lead, tt.leadReason, tt.leadErr, statusNow).Conditions
			got := meta.FindStatusCondition(conditions, fluxv1alpha2.ConditionLeadBrokerReachable)
			require.NotNil(t, got)
			require.Equal(t, metav1.Condition{
				Type: fluxv1alpha2.ConditionLeadBrokerReachable, Status: tt.wantStatus, Reason: tt.wantReason, Message: tt.wantMessage,
				ObservedGeneration: 3, LastTransitionTime: statusNow,
			}, *got)
		})
	}
}

func TestStatusNoPushedBursts(t *testing.T) {
	for name, bursts := range map[string][]BurstObservation{
		"no bursts":          nil,
		"only reserved ones": {{Name: "r", Size: 4, Reserved: true}},
	} {
		t.Run(name, func(t *testing.T) {
			root := statusRoot(metav1.Condition{Type: fluxv1alpha2.ConditionBursting, Status: metav1.ConditionTrue, Reason: fluxv1alpha2.ReasonBurstsApplied})
			st := ComputeFederationStatus(root, bursts, nil, "", errors.New("no address"), statusNow)
			require.Equal(t, FederationStatus{}, st)
		})
	}
}

func TestStatusTransitionTimes(t *testing.T) {
	root := statusRoot(
		metav1.Condition{Type: fluxv1alpha2.ConditionReady, Status: metav1.ConditionTrue, Reason: fluxv1alpha2.ReasonPodsReady, LastTransitionTime: statusEarlier},
		metav1.Condition{Type: fluxv1alpha2.ConditionBursting, Status: metav1.ConditionTrue, Reason: fluxv1alpha2.ReasonBurstsApplied,
			Message: "old", ObservedGeneration: 2, LastTransitionTime: statusEarlier},
		metav1.Condition{Type: fluxv1alpha2.ConditionBurstsReady, Status: metav1.ConditionTrue, Reason: fluxv1alpha2.ReasonAllBurstsReady,
			ObservedGeneration: 2, LastTransitionTime: statusEarlier},
	)
	bursts := []BurstObservation{obs("a", 2).with(func(o *BurstObservation) { o.Child = child(1, metav1.ConditionFalse) })}
	conditions := ComputeFederationStatus(root, bursts, addressed, fluxv1alpha2.ReasonAddressAssigned, nil, statusNow).Conditions

	// Bursting stays True: its time is kept, the rest is refreshed. BurstsReady turned False and
	// LeadBrokerReachable is new: both are stamped now. The member's Ready is not returned.
	require.Equal(t, []string{fluxv1alpha2.ConditionBursting, fluxv1alpha2.ConditionBurstsReady, fluxv1alpha2.ConditionLeadBrokerReachable},
		conditionTypes(conditions))
	bursting := meta.FindStatusCondition(conditions, fluxv1alpha2.ConditionBursting)
	require.Equal(t, statusEarlier, bursting.LastTransitionTime)
	require.Equal(t, "1 of 1 bursts applied", bursting.Message)
	require.Equal(t, int64(3), bursting.ObservedGeneration)
	require.Equal(t, statusNow, meta.FindStatusCondition(conditions, fluxv1alpha2.ConditionBurstsReady).LastTransitionTime)
	require.Equal(t, statusNow, meta.FindStatusCondition(conditions, fluxv1alpha2.ConditionLeadBrokerReachable).LastTransitionTime)

	// The input is not modified.
	require.Equal(t, "old", meta.FindStatusCondition(root.Status.Conditions, fluxv1alpha2.ConditionBursting).Message)
}

func TestStatusDeclaredOrder(t *testing.T) {
	bursts := []BurstObservation{obs("zeta", 1), {Name: "reserved", Size: 2, Reserved: true}, obs("alpha", 1), obs("mid", 1)}
	for range 5 {
		st := ComputeFederationStatus(statusRoot(), bursts, addressed, "", nil, statusNow)
		names := make([]string, 0, len(st.Bursts))
		for _, s := range st.Bursts {
			names = append(names, s.Name)
		}
		require.Equal(t, []string{"zeta", "alpha", "mid"}, names)
		require.Equal(t, "0 of 3 bursts ready; not ready: zeta, alpha, mid",
			meta.FindStatusCondition(st.Conditions, fluxv1alpha2.ConditionBurstsReady).Message)
	}
}

func conditionTypes(conditions []metav1.Condition) []string {
	types := make([]string, 0, len(conditions))
	for _, c := range conditions {
		types = append(types, c.Type)
	}
	return types
}

func TestStatusSummary(t *testing.T) {
	ready := func(o *BurstObservation) { o.Child = child(o.Size, metav1.ConditionTrue) }
	unreachable := func(o *BurstObservation) {
		o.Err = failed(fluxv1alpha2.ReasonMemberUnreachable, errors.New("timeout"))
	}
	for _, tt := range []struct {
		bursts []BurstObservation
		want   string
	}{
		{bursts: []BurstObservation{obs("a", 1).with(ready), obs("b", 1).with(ready)}, want: "2/2"},
		{bursts: []BurstObservation{obs("a", 1).with(ready), obs("b", 1).with(unreachable)}, want: "1/2"},
		{bursts: []BurstObservation{obs("a", 1), {Name: "r", Size: 2, Reserved: true}}, want: "0/1"},
		// A burst at size 0 runs nothing: it is not counted as ready, but apart.
		{bursts: []BurstObservation{obs("a", 1).with(ready), obs("b", 0)}, want: "1/1 (+1 reserved)"},
		{bursts: []BurstObservation{obs("a", 0), obs("b", 0)}, want: "0/0 (+2 reserved)"},
		{bursts: []BurstObservation{obs("a", 2), obs("b", 0), obs("c", 1).with(ready)}, want: "1/2 (+1 reserved)"},
		// At size 0 on a member that does not answer, what is there cannot be known: not reserved.
		{bursts: []BurstObservation{obs("a", 0).with(unreachable)}, want: "0/1"},
	} {
		require.Equal(t, tt.want, ComputeFederationStatus(statusRoot(), tt.bursts, addressed, "", nil, statusNow).Summary)
	}
	// The widest summary fits status.burstSummary (at most 32 characters).
	wide := make([]fluxv1alpha2.BurstStatus, 0, 64)
	for i := range 64 {
		phase := fluxv1alpha2.BurstReady
		if i%2 == 1 {
			phase = fluxv1alpha2.BurstReserved
		}
		wide = append(wide, fluxv1alpha2.BurstStatus{Phase: phase})
	}
	require.LessOrEqual(t, len(burstSummary(wide)), 32)
}

// TestStatusOfAMemberNotCheckedYet: after a restart, a burst whose member the hub has not
// checked yet keeps the status it had, and so do the conditions over all bursts, so that nothing
// is reported Unreachable that is not.
func TestStatusOfAMemberNotCheckedYet(t *testing.T) {
	before := []fluxv1alpha2.BurstStatus{
		{Name: "a", Cluster: "member-a", Namespace: "hpc", Size: 2, Phase: fluxv1alpha2.BurstReady, Ready: 2, Message: "2 of 2 brokers ready"},
	}
	bursting := metav1.Condition{Type: fluxv1alpha2.ConditionBursting, Status: metav1.ConditionTrue, Reason: fluxv1alpha2.ReasonBurstsApplied,
		Message: "2 of 2 bursts applied", ObservedGeneration: 3, LastTransitionTime: statusEarlier}
	burstsReady := metav1.Condition{Type: fluxv1alpha2.ConditionBurstsReady, Status: metav1.ConditionTrue, Reason: fluxv1alpha2.ReasonAllBurstsReady,
		Message: "2 of 2 bursts ready", ObservedGeneration: 3, LastTransitionTime: statusEarlier}
	root := statusRoot(bursting, burstsReady)
	root.Status.Bursts = before
	keep := func(o *BurstObservation) { o.Keep = true }
	st := ComputeFederationStatus(root, []BurstObservation{obs("a", 2).with(keep), obs("b", 1).with(keep)}, addressed, "", nil, statusNow)

	require.Equal(t, before[0], st.Bursts[0], "a burst reported before keeps its status")
	require.Equal(t, fluxv1alpha2.BurstPending, st.Bursts[1].Phase, "one never reported is pending, not unreachable")
	require.Equal(t, "the hub has not checked member member-b yet", st.Bursts[1].Message)
	require.Equal(t, bursting, *meta.FindStatusCondition(st.Conditions, fluxv1alpha2.ConditionBursting))
	require.Equal(t, burstsReady, *meta.FindStatusCondition(st.Conditions, fluxv1alpha2.ConditionBurstsReady))

	// Without conditions to keep, they are computed, the unchecked bursts counting as not applied.
	st = ComputeFederationStatus(statusRoot(), []BurstObservation{obs("b", 1).with(keep)}, addressed, "", nil, statusNow)
	c := meta.FindStatusCondition(st.Conditions, fluxv1alpha2.ConditionBursting)
	require.Equal(t, fluxv1alpha2.ReasonBurstsPending, c.Reason)
	require.Equal(t, "0 of 1 bursts applied; b on member-b: the hub has not checked the member yet", c.Message)
}

func TestReservedNoneRuns(t *testing.T) {
	for n, want := range map[int]string{
		1: "its 1 rank is reserved and does not run",
		2: "its 2 ranks are reserved and none runs",
	} {
		require.Equal(t, want, reservedNoneRuns(n))
	}
}
