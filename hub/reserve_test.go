package hub_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// brokerObjects is what a restart of a MiniCluster's brokers would show in: its broker config
// and its Job.
type brokerObjects struct {
	config  map[string]string
	jobUID  string
	jobSpec string
}

func readBrokerObjects(t require.TestingT, c client.Client, ns, name string) (brokerObjects, bool) {
	cm := &corev1.ConfigMap{}
	job := &batchv1.Job{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name + "-flux-config"}, cm); err != nil {
		return brokerObjects{}, false
	}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, job); err != nil {
		return brokerObjects{}, false
	}
	template, err := job.Spec.Template.Marshal()
	require.NoError(t, err)
	return brokerObjects{config: cm.Data, jobUID: string(job.UID), jobSpec: string(template)}, true
}

// testResizingABurstWithinItsReservationRestartsNoBroker checks reserved ranks end to end: the
// hostlist reserves each burst's maxSize, a burst of size 0 has nothing on its member, and
// changing a burst's size changes the number of its child's pods and nothing else: no broker
// configuration, no Job template, no other child.
func testResizingABurstWithinItsReservationRestartsNoBroker(t *testing.T, f *federation) {
	ctx := context.Background()
	ns := f.namespace(t)
	a, b := f.members["member-a"], f.members["member-b"]
	root := newRoot(ns, "elastic",
		fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 0, MaxSize: 3},
		fluxv1alpha2.Burst{Name: "burst-b", Cluster: "member-b", Size: 1, MaxSize: 2})
	require.NoError(t, f.hub.Client.Create(ctx, root))

	reserved := f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstReserved)
	require.Equal(t, fluxv1alpha2.BurstStatus{Name: "burst-a", Cluster: "member-a", Namespace: ns, Size: 0, MaxSize: 3,
		Phase: fluxv1alpha2.BurstReserved, Message: "size 0: its 3 ranks are reserved and none runs"}, *reserved)
	f.waitBurst(t, root, "burst-b", fluxv1alpha2.BurstApplied)
	// The hostlist is the member reconciler's to write; it may come after the hub's status.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, "elastic-[0-3],burst-a-[0-2],burst-b-[0-1]", f.root(c, root).Status.Hostlist)
	}, wait, tick)
	require.True(t, meta.IsStatusConditionTrue(f.root(t, root).Status.Conditions, fluxv1alpha2.ConditionBursting), "a burst of size 0 is as asked")
	require.Nil(t, a.child(t, ns, "burst-a"), "nothing of a burst of size 0 is on its member")
	childB := b.child(t, ns, "burst-b")
	require.Equal(t, int32(1), childB.Spec.Size)
	require.Equal(t, int32(2), childB.Spec.MaxSize)
	require.Equal(t, []fluxv1alpha2.Burst{{Name: "burst-a", Size: 3}, {Name: "burst-b", Size: 2}}, childB.Spec.Flux.Bursting.Clusters,
		"children list every burst's reserved ranks")

	var rootBefore, bBefore brokerObjects
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var ok bool
		rootBefore, ok = readBrokerObjects(c, f.hub.Client, ns, "elastic")
		require.True(c, ok)
		bBefore, ok = readBrokerObjects(c, b.env.Client, ns, "burst-b")
		require.True(c, ok)
	}, wait, tick)
	childBGeneration := childB.Generation

	// burst-a starts: its child appears with 2 of its 3 ranks; nothing else changes.
	f.edit(t, root, func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Flux.Bursting.Clusters[0].Size = 2 })
	f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstApplied)
	childA := a.child(t, ns, "burst-a")
	require.Equal(t, int32(2), childA.Spec.Size)
	require.Equal(t, int32(3), childA.Spec.MaxSize)
	var aBefore brokerObjects
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var ok bool
		aBefore, ok = readBrokerObjects(c, a.env.Client, ns, "burst-a")
		require.True(c, ok)
	}, wait, tick)
	require.NotEmpty(t, aBefore.config[names.KeyBrokerTOML])
	require.Equal(t, childBGeneration, b.child(t, ns, "burst-b").Generation, "starting burst-a does not change burst-b's child")

	// burst-b grows to its maxSize, burst-a shrinks by one: only their Jobs' sizes move.
	f.edit(t, root, func(mc *fluxv1alpha2.MiniCluster) {
		mc.Spec.Flux.Bursting.Clusters[0].Size = 1
		mc.Spec.Flux.Bursting.Clusters[1].Size = 2
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, want := range []struct {
			m      *memberCluster
			name   string
			size   int32
			before brokerObjects
		}{{a, "burst-a", 1, aBefore}, {b, "burst-b", 2, bBefore}} {
			job := &batchv1.Job{}
			require.NoError(c, want.m.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: want.name}, job))
			require.Equal(c, want.size, *job.Spec.Parallelism, want.name)
			require.Equal(c, want.size, *job.Spec.Completions, want.name)
			now, ok := readBrokerObjects(c, want.m.env.Client, ns, want.name)
			require.True(c, ok)
			require.Equal(c, want.before, now, "%s: the broker config and Job template are unchanged", want.name)
		}
	}, wait, tick)
	rootNow, ok := readBrokerObjects(t, f.hub.Client, ns, "elastic")
	require.True(t, ok)
	require.Equal(t, rootBefore, rootNow, "the root's brokers are untouched")
	require.Equal(t, "elastic-[0-3],burst-a-[0-2],burst-b-[0-1]", f.root(t, root).Status.Hostlist)

	// Past the reservation the API server refuses, and says why.
	// A status write of the controllers in between is a conflict, not the answer: retried.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		mc := f.root(t, root)
		mc.Spec.Flux.Bursting.Clusters[1].Size = 3
		return f.hub.Client.Update(ctx, mc)
	})
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	require.ErrorContains(t, err, "size must not exceed maxSize")

	// Back to 0: burst-a's child and its Secret go, burst-b's stays as it is.
	childBGeneration = b.child(t, ns, "burst-b").Generation
	f.edit(t, root, func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Flux.Bursting.Clusters[0].Size = 0 })
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Nil(c, a.child(c, ns, "burst-a"))
		require.True(c, apierrors.IsNotFound(a.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "burst-a-curve"}, &corev1.Secret{})))
		s := burstStatus(f.root(c, root), "burst-a")
		require.NotNil(c, s)
		require.Equal(c, fluxv1alpha2.BurstReserved, s.Phase)
	}, wait, tick)
	f.requireEvent(t, ns, fluxv1alpha2.EventBurstRemoved, "its burst's size is 0")
	require.Equal(t, childBGeneration, b.child(t, ns, "burst-b").Generation, "resizing burst-a does not change burst-b's child")
	require.NoError(t, f.hub.Client.Delete(ctx, root))
}
