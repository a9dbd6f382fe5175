package members

import (
	"context"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

// testAMemberWithoutFluxfedIsNotReadyAndSaysWhy removes the MiniCluster CRD from the member:
// the member answers, but cannot take bursts, and is reported so until the CRD is back.
func testAMemberWithoutFluxfedIsNotReadyAndSaysWhy(t *testing.T, hub, member *testenv.Env) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	require.NoError(t, apiextensionsv1.AddToScheme(scheme))
	crds, err := client.New(member.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, crds.Get(ctx, client.ObjectKey{Name: MiniClusterCRD}, crd))
	require.NoError(t, crds.Delete(ctx, crd))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cs, err := kubernetes.NewForConfig(member.Config)
		require.NoError(c, err)
		served, err := servesMiniClusters(ctx, cs)
		require.NoError(c, err)
		require.False(c, served)
	}, wait, tick)
	restore := crd.DeepCopy()
	restore.ObjectMeta = metav1.ObjectMeta{Name: crd.Name, Labels: crd.Labels, Annotations: crd.Annotations}
	restore.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	t.Cleanup(func() {
		if err := crds.Create(ctx, restore.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Errorf("restoring the CRD: %v", err)
		}
	})

	r, a := startRegistry(t, hub.Client)
	r.Set(Registration{Name: "bare", Kubeconfig: kubeconfigOf(t, member, ""), Scope: NewScope("research")})
	s := waitPhase(t, r, "bare", PhaseNotReady, fedv1alpha1.ReasonFluxfedMissing)
	require.Equal(t, "the member answers but does not serve the MiniCluster API (CustomResourceDefinition miniclusters.flux-framework.org, "+
		"flux-framework.org/v1alpha2): fluxfed is not installed there, and no burst can run there; install fluxfed on the member: "+
		"kubectl apply --server-side -k deploy/default, or the chart with --set mode=member", s.Message)
	snap, _ := r.Snapshot("bare")
	require.Equal(t, ptr.To(false), snap.Fluxfed)
	require.False(t, snap.LastSeen.IsZero(), "the member answers")
	require.Never(t, func() bool { return a.count("bare") > 0 }, time.Second, tick, "a member without the MiniCluster API is never engaged")

	// Installed: used at the next health check.
	require.NoError(t, crds.Create(ctx, restore.DeepCopy()))
	waitPhase(t, r, "bare", PhaseReady, fedv1alpha1.ReasonConnected)
	snap, _ = r.Snapshot("bare")
	require.Equal(t, ptr.To(true), snap.Fluxfed)
	require.Equal(t, 1, a.count("bare"))
}

// testAnExpiredTokenIsReportedAsExpired registers a token whose exp is in the past: the
// member refuses it (401), and the hub says it expired and how to mint a new one, not that its
// role lacks a permission.
func testAnExpiredTokenIsReportedAsExpired(t *testing.T, hub, member *testenv.Env) {
	r, _ := startRegistry(t, hub.Client)
	expired := time.Now().Add(-time.Hour).Truncate(time.Second).UTC()
	token := "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf(`{"exp":%d,"sub":"system:serviceaccount:fluxfed-system:fluxfed-hub"}`, expired.Unix()))) + ".c2lnbmF0dXJl"
	kc, err := testenv.Kubeconfig(&rest.Config{Host: member.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: member.Config.CAData}, BearerToken: token})
	require.NoError(t, err)
	r.Set(Registration{Name: "m", Kubeconfig: kc, Secret: "fluxfed-system/m-kubeconfig"})
	s := waitPhase(t, r, "m", PhaseNotReady, fedv1alpha1.ReasonCredentialsRefused)
	require.Equal(t, "the member did not accept the hub's credentials (401 Unauthorized): the kubeconfig's token expired at "+
		expired.Format(time.RFC3339)+"; mint a new token on the member (kubectl create token fluxfed-hub -n fluxfed-system --duration=720h) "+
		"and put it in the kubeconfig of Secret fluxfed-system/m-kubeconfig; the hub uses it at its next health check, without a restart", s.Message)
	require.NotContains(t, s.Message, "role", "an expired token is not a missing permission")
}

