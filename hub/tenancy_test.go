package hub_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hub"
	"github.com/fluxfed/fluxfed/hub/members"
)

// These scenarios are a hostile hub user's and a hostile member user's: a root whose bursts are
// named like objects that are not the hub's, and objects planted on a member with the labels the
// hub puts on what it pushes. The hub must neither change nor delete any of them, nor hand them a
// certificate.

// someoneElses creates, on member m, a MiniCluster that is not the hub's and returns it as
// stored (the member's own reconciler runs it, as it would any MiniCluster).
func someoneElses(t *testing.T, m *memberCluster, ns, name string, labels, annotations map[string]string) *fluxv1alpha2.MiniCluster {
	t.Helper()
	mc := &fluxv1alpha2.MiniCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Annotations: annotations},
		Spec:       fluxv1alpha2.MiniClusterSpec{Size: 1, Containers: []fluxv1alpha2.Container{{Image: "registry.example/payroll:1"}}},
	}
	require.NoError(t, m.env.Client.Create(context.Background(), mc))
	return mc
}

// someoneElsesSecret creates, on member m, a Secret that is not the hub's.
func someoneElsesSecret(t *testing.T, m *memberCluster, ns, name string, labels, annotations map[string]string) *corev1.Secret {
	t.Helper()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Annotations: annotations},
		Data:       map[string][]byte{"password": []byte("hunter2")},
	}
	require.NoError(t, m.env.Client.Create(context.Background(), secret))
	return secret
}

// requireUntouched checks that the hub never wrote obj: it is the same object, with the same
// labels, annotations and spec or data, and the hub manages no field of it.
func requireUntouched(t *testing.T, m *memberCluster, obj client.Object) {
	t.Helper()
	got := obj.DeepCopyObject().(client.Object)
	require.NoError(t, m.env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), got), "%s is still there", obj.GetName())
	require.Equal(t, obj.GetUID(), got.GetUID())
	require.Equal(t, obj.GetLabels(), got.GetLabels())
	require.Equal(t, obj.GetAnnotations(), got.GetAnnotations())
	for _, f := range got.GetManagedFields() {
		require.NotEqual(t, fluxv1alpha2.FieldOwnerHub, f.Manager, "the hub wrote %s", obj.GetName())
	}
	switch o := obj.(type) {
	case *fluxv1alpha2.MiniCluster:
		require.Equal(t, o.Spec, got.(*fluxv1alpha2.MiniCluster).Spec)
	case *corev1.Secret:
		require.Equal(t, o.Data, got.(*corev1.Secret).Data)
	}
}

func testABurstNamedLikeSomeoneElsesObjectsTakesNothingOver(t *testing.T, f *federation) {
	ctx := context.Background()
	ns := f.namespace(t)
	a := f.members["member-a"]
	require.NoError(t, a.env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	// Another team's MiniCluster, and an unrelated Secret named like a child's CURVE Secret.
	payroll := someoneElses(t, a, ns, "payroll", nil, nil)
	password := someoneElsesSecret(t, a, ns, "db-curve", nil, nil)

	root := newRoot(ns, "attacker",
		fluxv1alpha2.Burst{Name: "payroll", Cluster: "member-a", Size: 1},
		fluxv1alpha2.Burst{Name: "db", Cluster: "member-a", Size: 1},
		fluxv1alpha2.Burst{Name: "burst-b", Cluster: "member-b", Size: 1})
	require.NoError(t, f.hub.Client.Create(ctx, root))
	failed := f.waitBurst(t, root, "payroll", fluxv1alpha2.BurstFailed)
	require.Contains(t, failed.Message, fluxv1alpha2.ReasonConflict)
	require.Contains(t, failed.Message, "MiniCluster "+ns+"/payroll")
	require.Contains(t, failed.Message, "not fluxfed's")
	failed = f.waitBurst(t, root, "db", fluxv1alpha2.BurstFailed)
	require.Contains(t, failed.Message, "Secret "+ns+"/db-curve")
	f.waitBurst(t, root, "burst-b", fluxv1alpha2.BurstApplied) // the rest of the federation goes on

	require.NoError(t, f.hub.Client.Delete(ctx, root))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, apierrors.IsNotFound(f.hub.Client.Get(ctx, client.ObjectKeyFromObject(root), &fluxv1alpha2.MiniCluster{})))
		require.Nil(c, f.members["member-b"].child(c, ns, "burst-b"))
		require.Nil(c, a.child(c, ns, "db"), "the child the hub created is deleted with the root")
	}, wait, tick)
	_, err := f.reconc.Sweep(ctx)
	require.NoError(t, err)
	requireUntouched(t, a, payroll)
	requireUntouched(t, a, password)
}

