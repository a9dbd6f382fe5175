package membership

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
)

func TestRefuseRegistered(t *testing.T) {
	s, err := scheme()
	require.NoError(t, err)
	kubeconfig, err := buildKubeconfig(Options{Name: "old", MemberServer: "https://10.0.0.9:6443", Member: testConfig}, "t")
	require.NoError(t, err)
	hubClient := fake.NewClientBuilder().WithScheme(s).WithObjects(
		&fedv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "member-a"},
			Spec:   fedv1alpha1.MemberClusterSpec{KubeconfigSecretRef: fedv1alpha1.KubeconfigSecretRef{Name: "member-a-kubeconfig"}},
			Status: fedv1alpha1.MemberClusterStatus{ClusterID: "id-a"}},
		&fedv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "shared"},
			Spec: fedv1alpha1.MemberClusterSpec{KubeconfigSecretRef: fedv1alpha1.KubeconfigSecretRef{Name: "member-c-kubeconfig"}}},
		&fedv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "connecting"},
			Spec: fedv1alpha1.MemberClusterSpec{KubeconfigSecretRef: fedv1alpha1.KubeconfigSecretRef{Name: "connecting-kubeconfig"}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fluxfed-system", Name: "connecting-kubeconfig"},
			Data: map[string][]byte{"kubeconfig": kubeconfig}},
	).Build()
	ctx := context.Background()
	for name, tc := range map[string]struct{ name, id, server, wantErr string }{
		"new":                   {"member-b", "id-b", "https://10.0.0.2:6443", ""},
		"its name":              {"member-a", "id-b", "https://10.0.0.2:6443", "member member-a: already registered on the hub (cluster ID id-a)"},
		"its cluster ID":        {"member-b", "id-a", "https://10.0.0.2:6443", "cluster id-a: already registered on the hub as member member-a"},
		"its Secret":            {"member-c", "id-c", "https://10.0.0.3:6443", "member shared uses Secret fluxfed-system/member-c-kubeconfig"},
		"a server not read yet": {"member-d", "id-d", "https://10.0.0.9:6443", "member connecting, whose cluster ID the hub has not read yet"},
	} {
		t.Run(name, func(t *testing.T) {
			err := refuseRegistered(ctx, hubClient, tc.name, tc.id, tc.server, "fluxfed-system")
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrAlreadyRegistered)
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestLifetime(t *testing.T) {
	require.Equal(t, "30 days", lifetime(720*time.Hour-3*time.Second))
	require.Equal(t, "2 days", lifetime(48*time.Hour))
	require.Equal(t, "47h59m0s", lifetime(48*time.Hour-time.Minute))
	require.Equal(t, "10m0s", lifetime(10*time.Minute))
}
