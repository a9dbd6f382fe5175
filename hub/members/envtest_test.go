package members

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	"sigs.k8s.io/multicluster-runtime/providers/kubeconfig"

	"github.com/fluxfed/fluxfed/e2e/testenv"
)

func TestCheckedKubeconfigReachesARealAPIServer(t *testing.T) {
	env := testenv.Start(t)
	data, err := env.Kubeconfig()
	require.NoError(t, err)

	cfg, err := Check(data)
	require.NoError(t, err)
	require.NoError(t, Limits(7, 11, 5*time.Second)(cfg))
	require.InDelta(t, 7, cfg.QPS, 0)
	require.Equal(t, 11, cfg.Burst)
	require.Zero(t, cfg.Timeout, "no client timeout: it would cut watches")

	clientset, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	namespaces, err := clientset.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, namespaces.Items)
}

// TestProviderEngagesOnlyAcceptedKubeconfigs wires the checks into the multicluster-runtime
// kubeconfig provider the way the hub does, and shows that a refused kubeconfig never becomes a
// member cluster while an accepted one does.
func TestProviderEngagesOnlyAcceptedKubeconfigs(t *testing.T) {
	envs := testenv.StartN(t, 2)
	hub, member := envs[0], envs[1]
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)

	const membersNamespace = "fluxfed-system"
	require.NoError(t, hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: membersNamespace}}))

	// The backstop, recording what it refuses.
	var (
		mu       sync.Mutex
		refusals []error
	)
	backstop := func(cfg *rest.Config) error {
		err := CheckRESTConfig(cfg)
		if err != nil {
			mu.Lock()
			defer mu.Unlock()
			refusals = append(refusals, err)
		}
		return err
	}
	provider := kubeconfig.New(kubeconfig.Options{
		Namespace:      membersNamespace,
		ClusterOptions: []cluster.Option{func(o *cluster.Options) { o.Scheme = member.Scheme }},
		RESTOptions:    []func(*rest.Config) error{backstop, Limits(20, 40, 10*time.Second)},
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

	good, err := member.Kubeconfig()
	require.NoError(t, err)
	// The same member, reached through an exec plugin: the provider alone would build a client
	// that runs it inside the hub.
	kc, err := clientcmd.Load(good)
	require.NoError(t, err)
	for _, u := range kc.AuthInfos {
		*u = clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
			APIVersion:      "client.authentication.k8s.io/v1",
			Command:         "/bin/sh",
			Args:            []string{"-c", "exit 1"},
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		}}
	}
	withExec, err := clientcmd.Write(*kc)
	require.NoError(t, err)
	_, err = Check(withExec)
	require.ErrorContains(t, err, "uses an exec plugin")

	// The refused Secret first: the provider handles Secrets one at a time, so by the time the
	// accepted one is engaged the refused one has been tried.
	for _, s := range []struct {
		name string
		data []byte
	}{{"member-exec", withExec}, {"member-ok", good}} {
		require.NoError(t, hub.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name:      s.name,
				Namespace: membersNamespace,
				Labels:    map[string]string{kubeconfig.DefaultKubeconfigSecretLabel: "true"},
			},
			Data: map[string][]byte{kubeconfig.DefaultKubeconfigSecretKey: s.data},
		}))
	}

	var engaged cluster.Cluster
	require.Eventually(t, func() bool {
		engaged, err = mgr.GetCluster(ctx, "member-ok")
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "the accepted member never engaged: %v", err)
	var namespaces corev1.NamespaceList
	require.NoError(t, engaged.GetAPIReader().List(ctx, &namespaces))
	require.NotEmpty(t, namespaces.Items)

	require.Never(t, func() bool {
		_, err := mgr.GetCluster(ctx, "member-exec")
		return !errors.Is(err, multicluster.ErrClusterNotFound)
	}, 3*time.Second, 100*time.Millisecond, "the refused member was engaged")
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, refusals)
	for _, err := range refusals {
		require.EqualError(t, err, "kubeconfig refused: the user uses an exec plugin (users[].user.exec); "+
			"give the hub a token or a client certificate inline (token, or client-certificate-data and client-key-data)")
	}
}