func testAChildPlantedWithTheHubsLabelsIsNeverAdopted(t *testing.T, f *federation) {
	ctx := context.Background()
	ns := f.namespace(t)
	a := f.members["member-a"]
	require.NoError(t, a.env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	// Everything the hub writes on what it pushes for root ns/victim, forged: the labels, and an
	// origin UID, which a squatter can read from the root.
	forged := map[string]string{
		fluxv1alpha2.LabelOriginHub: hubName, fluxv1alpha2.LabelOriginNamespace: ns, fluxv1alpha2.LabelOriginName: "victim",
	}
	originUID := map[string]string{fluxv1alpha2.AnnotationOriginUID: "6b1b1d3e-0000-4000-8000-00000000000f"}
	squat := someoneElses(t, a, ns, "burst-a", forged, originUID)
	squatSecret := someoneElsesSecret(t, a, ns, "burst-a-curve", forged, originUID)

	root := newRoot(ns, "victim", fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 1})
	require.NoError(t, f.hub.Client.Create(ctx, root))
	failed := f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstFailed)
	require.Contains(t, failed.Message, fluxv1alpha2.ReasonConflict)
	for _, p := range f.root(t, root).Status.Pushed {
		require.Empty(t, p.UID, "nothing was created: %s %s is recorded only as an intent", p.Kind, p.Name)
	}
	// The squatter's Secret did not get the root's certificate, and its child was not rewritten.
	time.Sleep(time.Second)
	requireUntouched(t, a, squat)
	requireUntouched(t, a, squatSecret)

	// Deleting the root, and the orphan sweep, leave the squatter's objects alone too.
	require.NoError(t, f.hub.Client.Delete(ctx, root))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, apierrors.IsNotFound(f.hub.Client.Get(ctx, client.ObjectKeyFromObject(root), &fluxv1alpha2.MiniCluster{})))
	}, wait, tick)
	deleted, err := f.reconc.Sweep(ctx)
	require.NoError(t, err)
	require.Empty(t, deleted)
	requireUntouched(t, a, squat)
	requireUntouched(t, a, squatSecret)
}

func testTheRootRecordsWhatTheHubCreated(t *testing.T, f *federation) {
	ctx := context.Background()
	ns, root := f.burstOntoBoth(t, "ledger")
	got := f.root(t, root)
	uids := map[string]string{}
	for _, p := range got.Status.Pushed {
		uids[p.Cluster+" "+p.Kind+" "+p.Namespace+"/"+p.Name] = p.UID
	}
	for _, m := range []struct{ member, child string }{{"member-a", "burst-a"}, {"member-b", "burst-b"}} {
		c := f.members[m.member].child(t, ns, m.child)
		require.Equal(t, string(c.UID), uids[m.member+" MiniCluster "+ns+"/"+m.child])
		s := &corev1.Secret{}
		require.NoError(t, f.members[m.member].env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.child + "-curve"}, s))
		require.Equal(t, string(s.UID), uids[m.member+" Secret "+ns+"/"+m.child+"-curve"])
	}
	require.Len(t, uids, 4)

	require.NoError(t, f.hub.Client.Delete(ctx, root))
}

// setPolicy sets the namespace and Pod Security policy of member's MemberCluster, and puts back
// the one it had when the test ends.
func (f *federation) setPolicy(t *testing.T, member string, ns fedv1alpha1.MemberNamespaces, level fedv1alpha1.PodSecurityLevel) {
	t.Helper()
	ctx := context.Background()
	set := func(spec func(*fedv1alpha1.MemberClusterSpec)) {
		mcl := f.memberCluster(t, member)
		patch := client.MergeFrom(mcl.DeepCopy())
		spec(&mcl.Spec)
		require.NoError(t, f.hub.Client.Patch(ctx, mcl, patch))
	}
	was := f.memberCluster(t, member).Spec
	t.Cleanup(func() {
		set(func(s *fedv1alpha1.MemberClusterSpec) { s.Namespaces, s.PodSecurity = was.Namespaces, was.PodSecurity })
	})
	set(func(s *fedv1alpha1.MemberClusterSpec) {
		s.Namespaces, s.PodSecurity = ns, fedv1alpha1.MemberPodSecurity{Level: level}
	})
}

