package members

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

func TestLackConditions(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
	mc := &fedv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "m", Generation: 1}}
	answers := Snapshot{Fluxfed: ptr.To(true), NamespacesChecked: true, Secret: "fluxfed-system/m-kubeconfig"}
	child := func(name string, age time.Duration, observed int64) fluxv1alpha2.MiniCluster {
		c := fluxv1alpha2.MiniCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: name,
			CreationTimestamp: metav1.NewTime(now.Add(-age))}}
		c.Status.ObservedGeneration = observed
		return c
	}
	tests := []struct {
		name     string
		snap     func(Snapshot) Snapshot
		children []fluxv1alpha2.MiniCluster
		cond     string
		status   metav1.ConditionStatus
		reason   string
		message  string
	}{
		{name: "no MiniCluster API", snap: func(s Snapshot) Snapshot { s.Fluxfed = ptr.To(false); return s },
			cond: fedv1alpha1.ConditionFluxfedInstalled, status: metav1.ConditionFalse, reason: fedv1alpha1.ReasonFluxfedMissing,
			message: "does not serve the MiniCluster API (CustomResourceDefinition miniclusters.flux-framework.org, flux-framework.org/v1alpha2): " +
				"fluxfed is not installed there, and no burst can run there; install fluxfed on the member: " +
				"kubectl apply --server-side -k deploy/default, or the chart with --set mode=member"},
		{name: "not asked yet", snap: func(s Snapshot) Snapshot { s.Fluxfed = nil; return s },
			cond: fedv1alpha1.ConditionFluxfedInstalled, status: metav1.ConditionUnknown, reason: fedv1alpha1.ReasonNotChecked},
		{name: "the API and no child yet", cond: fedv1alpha1.ConditionFluxfedInstalled, status: metav1.ConditionTrue,
			reason: fedv1alpha1.ReasonCRDInstalled, message: "the hub may not read the member's Deployments"},
		{name: "a young child without status", children: []fluxv1alpha2.MiniCluster{child("a", time.Minute, 0)},
			cond: fedv1alpha1.ConditionFluxfedInstalled, status: metav1.ConditionTrue, reason: fedv1alpha1.ReasonCRDInstalled},
		{name: "a child without status for long", children: []fluxv1alpha2.MiniCluster{child("a", 3*time.Minute, 0)},
			cond: fedv1alpha1.ConditionFluxfedInstalled, status: metav1.ConditionFalse, reason: fedv1alpha1.ReasonManagerNotAnswering,
			message: "child MiniCluster research/a has had no status from the member's fluxfed manager for 2m0s"},
		{name: "a reconciled child", children: []fluxv1alpha2.MiniCluster{child("a", 3*time.Minute, 0), child("b", time.Hour, 2)},
			cond: fedv1alpha1.ConditionFluxfedInstalled, status: metav1.ConditionTrue, reason: fedv1alpha1.ReasonFluxfedAnswering},
		{name: "namespaces fine", cond: fedv1alpha1.ConditionNamespacesAvailable, status: metav1.ConditionTrue,
			reason: fedv1alpha1.ReasonNamespacesAvailable},
		{name: "a missing namespace", snap: func(s Snapshot) Snapshot { s.MissingNamespaces = []string{"research"}; return s },
			cond: fedv1alpha1.ConditionNamespacesAvailable, status: metav1.ConditionFalse, reason: fedv1alpha1.ReasonNamespaceMissing,
			message: "namespace research does not exist on the member: create it there"},
		{name: "namespaces not lent", snap: func(s Snapshot) Snapshot { s.UnlentNamespaces = []string{"a", "b"}; return s },
			cond: fedv1alpha1.ConditionNamespacesAvailable, status: metav1.ConditionFalse, reason: fedv1alpha1.ReasonNamespaceNotLent,
			message: "the hub's identity on the member may not use namespaces a, b: they do not exist, or the member's owner has not bound " +
				"ClusterRole fluxfed-hub-burst there (kubectl create rolebinding fluxfed-hub-burst -n a --clusterrole=fluxfed-hub-burst " +
				"--serviceaccount=fluxfed-system:fluxfed-hub); the hub may not read namespaces on the member, so it cannot tell which"},
		{name: "no expiry", cond: fedv1alpha1.ConditionCredentialsValid, status: metav1.ConditionTrue, reason: fedv1alpha1.ReasonNoExpiry},
		{name: "a token that lasts", snap: func(s Snapshot) Snapshot { s.Expiry, s.ExpiryOf = now.Add(48*time.Hour), "token"; return s },
			cond: fedv1alpha1.ConditionCredentialsValid, status: metav1.ConditionTrue, reason: fedv1alpha1.ReasonExpiresLater,
			message: "the kubeconfig's token expires at 2026-11-26T10:00:00Z"},
		{name: "a token that expires within a day", snap: func(s Snapshot) Snapshot { s.Expiry, s.ExpiryOf = now.Add(5*time.Hour), "token"; return s },
			cond: fedv1alpha1.ConditionCredentialsValid, status: metav1.ConditionFalse, reason: fedv1alpha1.ReasonExpiresSoon,
			message: "the kubeconfig's token expires at 2026-11-24T15:00:00Z, within a day; mint a new token on the member " +
				"(kubectl create token fluxfed-hub -n fluxfed-system --duration=720h) and put it in the kubeconfig of Secret " +
				"fluxfed-system/m-kubeconfig; the hub uses it at its next health check, without a restart"},
		{name: "an expired certificate", snap: func(s Snapshot) Snapshot { s.Expiry, s.ExpiryOf = now.Add(-time.Hour), "client certificate"; return s },
			cond: fedv1alpha1.ConditionCredentialsValid, status: metav1.ConditionFalse, reason: fedv1alpha1.ReasonExpired,
			message: "the kubeconfig's client certificate expired at 2026-11-24T09:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := answers
			if tt.snap != nil {
				snap = tt.snap(snap)
			}
			var conditions []metav1.Condition
			lackConditions(&conditions, mc, snap, CountChildren(tt.children, now.Time), now)
			c := meta.FindStatusCondition(conditions, tt.cond)
			require.NotNil(t, c)
			require.Equal(t, tt.status, c.Status, c.Message)
			require.Equal(t, tt.reason, c.Reason)
			require.Contains(t, c.Message, tt.message)
			require.LessOrEqual(t, len(c.Message), 32768)
		})
	}
}

func TestTokenExpiry(t *testing.T) {
	exp, ok := tokenExpiry("eyJhbGciOiJSUzI1NiJ9.eyJleHAiOjE3OTU0ODY0MDAsInN1YiI6Imh1YiJ9.c2ln")
	require.True(t, ok)
	require.Equal(t, time.Unix(1795486400, 0).UTC(), exp)
	for _, token := range []string{"", "opaque-token", "a.b.c", "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJodWIifQ.c2ln"} {
		_, ok := tokenExpiry(token)
		require.False(t, ok, token)
	}
}

func FuzzTokenExpiry(f *testing.F) {
	f.Add("eyJhbGciOiJSUzI1NiJ9.eyJleHAiOjE3OTU0ODY0MDAsInN1YiI6Imh1YiJ9.c2ln")
	f.Add("x.eyJleHAiOjF9.y")
	f.Fuzz(func(t *testing.T, token string) {
		if exp, ok := tokenExpiry(token); ok && exp.IsZero() {
			t.Fatalf("an expiry of zero for %q", token)
		}
	})
}
