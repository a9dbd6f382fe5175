package members

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	"github.com/fluxfed/fluxfed/e2e/netguard"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

const (
	wait = 20 * time.Second
	tick = 20 * time.Millisecond
)

func TestMain(m *testing.M) { netguard.Main(m) }

// TestRegistry runs the registry against real API servers: a hub, where MemberClusters live,
// and a member. Every scenario has a registry of its own.
func TestRegistry(t *testing.T) {
	envs := testenv.StartN(t, 2)
	for _, tt := range []struct {
		name string
		test func(*testing.T, *testenv.Env, *testenv.Env)
	}{
		{"uses only checked kubeconfigs and reports the member", testTheRegistryUsesOnlyCheckedKubeconfigsAndReportsTheMember},
		{"notices an outage and the return", testTheRegistryNoticesAnOutageAndTheReturn},
		{"uses one registration of a cluster", testTheRegistryUsesOneRegistrationOfACluster},
		{"reports refused credentials", testTheRegistryReportsRefusedCredentials},
		{"a hanging member delays no other", testAHangingMemberDelaysNoOther},
		{"an expired token is reported as expired", testAnExpiredTokenIsReportedAsExpired},
		{"a rotated token is used at the next check", testARotatedTokenIsUsedAtTheNextCheck},
		{"a missing namespace is named", testAMissingNamespaceIsNamed},
		{"a member without fluxfed is not ready and says why", testAMemberWithoutFluxfedIsNotReadyAndSaysWhy},
	} {
		t.Run(tt.name, func(t *testing.T) { tt.test(t, envs[0], envs[1]) })
	}
}

// aware records the members the registry engages, as the manager's controllers would be.
type aware struct {
	mu      sync.Mutex
	engaged map[string]int
}

func (a *aware) Engage(_ context.Context, name multicluster.ClusterName, _ cluster.Cluster) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.engaged[string(name)]++
	return nil
}

func (a *aware) count(name string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.engaged[name]
}

// startRegistry runs a registry with fast health checks, its dials limited to loopback. local
// holds the MemberClusters State looks up.
func startRegistry(t *testing.T, local client.Reader) (*Registry, *aware) {
	t.Helper()
	r, err := NewRegistry(Options{
		HealthInterval: 100 * time.Millisecond, HealthTimeout: 500 * time.Millisecond, FailureThreshold: 2,
		ConnectTimeout: time.Second, SyncTimeout: 5 * time.Second,
		Dial: (&netguard.Dialer{}).DialContext,
	})
	require.NoError(t, err)
	r.local = local
	a := &aware{engaged: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx, a) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return r, a
}

func phase(r *Registry, name string) State {
	return r.State(context.Background(), name)
}

func waitPhase(t *testing.T, r *Registry, name string, want Phase, reason string) State {
	t.Helper()
	var s State
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		s = phase(r, name)
		require.Equal(c, want, s.Phase, "%s: %s %s", name, s.Reason, s.Message)
		require.Equal(c, reason, s.Reason)
	}, wait, tick)
	return s
}

func kubeconfigOf(t *testing.T, env *testenv.Env, server string) []byte {
	t.Helper()
	cfg := *env.Config
	if server != "" {
		cfg.Host = server
	}
	kc, err := testenv.Kubeconfig(&cfg)
	require.NoError(t, err)
	return kc
}

