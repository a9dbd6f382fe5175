package hub_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hub"
	"github.com/fluxfed/fluxfed/member/render"
)

func TestARootBurstsOntoTwoMembers(t *testing.T) {
	f := startFederation(t, hub.Options{}, "member-a", "member-b")
	ctx := context.Background()
	ns := f.namespace(t)
	root := newRoot(ns, "lammps",
		fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 3},
		fluxv1alpha2.Burst{Name: "burst-b", Cluster: "member-b", Size: 2})
	require.NoError(t, f.hub.Client.Create(ctx, root))

	a := f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstApplied)
	require.Equal(t, fluxv1alpha2.BurstStatus{Name: "burst-a", Cluster: "member-a", Namespace: ns, Size: 3,
		Phase: fluxv1alpha2.BurstApplied, Message: "0 of 3 brokers ready"}, *a)
	f.waitBurst(t, root, "burst-b", fluxv1alpha2.BurstApplied)

	got := f.root(t, root)
	svc := &corev1.Service{}
	require.NoError(t, f.hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "lammps-lead-broker"}, svc))
	require.Equal(t, corev1.ServiceTypeNodePort, svc.Spec.Type)
	nodePort := svc.Spec.Ports[0].NodePort
	require.Equal(t, &fluxv1alpha2.LeadBrokerStatus{Address: "127.0.0.1", Port: nodePort}, got.Status.LeadBroker)
	require.Contains(t, got.Finalizers, fluxv1alpha2.FinalizerBursts)
	require.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, fluxv1alpha2.ConditionBursting))
	require.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, fluxv1alpha2.ConditionLeadBrokerReachable))
	require.True(t, meta.IsStatusConditionFalse(got.Status.Conditions, fluxv1alpha2.ConditionBurstsReady))

	rootCert := &corev1.Secret{}
	require.NoError(t, f.hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "lammps-curve"}, rootCert))
	for _, want := range []struct {
		member, name string
		size         int32
	}{{"member-a", "burst-a", 3}, {"member-b", "burst-b", 2}} {
		m := f.members[want.member]
		child := m.child(t, ns, want.name)
		require.NotNil(t, child, "child %s on %s", want.name, want.member)
		require.Equal(t, want.size, child.Spec.Size)
		require.Equal(t, map[string]string{
			fluxv1alpha2.LabelOriginHub: hubName, fluxv1alpha2.LabelOriginNamespace: ns, fluxv1alpha2.LabelOriginName: "lammps",
		}, child.Labels)
		require.Equal(t, string(got.UID), child.Annotations[fluxv1alpha2.AnnotationOriginUID])
		require.Equal(t, &fluxv1alpha2.LeadBroker{Name: "lammps", Address: "127.0.0.1", Port: nodePort, Size: 4}, child.Spec.Flux.Bursting.LeadBroker)
		require.Len(t, child.Spec.Flux.Bursting.Clusters, 2)
		for _, b := range child.Spec.Flux.Bursting.Clusters {
			require.Empty(t, b.Cluster, "children list the bursts without their clusters")
		}
		require.Empty(t, child.Spec.Containers[0].Command, "children run brokers only")

		cert := &corev1.Secret{}
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			require.NoError(c, m.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: want.name + "-curve"}, cert))
		}, wait, tick)
		require.Equal(t, rootCert.Data[render.KeyCurveCert], cert.Data[render.KeyCurveCert], "one certificate for the federation")
		require.Equal(t, child.UID, metav1.GetControllerOf(cert).UID, "the member deletes the Secret with the child")
	}
}