// testARotatedTokenIsUsedAtTheNextCheck gives the hub a ServiceAccount token, revokes it (the
// ServiceAccount is deleted and made again) and registers a new one, as a Secret update does:
// the member is Ready again within a health interval or two, with no restart. The hub's
// identity may not read namespaces, so a namespace that is not lent is reported as such.
func testARotatedTokenIsUsedAtTheNextCheck(t *testing.T, hub, member *testenv.Env) {
	ctx := context.Background()
	r, _ := startRegistry(t, hub.Client)
	require.NoError(t, member.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lent"}}))
	identity := member.HubIdentity(t, "member-access", "lent")
	kc, err := testenv.Kubeconfig(identity)
	require.NoError(t, err)
	reg := Registration{Name: "m", Kubeconfig: kc, Secret: "fluxfed-system/m-kubeconfig", Namespaces: []string{"lent", "not-lent"}}
	r.Set(reg)
	waitPhase(t, r, "m", PhaseReady, fedv1alpha1.ReasonConnected)
	snap, _ := r.Snapshot("m")
	require.Equal(t, "token", snap.ExpiryOf)
	require.WithinDuration(t, time.Now().Add(time.Hour), snap.Expiry, time.Minute, "the token's exp, read without verifying it")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		snap, _ := r.Snapshot("m")
		require.True(c, snap.NamespacesChecked)
		require.Equal(c, []string{"not-lent"}, snap.UnlentNamespaces)
		require.Empty(c, snap.MissingNamespaces, "the hub may not read namespaces there: it does not claim one is missing")
	}, wait, tick)

	// Revoked: the ServiceAccount is made again, with another UID.
	cs, err := kubernetes.NewForConfig(member.Config)
	require.NoError(t, err)
	require.NoError(t, cs.CoreV1().ServiceAccounts("fluxfed-system").Delete(ctx, "fluxfed-hub", metav1.DeleteOptions{}))
	_, err = cs.CoreV1().ServiceAccounts("fluxfed-system").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "fluxfed-hub"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	refused := waitPhase(t, r, "m", PhaseNotReady, fedv1alpha1.ReasonCredentialsRefused)
	require.Contains(t, refused.Message, "was revoked or is not the member's")

	token, err := cs.CoreV1().ServiceAccounts("fluxfed-system").CreateToken(ctx, "fluxfed-hub", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](7200)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	rotated := rest.CopyConfig(identity)
	rotated.BearerToken = token.Status.Token
	reg.Kubeconfig, err = testenv.Kubeconfig(rotated)
	require.NoError(t, err)
	start := time.Now()
	r.Set(reg)
	waitPhase(t, r, "m", PhaseReady, fedv1alpha1.ReasonConnected)
	took := time.Since(start)
	t.Logf("Ready again %v after the rotation (health interval %v)", took, r.opts.HealthInterval)
	require.Less(t, took, 2*r.opts.HealthInterval+r.opts.HealthTimeout, "the new token is used at once")
	snap, _ = r.Snapshot("m")
	require.WithinDuration(t, time.Now().Add(2*time.Hour), snap.Expiry, time.Minute, "the new token's expiry")
}

// testAMissingNamespaceIsNamed registers namespaces with an identity that may read them: one
// that does not exist is named, unless the hub may create it.
func testAMissingNamespaceIsNamed(t *testing.T, hub, member *testenv.Env) {
	ctx := context.Background()
	r, _ := startRegistry(t, hub.Client)
	require.NoError(t, member.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "present"}}))
	r.Set(Registration{Name: "m", Kubeconfig: kubeconfigOf(t, member, ""), Namespaces: []string{"absent", "present"}})
	waitPhase(t, r, "m", PhaseReady, fedv1alpha1.ReasonConnected)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		snap, _ := r.Snapshot("m")
		require.True(c, snap.NamespacesChecked)
		require.Equal(c, []string{"absent"}, snap.MissingNamespaces)
	}, wait, tick)

	r.Set(Registration{Name: "m", Kubeconfig: kubeconfigOf(t, member, ""), Namespaces: []string{"absent", "present"}, CreateNamespaces: true})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		snap, _ := r.Snapshot("m")
		require.True(c, snap.NamespacesChecked)
		require.Empty(c, snap.MissingNamespaces, "the hub creates it")
	}, wait, tick)
}
