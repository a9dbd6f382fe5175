package report_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stretchr/testify/require"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/internal/report"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

// TestStatusWritesOwnFieldsAndKnowsAStaleCache writes a MiniCluster's status as two owners, as
// the member and the hub do, on a real API server.
func TestStatusWritesOwnFieldsAndKnowsAStaleCache(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	mc := v1alpha2test.MiniCluster("report").Obj()
	require.NoError(t, env.Client.Create(ctx, mc))
	read := func() *fluxv1alpha2.MiniCluster {
		got := &fluxv1alpha2.MiniCluster{}
		require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(mc), got))
		return got
	}
	condition := func(typ, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason, Message: "m", LastTransitionTime: metav1.Unix(1, 0)}
	}
	member := &report.Status{Client: env.Client, Owner: "test-member"}
	hub := &report.Status{Client: env.Client, Owner: "test-hub"}

	before := read()
	require.False(t, member.Lags(before), "nothing written yet")
	require.NoError(t, member.Apply(ctx, before, &fluxv1alpha2.MiniClusterStatus{
		Size: 1, Conditions: []metav1.Condition{condition(fluxv1alpha2.ConditionReady, fluxv1alpha2.ReasonPodsReady)}}))
	require.True(t, member.Lags(before), "the version the status was written on is stale")
	require.False(t, hub.Lags(before), "each writer knows its own writes")

	after := read()
	require.NotEqual(t, before.ResourceVersion, after.ResourceVersion)
	require.False(t, member.Lags(after), "a version that holds the write is not stale")
	require.Equal(t, int32(1), after.Status.Size)

	// The hub writes its own condition; the member's stays, and the other way round.
	require.NoError(t, hub.Apply(ctx, after, &fluxv1alpha2.MiniClusterStatus{
		Conditions: []metav1.Condition{condition(fluxv1alpha2.ConditionBursting, fluxv1alpha2.ReasonBurstsApplied)}}))
	require.NoError(t, member.Apply(ctx, read(), &fluxv1alpha2.MiniClusterStatus{
		Size: 2, Conditions: []metav1.Condition{condition(fluxv1alpha2.ConditionReady, fluxv1alpha2.ReasonPodsNotReady)}}))
	both := read()
	require.Equal(t, int32(2), both.Status.Size)
	require.Equal(t, fluxv1alpha2.ReasonPodsNotReady, meta.FindStatusCondition(both.Status.Conditions, fluxv1alpha2.ConditionReady).Reason)
	require.NotNil(t, meta.FindStatusCondition(both.Status.Conditions, fluxv1alpha2.ConditionBursting), "the hub's condition is the hub's")

	// A write that changes nothing leaves no newer version to wait for: the object read is not
	// stale, or nothing would ever write its status again.
	current := read()
	require.NoError(t, member.Apply(ctx, current, &fluxv1alpha2.MiniClusterStatus{
		Size: 2, Conditions: []metav1.Condition{condition(fluxv1alpha2.ConditionReady, fluxv1alpha2.ReasonPodsNotReady)}}))
	require.Equal(t, current.ResourceVersion, read().ResourceVersion, "the same status again is no change")
	require.False(t, member.Lags(current), "a write that changed nothing")

	member.Forget(client.ObjectKeyFromObject(before))
	require.False(t, member.Lags(before), "forgotten")

	gone := v1alpha2test.MiniCluster("gone").Obj()
	err := member.Apply(ctx, gone, &fluxv1alpha2.MiniClusterStatus{Size: 1})
	require.ErrorContains(t, err, "writing the status of MiniCluster default/gone")
	require.False(t, member.Lags(gone), "a failed write is no write")
}
