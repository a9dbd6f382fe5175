package v1alpha1_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	"github.com/fluxfed/fluxfed/internal/testenv"
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

	t.Run("the policy defaults to mirrored namespaces, none created, and baseline pods", func(t *testing.T) {
		got := &fedv1alpha1.MemberCluster{}
		require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: "member-a"}, got))
		require.Equal(t, fedv1alpha1.MemberNamespaces{Allow: fedv1alpha1.NamespaceAllowMirror}, got.Spec.Namespaces)
		require.Equal(t, fedv1alpha1.PodSecurityBaseline, got.Spec.PodSecurity.Level)
		stored := &unstructured.Unstructured{}
		stored.SetGroupVersionKind(fedv1alpha1.GroupVersion.WithKind("MemberCluster"))
		require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: "member-a"}, stored))
		create, found, err := unstructured.NestedBool(stored.Object, "spec", "namespaces", "create")
		require.NoError(t, err)
		require.True(t, found, "the default of create is visible in the stored object")
		require.False(t, create)
	})

	t.Run("a listed policy, namespace creation and the restricted level are accepted", func(t *testing.T) {
		mcl := &fedv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "member-listed"},
			Spec: fedv1alpha1.MemberClusterSpec{
				KubeconfigSecretRef: fedv1alpha1.KubeconfigSecretRef{Name: "member-listed"},
				Namespaces: fedv1alpha1.MemberNamespaces{Allow: fedv1alpha1.NamespaceAllowListed,
					Names: []fedv1alpha1.MemberNamespaceName{"team-a", "hpc-burst", "kube"}, Create: true},
				PodSecurity: fedv1alpha1.MemberPodSecurity{Level: fedv1alpha1.PodSecurityRestricted},
			}}
		require.NoError(t, env.Client.Create(ctx, mcl, client.FieldValidation(metav1.FieldValidationStrict)))
		got := &fedv1alpha1.MemberCluster{}
		require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(mcl), got))
		require.Equal(t, mcl.Spec, got.Spec)
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
			requireRefused(t, env.Client, mcl, tt.field, "")
		})
	}

	listed := func(names ...fedv1alpha1.MemberNamespaceName) fedv1alpha1.MemberNamespaces {
		return fedv1alpha1.MemberNamespaces{Allow: fedv1alpha1.NamespaceAllowListed, Names: names}
	}
	reserved := "are never burst into"
	policies := []struct {
		name        string
		namespaces  fedv1alpha1.MemberNamespaces
		level       fedv1alpha1.PodSecurityLevel
		field, says string
	}{
		{name: "listed without names", namespaces: listed(), field: "spec.namespaces.names", says: "when allow is Listed"},
		{name: "names with mirror", namespaces: fedv1alpha1.MemberNamespaces{Allow: fedv1alpha1.NamespaceAllowMirror, Names: []fedv1alpha1.MemberNamespaceName{"team-a"}},
			field: "spec.namespaces.names", says: "and only then"},
		{name: "an unknown allow", namespaces: fedv1alpha1.MemberNamespaces{Allow: "Every"}, field: "spec.namespaces.allow"},
		{name: "allow in lower case", namespaces: fedv1alpha1.MemberNamespaces{Allow: "listed", Names: []fedv1alpha1.MemberNamespaceName{"a"}}, field: "spec.namespaces.allow"},
		{name: "kube-system", namespaces: listed("team-a", "kube-system"), field: "spec.namespaces.names[1]", says: reserved},
		{name: "kube-public", namespaces: listed("kube-public"), field: "spec.namespaces.names[0]", says: reserved},
		{name: "kube-node-lease", namespaces: listed("kube-node-lease"), field: "spec.namespaces.names[0]", says: reserved},
		{name: "another kube- namespace", namespaces: listed("kube-flannel"), field: "spec.namespaces.names[0]", says: reserved},
		{name: "fluxfed-system", namespaces: listed("fluxfed-system"), field: "spec.namespaces.names[0]", says: reserved},
		{name: "kube-system in capitals", namespaces: listed("Kube-System"), field: "spec.namespaces.names[0]"},
		{name: "a name with a trailing space", namespaces: listed("kube-system "), field: "spec.namespaces.names[0]"},
		{name: "an empty name", namespaces: listed(""), field: "spec.namespaces.names[0]"},
		{name: "a name with a dot", namespaces: listed("team.a"), field: "spec.namespaces.names[0]"},
		{name: "a name too long", namespaces: listed(fedv1alpha1.MemberNamespaceName(strings.Repeat("a", 64))), field: "spec.namespaces.names[0]"},
		{name: "a name listed twice", namespaces: listed("team-a", "team-a"), field: "spec.namespaces.names[1]"},
		{name: "an unknown level", level: "none", field: "spec.podSecurity.level"},
		{name: "a level in capitals", level: "Privileged", field: "spec.podSecurity.level"},
	}
	for i, tt := range policies {
		t.Run(tt.name, func(t *testing.T) {
			mcl := &fedv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "refused-policy-" + string(rune('a'+i))},
				Spec: fedv1alpha1.MemberClusterSpec{
					KubeconfigSecretRef: fedv1alpha1.KubeconfigSecretRef{Name: "member"},
					Namespaces:          tt.namespaces,
					PodSecurity:         fedv1alpha1.MemberPodSecurity{Level: tt.level},
				}}
			requireRefused(t, env.Client, mcl, tt.field, tt.says)
		})
	}
}

// requireRefused creates mcl and requires the API server to refuse it as Invalid, naming field
// among the causes, with a message that contains says, and to store nothing.
func requireRefused(t *testing.T, c client.Client, mcl *fedv1alpha1.MemberCluster, field, says string) {
	t.Helper()
	ctx := context.Background()
	err := c.Create(ctx, mcl)
	require.True(t, apierrors.IsInvalid(err), "want Invalid, got %v", err)
	var status *apierrors.StatusError
	require.True(t, errors.As(err, &status))
	var fields []string
	for _, c := range status.ErrStatus.Details.Causes {
		fields = append(fields, c.Field)
	}
	require.Contains(t, fields, field, "the refusal names the field: %v", err)
	require.Contains(t, err.Error(), says)
	require.True(t, apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(mcl), &fedv1alpha1.MemberCluster{})),
		"nothing was stored")
}