func testTheRegistryUsesOnlyCheckedKubeconfigsAndReportsTheMember(t *testing.T, hub, member *testenv.Env) {
	r, a := startRegistry(t, hub.Client)
	ctx := context.Background()
	for i := range 3 {
		require.NoError(t, member.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + string(rune('a'+i))}}))
	}

	// The same member through an exec plugin: refused before any connection is made.
	kc, err := clientcmd.Load(kubeconfigOf(t, member, ""))
	require.NoError(t, err)
	for _, u := range kc.AuthInfos {
		*u = clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: "/bin/sh",
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}
	}
	withExec, err := clientcmd.Write(*kc)
	require.NoError(t, err)
	r.Set(Registration{Name: "member-exec", Kubeconfig: withExec})
	refused := waitPhase(t, r, "member-exec", PhaseNotReady, fedv1alpha1.ReasonKubeconfigRefused)
	require.Contains(t, refused.Message, "uses an exec plugin")

	r.Set(Registration{Name: "member-ok", Kubeconfig: kubeconfigOf(t, member, "")})
	ready := waitPhase(t, r, "member-ok", PhaseReady, fedv1alpha1.ReasonConnected)
	require.NotNil(t, ready.Cluster)
	var namespaces corev1.NamespaceList
	require.NoError(t, ready.Cluster.GetAPIReader().List(ctx, &namespaces))

	system := &corev1.Namespace{}
	require.NoError(t, member.Client.Get(ctx, client.ObjectKey{Name: "kube-system"}, system))
	snap, ok := r.Snapshot("member-ok")
	require.True(t, ok)
	require.Equal(t, string(system.UID), snap.ClusterID, "the member's identity is its kube-system UID")
	require.Equal(t, "v1.36.3", snap.Version)
	require.Equal(t, int32(3), *snap.Nodes)
	require.False(t, snap.LastSeen.IsZero())
	require.Equal(t, 1, a.count("member-ok"))
	require.Zero(t, a.count("member-exec"), "a refused kubeconfig is never engaged")
	_, err = r.Get(ctx, "member-exec")
	require.ErrorIs(t, err, multicluster.ErrClusterNotFound)
	require.Equal(t, []multicluster.ClusterName{"member-ok"}, r.ListClusters())

	// Unknown names: registered on the hub but not yet seen, or not registered at all.
	require.Equal(t, PhaseNotRegistered, phase(r, "nobody").Phase)
	require.NoError(t, hub.Client.Create(ctx, &fedv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "later"},
		Spec: fedv1alpha1.MemberClusterSpec{KubeconfigSecretRef: fedv1alpha1.KubeconfigSecretRef{Name: "x"}}}))
	require.Equal(t, PhaseUnknown, phase(r, "later").Phase)

	// Rotated to a kubeconfig with an inline token and a client key read from a path: refused,
	// and the member is no longer used at all, not even with the credentials it had.
	kc, err = clientcmd.Load(kubeconfigOf(t, member, ""))
	require.NoError(t, err)
	for _, u := range kc.AuthInfos {
		*u = clientcmdapi.AuthInfo{Token: "inline-token", ClientKey: "/var/run/secrets/hub/key.pem"}
	}
	tokenAndKeyPath, err := clientcmd.Write(*kc)
	require.NoError(t, err)
	r.Set(Registration{Name: "member-ok", Kubeconfig: tokenAndKeyPath})
	refused = waitPhase(t, r, "member-ok", PhaseNotReady, fedv1alpha1.ReasonKubeconfigRefused)
	require.Contains(t, refused.Message, "reads its client key from a file")
	require.Nil(t, refused.Cluster)
	require.NotContains(t, refused.Message, "inline-token", "a refusal never quotes a credential")
	_, err = r.Get(ctx, "member-ok")
	require.ErrorIs(t, err, multicluster.ErrClusterNotFound, "a refused kubeconfig is never used to push")
	require.Empty(t, r.ListClusters())

	r.Remove("member-ok")
	require.Equal(t, PhaseNotRegistered, phase(r, "member-ok").Phase)
}

