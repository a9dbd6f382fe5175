package testenv

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// HubIdentity installs the deploy directory access (deploy/member-access or one built on it) on
// the API server as a member's owner would, lends it the namespaces lend (RoleBinding
// fluxfed-hub-burst in each, as docs/bursting.md says; they must exist), and returns a config
// that reaches the API server as the hub's ServiceAccount with a token from the TokenRequest API
// (envtest runs no token controller to fill a token Secret).
func (e *Env) HubIdentity(t testing.TB, access string, lend ...string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, e.ApplyDeploy(ctx, access))
	cs, err := kubernetes.NewForConfig(e.Config)
	require.NoError(t, err)
	for _, ns := range lend {
		_, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "fluxfed-hub-burst", Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "fluxfed-hub-burst"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "fluxfed-system", Name: "fluxfed-hub"}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	token, err := cs.CoreV1().ServiceAccounts("fluxfed-system").CreateToken(ctx, "fluxfed-hub", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return &rest.Config{Host: e.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: e.Config.CAData}, BearerToken: token.Status.Token}
}
