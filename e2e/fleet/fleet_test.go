package fleet

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	"github.com/fluxfed/fluxfed/hub/members"
)

func TestTail(t *testing.T) {
	tests := []struct {
		data string
		n    int
		want string
	}{
		{"", 3, ""},
		{"a\nb\n", 3, "a\nb\n"},
		{"a\nb\nc\nd\n", 2, "c\nd\n"},
		{"a\nb\nc", 1, "c"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, tail([]byte(tt.data), tt.n), "%q, %d", tt.data, tt.n)
	}
}

func TestRealNodesAndRealFluxAreOneOrTheOther(t *testing.T) {
	dir := t.TempDir()
	_, err := Start(context.Background(), Options{Dir: dir, RealNodes: 1, RealFlux: true})
	require.EqualError(t, err, "fleet: RealFlux runs Flux behind simulated pods and RealNodes runs the pods for real, Flux in them: set one of the two")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing was built or started")
}

// TestManagersRunAsTheirServiceAccounts starts a fleet of a hub and one member and checks what
// the end-to-end tests rely on: each manager acts as fluxfed's ServiceAccount (so missing RBAC
// shows), and the member is registered with a kubeconfig the hub accepts, as the hub's
// ServiceAccount on the member.
func TestManagersRunAsTheirServiceAccounts(t *testing.T) {
	f := StartT(t, Options{Members: []string{"member-a"}})
	ctx := context.Background()
	whoAmI := func(kubeconfig []byte) string {
		cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
		require.NoError(t, err)
		cs, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		require.NoError(t, err)
		return review.Status.UserInfo.Username
	}
	for _, c := range f.Env.Clusters {
		kc, err := clientcmd.LoadFromFile(filepath.Join(c.Dir, "manager.kubeconfig"))
		require.NoError(t, err)
		data, err := clientcmd.Write(*kc)
		require.NoError(t, err)
		require.Equal(t, "system:serviceaccount:fluxfed-system:fluxfed-manager", whoAmI(data), c.Name)
	}

	mc := &fedv1alpha1.MemberCluster{}
	require.NoError(t, f.Clients["hub"].Get(ctx, client.ObjectKey{Name: "member-a"}, mc))
	secret := &corev1.Secret{}
	require.NoError(t, f.Clients["hub"].Get(ctx, client.ObjectKey{Namespace: Namespace, Name: mc.Spec.KubeconfigSecretRef.Name}, secret))
	_, err := members.Check(secret.Data["kubeconfig"])
	require.NoError(t, err, "the hub accepts the member's kubeconfig")
	require.Equal(t, "system:serviceaccount:fluxfed-system:fluxfed-hub", whoAmI(secret.Data["kubeconfig"]))
}