func testTheMembersOwnerDecidesWhereAndWhatTheHubPushes(t *testing.T, f *federation) {
	ctx := context.Background()
	b := f.members["member-b"]
	// member-b's owner lets roots burst only into the namespace named like theirs, and does not
	// let the hub create it.
	f.setPolicy(t, "member-b", fedv1alpha1.MemberNamespaces{Allow: fedv1alpha1.NamespaceAllowMirror}, fedv1alpha1.PodSecurityBaseline)

	ns := f.namespace(t)
	root := newRoot(ns, "policed",
		fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 1},
		fluxv1alpha2.Burst{Name: "burst-b", Cluster: "member-b", Size: 1, Namespace: ns + "-elsewhere"})
	require.NoError(t, f.hub.Client.Create(ctx, root))
	refused := f.waitBurst(t, root, "burst-b", fluxv1alpha2.BurstFailed)
	require.Contains(t, refused.Message, fluxv1alpha2.ReasonNamespaceNotAllowed)
	require.Contains(t, refused.Message, "spec.namespaces.allow")
	require.Contains(t, refused.Message, "may burst only into namespace "+`"`+ns+`"`)
	f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstApplied)
	// A namespace the hub created carries the member's Pod Security level.
	created := &corev1.Namespace{}
	require.NoError(t, f.members["member-a"].env.Client.Get(ctx, client.ObjectKey{Name: ns}, created))
	require.Equal(t, "baseline", created.Labels["pod-security.kubernetes.io/enforce"])

	// Moved into the mirrored namespace, which does not exist there: not created, reported.
	f.edit(t, root, func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Flux.Bursting.Clusters[1].Namespace = "" })
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := burstStatus(f.root(c, root), "burst-b")
		require.NotNil(c, got)
		require.Contains(c, got.Message, "does not exist")
		require.Contains(c, got.Message, "spec.namespaces.create")
	}, wait, tick)
	require.True(t, apierrors.IsNotFound(b.env.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})), "the hub created no namespace")
	// The owner creates it: the burst goes there.
	require.NoError(t, b.env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	f.waitBurst(t, root, "burst-b", fluxv1alpha2.BurstApplied)

	// A root whose pods are privileged is refused before anything is pushed, naming the check.
	privileged := newRoot(ns, "privileged", fluxv1alpha2.Burst{Name: "burst-p", Cluster: "member-b", Size: 1})
	privileged.Spec.Containers[0].SecurityContext = &fluxv1alpha2.ContainerSecurityContext{
		SecurityContext: corev1.SecurityContext{Privileged: ptr.To(true)}}
	require.NoError(t, f.hub.Client.Create(ctx, privileged))
	refused = f.waitBurst(t, privileged, "burst-p", fluxv1alpha2.BurstFailed)
	require.Contains(t, refused.Message, fluxv1alpha2.ReasonPodSecurityViolation)
	require.Contains(t, refused.Message, "privileged")
	require.Nil(t, b.child(t, ns, "burst-p"), "nothing was pushed")
	require.NoError(t, f.hub.Client.Delete(ctx, privileged))
	require.NoError(t, f.hub.Client.Delete(ctx, root))
}

func testAChildTheOwnerNoLongerAllowsIsWithdrawn(t *testing.T, f *federation) {
	ctx := context.Background()
	ns, root := f.burstOntoBoth(t, "tightened")
	b := f.members["member-b"]
	require.NotNil(t, b.child(t, ns, "burst-b"))

	// member-b's owner now lets roots burst only into a namespace this root is not in.
	f.setPolicy(t, "member-b", fedv1alpha1.MemberNamespaces{Allow: fedv1alpha1.NamespaceAllowListed, Names: []fedv1alpha1.MemberNamespaceName{"research"}},
		fedv1alpha1.PodSecurityBaseline)
	refused := f.waitBurst(t, root, "burst-b", fluxv1alpha2.BurstFailed)
	require.Contains(t, refused.Message, fluxv1alpha2.ReasonNamespaceNotAllowed)
	require.Eventually(t, func() bool { return b.child(t, ns, "burst-b") == nil }, wait, tick, "the child stayed")
	require.True(t, apierrors.IsNotFound(b.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "burst-b-curve"}, &corev1.Secret{})),
		"the child's CURVE Secret stayed")
	f.requireEvent(t, ns, fluxv1alpha2.EventBurstRemoved, "deleted MiniCluster "+ns+"/burst-b and Secret "+ns+"/burst-b-curve on member member-b: "+
		"the member's owner no longer allows its burst there")
	// The other member's child is not touched, and the root no longer records member-b's.
	f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstApplied)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, p := range f.root(c, root).Status.Pushed {
			require.Equal(c, "member-a", p.Cluster)
		}
	}, wait, tick)
	require.NoError(t, f.hub.Client.Delete(ctx, root))
}

