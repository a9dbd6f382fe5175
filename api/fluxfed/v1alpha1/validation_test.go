package v1alpha1_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	"github.com/fluxfed/fluxfed/e2e/testenv"
)

// The generated CRD, installed into a real kube-apiserver, is the MemberCluster's validation:
// these tests check what it refuses, with which field, and what it defaults.

func TestMemberClusterSchema(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()

	t.Run("the key defaults to kubeconfig, and the object is cluster-scoped", func(t *testing.T) {
		mcl := &fedv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "member-a"},
			Spec: fedv1alpha1.MemberClusterSpec{KubeconfigSecretRef: fedv1alpha1.KubeconfigSecretRef{Name: "member-a-kubeconfig"}}}
		require.NoError(t, env.Client.Create(ctx, mcl, client.FieldValidation(metav1.FieldValidationStrict)))
		got := &fedv1alpha1.MemberCluster{}
		require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: "member-a"}, got))
		require.Equal(t, "kubeconfig", got.Spec.KubeconfigSecretRef.Key)
		require.Empty(t, got.Namespace)
	})

	tests := []struct {
		name, secret, key string
		field             string
	}{
		{name: "no Secret", secret: "", field: "spec.kubeconfigSecretRef.name"},
		{name: "a Secret name with capitals", secret: "Member-A", field: "spec.kubeconfigSecretRef.name"},
		{name: "a Secret name with a slash", secret: "other-ns/kubeconfig", field: "spec.kubeconfigSecretRef.name"},
		{name: "a Secret name too long", secret: strings.Repeat("a", 254), field: "spec.kubeconfigSecretRef.name"},
		{name: "a key with a slash", secret: "member", key: "../config", field: "spec.kubeconfigSecretRef.key"},
		{name: "a key with a space", secret: "member", key: "kube config", field: "spec.kubeconfigSecretRef.key"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mcl := &fedv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "refused-" + string(rune('a'+i))},
				Spec: fedv1alpha1.MemberClusterSpec{KubeconfigSecretRef: fedv1alpha1.KubeconfigSecretRef{Name: tt.secret, Key: tt.key}}}
			err := env.Client.Create(ctx, mcl)
			require.True(t, apierrors.IsInvalid(err), "want Invalid, got %v", err)
			var status *apierrors.StatusError
			require.True(t, errors.As(err, &status))
			var fields []string
			for _, c := range status.ErrStatus.Details.Causes {
				fields = append(fields, c.Field)
			}
			require.Contains(t, fields, tt.field, "the refusal names the field: %v", err)
			require.True(t, apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(mcl), &fedv1alpha1.MemberCluster{})),
				"nothing was stored")
		})
	}
}
