package hub

// This test pins down the multicluster-runtime behaviour the hub is designed around, at the
// versions go.mod pins: members registered as labelled kubeconfig Secrets are engaged with a
// cache that knows MiniClusters, and deleting the Secret disengages the member.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	"sigs.k8s.io/multicluster-runtime/providers/kubeconfig"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/testenv"
)

func TestKubeconfigProviderEngagesAndDisengagesMembers(t *testing.T) {
	envs := testenv.StartN(t, 2)
	hub, member := envs[0], envs[1]
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	const membersNamespace, memberName = "fluxfed-system", "member-a"
	require.NoError(t, hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: membersNamespace}}))

	provider := kubeconfig.New(kubeconfig.Options{
		Namespace:      membersNamespace,
		ClusterOptions: []cluster.Option{func(o *cluster.Options) { o.Scheme = member.Scheme }},
	})
	mgr, err := mcmanager.New(hub.Config, provider, manager.Options{
		Scheme:                 hub.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	require.NoError(t, err)
	require.NoError(t, provider.SetupWithManager(ctx, mgr))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})

	// A MiniCluster on the member, to be read back through the member's cache.
	mc := &fluxv1alpha2.MiniCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "burst-0", Namespace: "default"},
		Spec:       fluxv1alpha2.MiniClusterSpec{Containers: []fluxv1alpha2.Container{{Image: "rockylinux:9"}}},
	}
	require.NoError(t, member.Client.Create(ctx, mc))

	kc, err := member.Kubeconfig()
	require.NoError(t, err)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      memberName,
			Namespace: membersNamespace,
			Labels:    map[string]string{kubeconfig.DefaultKubeconfigSecretLabel: "true"},
		},
		Data: map[string][]byte{kubeconfig.DefaultKubeconfigSecretKey: kc},
	}
	require.NoError(t, hub.Client.Create(ctx, secret))

	var engaged cluster.Cluster
	require.Eventually(t, func() bool {
		engaged, err = mgr.GetCluster(ctx, memberName)
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "member %s never engaged: %v", memberName, err)

	got := &fluxv1alpha2.MiniCluster{}
	require.Eventually(t, func() bool {
		return engaged.GetClient().Get(ctx, client.ObjectKeyFromObject(mc), got) == nil
	}, 10*time.Second, 100*time.Millisecond, "the member's cache never served the MiniCluster")
	require.Equal(t, int32(1), got.Spec.Size, "read through the member cache, with schema defaults")

	require.NoError(t, hub.Client.Delete(ctx, secret))
	require.Eventually(t, func() bool {
		_, err := mgr.GetCluster(ctx, memberName)
		return errors.Is(err, multicluster.ErrClusterNotFound)
	}, 30*time.Second, 100*time.Millisecond, "member %s still engaged after its Secret was deleted", memberName)
}