func testTheRegistryNoticesAnOutageAndTheReturn(t *testing.T, hub, member *testenv.Env) {
	r, a := startRegistry(t, hub.Client)
	p := testenv.StartProxy(t, member.Config.Host)
	r.Set(Registration{Name: "m", Kubeconfig: kubeconfigOf(t, member, p.URL())})
	first := waitPhase(t, r, "m", PhaseReady, fedv1alpha1.ReasonConnected)

	p.Cut()
	down := waitPhase(t, r, "m", PhaseNotReady, fedv1alpha1.ReasonUnreachable)
	require.Contains(t, down.Message, "did not answer")
	require.Nil(t, down.Cluster)
	require.Empty(t, r.ListClusters(), "a member that does not answer is not pushed to")

	p.Restore(t)
	back := waitPhase(t, r, "m", PhaseReady, fedv1alpha1.ReasonConnected)
	require.Greater(t, back.Epoch, first.Epoch, "the return is a new epoch: what was pushed is read again")
	require.Same(t, first.Cluster, back.Cluster, "the member was kept engaged through the outage")
	require.Equal(t, 1, a.count("m"))
}

func testTheRegistryUsesOneRegistrationOfACluster(t *testing.T, hub, member *testenv.Env) {
	r, a := startRegistry(t, hub.Client)
	now := metav1.Now()
	r.Set(Registration{Name: "first", Created: now, Kubeconfig: kubeconfigOf(t, member, "")})
	waitPhase(t, r, "first", PhaseReady, fedv1alpha1.ReasonConnected)

	// The same cluster under another name, through another URL.
	p := testenv.StartProxy(t, member.Config.Host)
	r.Set(Registration{Name: "second", Created: metav1.NewTime(now.Add(time.Second)), Kubeconfig: kubeconfigOf(t, member, p.URL())})
	dup := waitPhase(t, r, "second", PhaseNotReady, fedv1alpha1.ReasonDuplicateCluster)
	require.Contains(t, dup.Message, "MemberCluster first registers already")
	require.Zero(t, a.count("second"), "a duplicate is never engaged")
	require.Never(t, func() bool { return phase(r, "first").Phase != PhaseReady }, time.Second, tick, "the first is left alone")
	require.Equal(t, 1, a.count("first"))

	// An older registration that comes later does not displace the one in use.
	r.Set(Registration{Name: "older", Created: metav1.NewTime(now.Add(-time.Hour)), Kubeconfig: kubeconfigOf(t, member, p.URL())})
	waitPhase(t, r, "older", PhaseNotReady, fedv1alpha1.ReasonDuplicateCluster)
	require.Equal(t, PhaseReady, phase(r, "first").Phase)

	// With the first gone, the oldest of the others takes over.
	r.Remove("first")
	waitPhase(t, r, "older", PhaseReady, fedv1alpha1.ReasonConnected)
	require.Equal(t, PhaseNotReady, phase(r, "second").Phase)
}

func testTheRegistryReportsRefusedCredentials(t *testing.T, hub, member *testenv.Env) {
	r, _ := startRegistry(t, hub.Client)
	nobody, err := member.AddUser("registry-nobody")
	require.NoError(t, err)
	kc, err := testenv.Kubeconfig(nobody)
	require.NoError(t, err)
	r.Set(Registration{Name: "m", Kubeconfig: kc})
	s := waitPhase(t, r, "m", PhaseNotReady, fedv1alpha1.ReasonAccessDenied)
	require.Contains(t, s.Message, "namespace kube-system")
}

func testAHangingMemberDelaysNoOther(t *testing.T, hub, member *testenv.Env) {
	r, _ := startRegistry(t, hub.Client)
	silent := testenv.SilentServer(t)
	r.Set(Registration{Name: "hanging", Kubeconfig: kubeconfigOf(t, member, "https://"+silent)})
	r.Set(Registration{Name: "ok", Kubeconfig: kubeconfigOf(t, member, "")})
	waitPhase(t, r, "ok", PhaseReady, fedv1alpha1.ReasonConnected)
	require.Equal(t, PhaseUnknown, phase(r, "hanging").Phase, "one check timing out concludes nothing")
	s := waitPhase(t, r, "hanging", PhaseNotReady, fedv1alpha1.ReasonUnreachable)
	require.Contains(t, s.Message, "deadline exceeded")
}
