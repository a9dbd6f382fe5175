package members

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
)

func TestComputeStatus(t *testing.T) {
	earlier := metav1.NewTime(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
	now := metav1.NewTime(earlier.Add(time.Hour))
	ready := Snapshot{State: State{Phase: PhaseReady, Reason: fedv1alpha1.ReasonConnected, Message: "answers"},
		ClusterID: "uid-1", Version: "v1.36.3", Nodes: ptr.To[int32](3), LastSeen: now.Add(-time.Second),
		Fluxfed: ptr.To(true), NamespacesChecked: true}
	recorded := fedv1alpha1.MemberClusterStatus{
		ObservedGeneration: 1, ClusterID: "uid-1", KubernetesVersion: "v1.36.3", Nodes: ptr.To[int32](3), Children: 2,
		LastHeartbeatTime: ptr.To(metav1.NewTime(now.Add(-10 * time.Second))),
		Conditions: []metav1.Condition{{Type: fedv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: fedv1alpha1.ReasonConnected,
			Message: "answers", ObservedGeneration: 1, LastTransitionTime: earlier}},
	}
	mc := func(st fedv1alpha1.MemberClusterStatus) *fedv1alpha1.MemberCluster {
		return &fedv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "m", Generation: 1}, Status: st}
	}
	// What the member lacks, as recorded when it was first checked: nothing.
	lackConditions(&recorded.Conditions, mc(recorded), ready, Children{Count: ptr.To[int32](2)}, earlier)

	t.Run("first result", func(t *testing.T) {
		st := ComputeStatus(mc(fedv1alpha1.MemberClusterStatus{}), ready, Children{Count: ptr.To[int32](2)}, now, time.Minute)
		require.Equal(t, "uid-1", st.ClusterID)
		require.Equal(t, "v1.36.3", st.KubernetesVersion)
		require.Equal(t, int32(3), *st.Nodes)
		require.Equal(t, int32(2), st.Children)
		require.Equal(t, ready.LastSeen.Truncate(time.Second), st.LastHeartbeatTime.Time)
		c := meta.FindStatusCondition(st.Conditions, fedv1alpha1.ConditionReady)
		require.Equal(t, metav1.ConditionTrue, c.Status)
		require.Equal(t, now, c.LastTransitionTime)
	})
	t.Run("nothing new within the record interval writes nothing", func(t *testing.T) {
		st := ComputeStatus(mc(recorded), ready, Children{Count: ptr.To[int32](2)}, now, time.Minute)
		require.Equal(t, recorded, st, "an unchanged member costs no status write")
	})
	t.Run("the orphans are not this reconciler's to send", func(t *testing.T) {
		withOrphans := *recorded.DeepCopy()
		withOrphans.Orphans = []fedv1alpha1.OrphanObject{{Kind: "MiniCluster", Namespace: "n", Name: "x", UID: "u"}}
		st := ComputeStatus(mc(withOrphans), ready, Children{Count: ptr.To[int32](2)}, now, time.Minute)
		require.Nil(t, st.Orphans)
		require.Equal(t, recorded, st)
	})
	t.Run("the heartbeat is recorded once the interval passed", func(t *testing.T) {
		st := ComputeStatus(mc(recorded), ready, Children{Count: ptr.To[int32](2)}, now, 5*time.Second)
		require.Equal(t, ready.LastSeen.Truncate(time.Second), st.LastHeartbeatTime.Time)
		require.Equal(t, earlier, st.Conditions[0].LastTransitionTime, "the condition did not move")
	})
	t.Run("unreachable keeps what it cannot see", func(t *testing.T) {
		down := Snapshot{State: State{Phase: PhaseNotReady, Reason: fedv1alpha1.ReasonUnreachable, Message: "timeout"}, LastSeen: ready.LastSeen}
		st := ComputeStatus(mc(recorded), down, Children{}, now, time.Minute)
		require.Equal(t, "v1.36.3", st.KubernetesVersion)
		require.Equal(t, int32(2), st.Children, "the children are still there")
		c := meta.FindStatusCondition(st.Conditions, fedv1alpha1.ConditionReady)
		require.Equal(t, metav1.ConditionFalse, c.Status)
		require.Equal(t, fedv1alpha1.ReasonUnreachable, c.Reason)
		require.Equal(t, now, c.LastTransitionTime)
		require.Equal(t, ready.LastSeen.Truncate(time.Second), st.LastHeartbeatTime.Time, "the last answer, recorded with the move")
	})
	t.Run("not checked yet", func(t *testing.T) {
		st := ComputeStatus(mc(fedv1alpha1.MemberClusterStatus{}), Snapshot{}, Children{}, now, time.Minute)
		c := meta.FindStatusCondition(st.Conditions, fedv1alpha1.ConditionReady)
		require.Equal(t, metav1.ConditionUnknown, c.Status)
		require.Equal(t, fedv1alpha1.ReasonConnecting, c.Reason)
		require.Nil(t, st.LastHeartbeatTime)
	})
}

func TestRegisteredBefore(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	tests := []struct {
		name string
		a, b member
		want bool
	}{
		{name: "older first", a: member{name: "b", created: t0}, b: member{name: "a", created: t1}, want: true},
		{name: "same time: by name", a: member{name: "a", created: t0}, b: member{name: "b", created: t0}, want: true},
		{name: "the one that recorded the cluster first", a: member{name: "z", created: t1, recordedID: "x", clusterID: "x"},
			b: member{name: "a", created: t0, clusterID: "x"}, want: true},
		{name: "a recorded duplicate comes last", a: member{name: "a", created: t0, recordedDuplicate: true, recordedID: "x", clusterID: "x"},
			b: member{name: "z", created: t1, clusterID: "x"}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, registeredBefore(&tt.a, &tt.b))
			require.Equal(t, !tt.want, registeredBefore(&tt.b, &tt.a), "the order is strict")
		})
	}
}