// TestAMemberLendsOnlyTheNamespacesItBinds runs the hub with the permissions deploy/hub gives it
// and reaches a member as the ServiceAccount of deploy/member-access alone, which the member's
// owner lends namespace "lent" with the RoleBinding docs/bursting.md gives: the hub watches and
// pushes there, a root whose mirrored namespace is not lent is refused by name and harms no one
// else, and lending it later lets the burst in.
func TestAMemberLendsOnlyTheNamespacesItBinds(t *testing.T) {
	f := startFederationAs(t, true, hub.Options{Members: members.Options{RecordInterval: time.Second}})
	ctx := context.Background()
	f.access = "member-access"
	x := f.addMember(t, "member-x")
	f.setPolicy(t, "member-x", fedv1alpha1.MemberNamespaces{Allow: fedv1alpha1.NamespaceAllowMirror}, fedv1alpha1.PodSecurityBaseline)
	f.waitMemberReady(t, "member-x")
	lend := func(ns string) {
		require.NoError(t, x.env.Client.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "fluxfed-hub-burst", Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "fluxfed-hub-burst"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "fluxfed-system", Name: "fluxfed-hub"}},
		}))
	}
	for _, ns := range []string{"lent", "unlent"} {
		require.NoError(t, f.hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
		require.NoError(t, x.env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	lend("lent")

	lent := newRoot("lent", "lent", fluxv1alpha2.Burst{Name: "burst-x", Cluster: "member-x", Size: 1})
	require.NoError(t, f.hub.Client.Create(ctx, lent))
	f.waitBurst(t, lent, "burst-x", fluxv1alpha2.BurstApplied)
	require.NotNil(t, x.child(t, "lent", "burst-x"))

	unlent := newRoot("unlent", "unlent", fluxv1alpha2.Burst{Name: "burst-x", Cluster: "member-x", Size: 1})
	require.NoError(t, f.hub.Client.Create(ctx, unlent))
	refused := f.waitBurst(t, unlent, "burst-x", fluxv1alpha2.BurstFailed)
	require.Contains(t, refused.Message, fluxv1alpha2.ReasonNamespaceNotAllowed)
	require.Contains(t, refused.Message, `namespace "unlent"`)
	require.Contains(t, refused.Message, "fluxfed-hub-burst")
	require.Nil(t, x.child(t, "unlent", "burst-x"))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		mcl := f.memberCluster(c, "member-x")
		require.True(c, meta.IsStatusConditionTrue(mcl.Status.Conditions, fedv1alpha1.ConditionReady), "the member stays ready")
		require.Equal(c, []string{"lent"}, mcl.Status.WatchedNamespaces)
		require.Equal(c, []string{"unlent"}, mcl.Status.DeniedNamespaces)
	}, wait, tick)
	// The other root's child is still watched: a change to it is put back.
	child := x.child(t, "lent", "burst-x")
	patch := client.MergeFrom(child.DeepCopy())
	child.Spec.Containers[0].Image = "example.test/edited:1"
	require.NoError(t, x.env.Client.Patch(ctx, child, patch))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, lent.Spec.Containers[0].Image, x.child(c, "lent", "burst-x").Spec.Containers[0].Image)
	}, wait, tick, "a drifted child in a lent namespace is not put back")

	// Lent later: the hub asks again, and the burst goes in.
	lend("unlent")
	f.waitBurst(t, unlent, "burst-x", fluxv1alpha2.BurstApplied)
	require.NotNil(t, x.child(t, "unlent", "burst-x"))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		mcl := f.memberCluster(c, "member-x")
		require.Equal(c, []string{"lent", "unlent"}, mcl.Status.WatchedNamespaces)
		require.Empty(c, mcl.Status.DeniedNamespaces)
	}, wait, tick)

	// Both roots go, and their children with them.
	require.NoError(t, f.hub.Client.Delete(ctx, lent))
	require.NoError(t, f.hub.Client.Delete(ctx, unlent))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Nil(c, x.child(c, "lent", "burst-x"))
		require.Nil(c, x.child(c, "unlent", "burst-x"))
	}, wait, tick)
}
