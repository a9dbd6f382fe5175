package membership_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/cmd/fluxfed/internal/membership"
	"github.com/fluxfed/fluxfed/e2e/fleet"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

// TestAddListRemoveOnTheLocalClusters registers member-a on a hub of the local clusters with
// Add, as `fluxfed member add` does, and removes it: a hub and a member that runs fluxfed, the
// member giving the hub nothing until Add.
func TestAddListRemoveOnTheLocalClusters(t *testing.T) {
	f := fleet.StartT(t, fleet.Options{Members: []string{"member-a"}, Unregistered: true})
	ctx := context.Background()
	hubConfig, memberConfig := f.Config("hub"), f.Config("member-a")
	hubClient, memberClient := f.Clients["hub"], f.Clients["member-a"]
	exists := func(t require.TestingT, c client.Client, obj client.Object) bool {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return false
		}
		require.NoError(t, err)
		return true
	}
	system := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}}
	require.True(t, exists(t, memberClient, system))

	// member add member-a --member-context member-a --lend research
	var out bytes.Buffer
	res, err := membership.Add(ctx, membership.Options{Name: "member-a", Hub: hubConfig, Member: memberConfig,
		Lend: []string{"research"}, Out: &out})
	t.Logf("member add member-a:\n%s", out.String())
	require.NoError(t, err)
	t.Logf("member add to Ready: %v (MemberCluster created to Ready: %v)", res.Elapsed, res.Ready.Sub(res.Registered))
	require.Equal(t, string(system.UID), res.ClusterID)
	require.WithinDuration(t, time.Now().Add(membership.DefaultTokenTTL), res.TokenExpires, time.Hour)
	for _, step := range []string{"cluster ID", "installed access from deploy/member-access (ServiceAccount fluxfed-system/fluxfed-hub",
		"lent namespace research", "minted a token", "built a kubeconfig", "created Secret fluxfed-system/member-a-kubeconfig and MemberCluster member-a",
		"waiting up to 2m0s for the hub to report it Ready", "Ready after",
		"data path: could not check: no lead broker endpoint to check: the hub exposes one per root that bursts",
		"next: burst a root onto it: in examples/bursting-root.yaml, set cluster: member-a on a burst of spec.flux.bursting.clusters, then\n",
		"  kubectl apply -n research -f examples/bursting-root.yaml\n", "  fluxfed status bursting-root -n research\n"} {
		require.Contains(t, out.String(), "member-a: "+step)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "fluxfed-system", Name: "fluxfed-hub"}}
	require.True(t, exists(t, memberClient, sa))
	require.Equal(t, membership.ManagedByCLI, sa.Labels[membership.LabelManagedBy], "what member add creates says so, for the chart to see")
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "fluxfed-hub-burst"}}
	require.True(t, exists(t, memberClient, rb))
	require.Equal(t, membership.ManagedByCLI, rb.Labels[membership.LabelManagedBy])
	mc := &fedv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "member-a"}}
	require.True(t, exists(t, hubClient, mc))
	require.Equal(t, string(system.UID), mc.Status.ClusterID)
	require.Equal(t, fedv1alpha1.NamespaceAllowMirror, mc.Spec.Namespaces.Allow)
	require.False(t, mc.Spec.Namespaces.Create)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fluxfed-system", Name: "member-a-kubeconfig"}}
	require.True(t, exists(t, hubClient, secret))
	kubeconfig := string(secret.Data["kubeconfig"])
	require.Contains(t, kubeconfig, "certificate-authority-data")
	require.Contains(t, kubeconfig, "token: ")
	require.NotContains(t, kubeconfig, "client-key", "the member's admin credentials stay off the hub")

	// Registered already: under its name, and under another (the same cluster ID). Nothing is
	// changed on either cluster.
	_, err = membership.Add(ctx, membership.Options{Name: "member-a", Hub: hubConfig, Member: memberConfig, Access: membership.AccessAny})
	require.ErrorIs(t, err, membership.ErrAlreadyRegistered)
	_, err = membership.Add(ctx, membership.Options{Name: "member-a2", Hub: hubConfig, Member: memberConfig, Access: membership.AccessAny})
	require.ErrorIs(t, err, membership.ErrAlreadyRegistered)
	require.ErrorContains(t, err, "as member member-a")
	require.False(t, exists(t, hubClient, &fedv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "member-a2"}}))
	require.False(t, exists(t, memberClient, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "fluxfed-hub-namespaces"}}),
		"a refused add installs nothing")

	// member list
	rows, err := membership.List(ctx, hubConfig)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, "member-a", rows[0].Name)
	require.Equal(t, "True", rows[0].Ready)
	require.Equal(t, fedv1alpha1.ReasonConnected, rows[0].Reason)
	require.Equal(t, string(system.UID), rows[0].ClusterID)
	var table bytes.Buffer
	require.NoError(t, membership.Print(&table, rows, time.Now(), membership.FormatWide))
	t.Logf("member list -o wide:\n%s", table.String())
	require.Regexp(t, `NAME\s+READY\s+REASON\s+VERSION\s+NODES\s+CHILDREN\s+HEARTBEAT\s+CLUSTER-ID\s+NAMESPACES\n`+
		`member-a\s+True\s+Connected\s+v1\.\d+\.\d+\s+2\s+0\s+\S+\s+`+string(system.UID), table.String())
	table.Reset()
	require.NoError(t, membership.Print(&table, rows, time.Now(), membership.FormatYAML))
	require.Contains(t, table.String(), "kind: MemberCluster\n")
	require.Contains(t, table.String(), "clusterID: "+string(system.UID))
	require.NotContains(t, table.String(), "managedFields")

	// A root that bursts onto member-a, into the lent namespace.
	require.NoError(t, hubClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "research"}}))
	root := exampleRoot(t)
	root.Namespace = "research"
	require.NoError(t, hubClient.Create(ctx, root))
	child := &fluxv1alpha2.MiniCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "burst-a"}}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, exists(c, memberClient, child))
	}, time.Minute, 100*time.Millisecond, "the hub pushes the child to member-a")

	// member remove member-a: refused while the child runs.
	out.Reset()
	err = membership.Remove(ctx, membership.RemoveOptions{Name: "member-a", Hub: hubConfig, Member: memberConfig, Out: &out})
	require.ErrorIs(t, err, membership.ErrChildrenRemain)
	require.ErrorContains(t, err, "research/burst-a (hub "+fleet.HubName+")")
	require.True(t, exists(t, hubClient, mc), "a refused remove removes nothing")
	require.True(t, exists(t, memberClient, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "fluxfed-system", Name: "fluxfed-hub"}}))

	// Once the root is deleted (and with it the child), it goes.
	require.NoError(t, hubClient.Delete(ctx, root))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.False(c, exists(c, memberClient, child.DeepCopy()))
		require.False(c, exists(c, hubClient, root.DeepCopy()))
	}, time.Minute, 100*time.Millisecond)
	out.Reset()
	require.NoError(t, membership.Remove(ctx, membership.RemoveOptions{Name: "member-a", Hub: hubConfig, Member: memberConfig, Out: &out}))
	t.Logf("member remove member-a:\n%s", out.String())
	requireGone(t, f)

	// Added again, lent whole, and removed with --force while a child runs there.
	out.Reset()
	res, err = membership.Add(ctx, membership.Options{Name: "member-a", Hub: hubConfig, Member: memberConfig,
		Access: membership.AccessAny, CreateNamespaces: true, NonExpiringToken: true, Out: &out})
	t.Logf("member add member-a --access any --create-namespaces --non-expiring-token:\n%s", out.String())
	require.NoError(t, err)
	require.Zero(t, res.TokenExpires)
	require.Contains(t, out.String(), "took the token of Secret fluxfed-system/fluxfed-hub-token")
	t.Logf("member add to Ready, again: %v", res.Elapsed)
	root = exampleRoot(t)
	root.Namespace = "research"
	require.NoError(t, hubClient.Create(ctx, root))
	child = &fluxv1alpha2.MiniCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "burst-a"}}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, exists(c, memberClient, child))
	}, time.Minute, 100*time.Millisecond)
	out.Reset()
	require.NoError(t, membership.Remove(ctx, membership.RemoveOptions{Name: "member-a", Hub: hubConfig, Member: memberConfig, Force: true, Out: &out}))
	t.Logf("member remove member-a --force:\n%s", out.String())
	require.Contains(t, out.String(), "member-a: leaving 1 child MiniCluster(s): research/burst-a")
	require.Contains(t, out.String(), "removed access (Secret fluxfed-system/fluxfed-hub-token, ")
	requireGone(t, f)
	require.False(t, exists(t, memberClient, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fluxfed-system", Name: "fluxfed-hub-token"}}))
	require.True(t, exists(t, memberClient, child), "--force leaves the children running")
}

// requireGone checks that nothing of member-a's registration is left on the hub or the member,
// but fluxfed itself on the member.
func requireGone(t *testing.T, f *fleet.Fleet) {
	t.Helper()
	ctx := context.Background()
	var mcs fedv1alpha1.MemberClusterList
	require.NoError(t, f.Clients["hub"].List(ctx, &mcs))
	require.Empty(t, mcs.Items)
	err := f.Clients["hub"].Get(ctx, client.ObjectKey{Namespace: "fluxfed-system", Name: "member-a-kubeconfig"}, &corev1.Secret{})
	require.True(t, apierrors.IsNotFound(err), "the kubeconfig Secret: %v", err)

	member := f.Clients["member-a"]
	err = member.Get(ctx, client.ObjectKey{Namespace: "fluxfed-system", Name: "fluxfed-hub"}, &corev1.ServiceAccount{})
	require.True(t, apierrors.IsNotFound(err), "the hub's ServiceAccount: %v", err)
	var roles rbacv1.ClusterRoleList
	require.NoError(t, member.List(ctx, &roles))
	for _, r := range roles.Items {
		require.False(t, strings.HasPrefix(r.Name, "fluxfed-hub"), "ClusterRole %s", r.Name)
	}
	var crbs rbacv1.ClusterRoleBindingList
	require.NoError(t, member.List(ctx, &crbs))
	for _, b := range crbs.Items {
		require.False(t, strings.HasPrefix(b.Name, "fluxfed-hub"), "ClusterRoleBinding %s", b.Name)
	}
	var rbs rbacv1.RoleBindingList
	require.NoError(t, member.List(ctx, &rbs))
	for _, b := range rbs.Items {
		require.NotEqual(t, "fluxfed-hub-burst", b.Name, "RoleBinding %s/%s", b.Namespace, b.Name)
	}
	require.NoError(t, member.Get(ctx, client.ObjectKey{Namespace: "fluxfed-system", Name: fleet.ManagerServiceAccount}, &corev1.ServiceAccount{}),
		"fluxfed itself stays on the member")
}

// exampleRoot is examples/bursting-root.yaml with its burst onto member-a only.
func exampleRoot(t *testing.T) *fluxv1alpha2.MiniCluster {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "bursting-root.yaml"))
	require.NoError(t, err)
	root := &fluxv1alpha2.MiniCluster{}
	require.NoError(t, yaml.Unmarshal(data, root))
	clusters := root.Spec.Flux.Bursting.Clusters
	require.Equal(t, "member-a", clusters[0].Cluster)
	root.Spec.Flux.Bursting.Clusters = clusters[:1]
	return root
}
