package hub_test

// A federation that stays coherent when the world changes: members that fail, hang, come back
// or are registered twice, a hub that restarts, objects that someone else changes.

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hub"
	"github.com/fluxfed/fluxfed/internal/testenv"
	"github.com/fluxfed/fluxfed/member/render/names"
)

func testAMemberClusterReportsTheMember(t *testing.T, f *federation) {
	ctx := context.Background()
	a := f.members["member-a"]
	system := &corev1.Namespace{}
	require.NoError(t, a.env.Client.Get(ctx, client.ObjectKey{Name: "kube-system"}, system))
	ns, _ := f.burstOntoBoth(t, "reported")

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		mc := f.memberCluster(c, "member-a")
		ready := meta.FindStatusCondition(mc.Status.Conditions, fedv1alpha1.ConditionReady)
		require.NotNil(c, ready)
		require.Equal(c, metav1.ConditionTrue, ready.Status)
		require.Equal(c, fedv1alpha1.ReasonConnected, ready.Reason)
		require.Equal(c, string(system.UID), mc.Status.ClusterID, "the cluster ID is the member's kube-system UID")
		require.Equal(c, "v1.36.3", mc.Status.KubernetesVersion)
		require.NotNil(c, mc.Status.Nodes)
		require.NotNil(c, mc.Status.LastHeartbeatTime)
		var children fluxv1alpha2.MiniClusterList
		require.NoError(c, a.env.Client.List(ctx, &children, client.MatchingLabels{fluxv1alpha2.LabelOriginHub: hubName}))
		require.Equal(c, int32(len(children.Items)), mc.Status.Children, "every child the hub keeps there")
	}, wait, tick)
	require.NotNil(t, a.child(t, ns, "burst-a"))

	// `kubectl get memberclusters` shows these columns, as the API server prints them.
	require.Equal(t, []string{"Name", "Ready", "Version", "Nodes", "Children", "Reason", "Age"},
		f.tableColumns(t, schema.GroupVersionResource{Group: fedv1alpha1.GroupName, Version: "v1alpha1", Resource: "memberclusters"}, 0))
	require.Equal(t, []string{"Fluxfed", "Credentials", "Cluster-ID", "Heartbeat"},
		f.tableColumns(t, schema.GroupVersionResource{Group: fedv1alpha1.GroupName, Version: "v1alpha1", Resource: "memberclusters"}, 1))
	require.Equal(t, []string{"Name", "Size", "Ready", "Phase", "Bursts", "Age"},
		f.tableColumns(t, schema.GroupVersionResource{Group: fluxv1alpha2.GroupName, Version: "v1alpha2", Resource: "miniclusters"}, 0))
	require.Equal(t, []string{"Lead-Broker"},
		f.tableColumns(t, schema.GroupVersionResource{Group: fluxv1alpha2.GroupName, Version: "v1alpha2", Resource: "miniclusters"}, 1))
}

// tableColumns returns the names of the columns the API server prints for resource at priority.
func (f *federation) tableColumns(t *testing.T, resource schema.GroupVersionResource, priority int32) []string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(f.hub.Config)
	require.NoError(t, err)
	data, err := cs.RESTClient().Get().AbsPath("/apis", resource.Group, resource.Version, resource.Resource).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
	require.NoError(t, err)
	var table metav1.Table
	require.NoError(t, json.Unmarshal(data, &table))
	var columns []string
	for _, c := range table.ColumnDefinitions {
		if c.Priority == priority {
			columns = append(columns, c.Name)
		}
	}
	return columns
}

func testASecondRegistrationOfAClusterIsNeverUsed(t *testing.T, f *federation) {
	ctx := context.Background()
	ns, root := f.burstOntoBoth(t, "registered-once")
	a := f.members["member-a"]
	before := a.child(t, ns, "burst-a")

	// member-a again, under another name.
	f.register(t, "member-a-again", a.env.Config)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ready := meta.FindStatusCondition(f.memberCluster(c, "member-a-again").Status.Conditions, fedv1alpha1.ConditionReady)
		require.NotNil(c, ready)
		require.Equal(c, metav1.ConditionFalse, ready.Status)
		require.Equal(c, fedv1alpha1.ReasonDuplicateCluster, ready.Reason)
		require.Contains(c, ready.Message, "MemberCluster member-a registers already")
	}, wait, tick)

	other := f.namespace(t)
	twice := newRoot(other, "twice", fluxv1alpha2.Burst{Name: "burst-again", Cluster: "member-a-again", Size: 1})
	require.NoError(t, f.hub.Client.Create(ctx, twice))
	failed := f.waitBurst(t, twice, "burst-again", fluxv1alpha2.BurstFailed)
	require.Contains(t, failed.Message, fluxv1alpha2.ReasonDuplicateCluster)
	require.Nil(t, a.child(t, other, "burst-again"), "nothing is pushed through the duplicate")

	// The first registration works on, untouched.
	time.Sleep(time.Second)
	after := a.child(t, ns, "burst-a")
	require.Equal(t, before.UID, after.UID, "the child through the first registration was not touched")
	require.Equal(t, before.Generation, after.Generation, "the child through the first registration was not touched")
	f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstApplied)
	require.True(t, meta.IsStatusConditionTrue(f.memberCluster(t, "member-a").Status.Conditions, fedv1alpha1.ConditionReady))
	require.NoError(t, f.hub.Client.Delete(ctx, twice))
	require.NoError(t, f.hub.Client.Delete(ctx, &fedv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "member-a-again"}}))
}

func testAHangingMemberDelaysNoOneElse(t *testing.T, f *federation) {
	ctx := context.Background()
	cfg := rest.CopyConfig(f.members["member-a"].env.Config)
	cfg.Host = "https://" + testenv.SilentServer(t)
	kc, err := testenv.Kubeconfig(cfg)
	require.NoError(t, err)
	f.registerKubeconfig(t, "member-hang", kc)

	// A root that does not burst onto the hanging member works as usual, and is deleted at once
	// (the cleanup timeout, minutes, is never waited for).
	ns, root := f.burstOntoBoth(t, "unbothered")
	require.NoError(t, f.hub.Client.Delete(ctx, root))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, apierrors.IsNotFound(f.hub.Client.Get(ctx, client.ObjectKeyFromObject(root), &fluxv1alpha2.MiniCluster{})))
		require.Nil(c, f.members["member-a"].child(c, ns, "burst-a"))
	}, wait, tick)

	// A root that does: its other burst is applied, the hanging one waits, then is reported.
	other := f.namespace(t)
	both := newRoot(other, "bothered",
		fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 1},
		fluxv1alpha2.Burst{Name: "burst-hang", Cluster: "member-hang", Size: 1})
	require.NoError(t, f.hub.Client.Create(ctx, both))
	f.waitBurst(t, both, "burst-a", fluxv1alpha2.BurstApplied)
	hung := f.waitBurst(t, both, "burst-hang", fluxv1alpha2.BurstUnreachable)
	require.Contains(t, hung.Message, "member member-hang is unreachable")
	require.NoError(t, f.hub.Client.Delete(ctx, both))
	require.NoError(t, f.hub.Client.Delete(ctx, &fedv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "member-hang"}}))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, apierrors.IsNotFound(f.hub.Client.Get(ctx, client.ObjectKeyFromObject(both), &fluxv1alpha2.MiniCluster{})),
			"a member that is no longer registered is not waited for")
	}, wait, tick)
}

func testWhatSomeoneElseChangesIsPutBack(t *testing.T, f *federation) {
	ctx := context.Background()
	ns, _ := f.burstOntoBoth(t, "drifting")
	a := f.members["member-a"]

	// The child scaled by hand on its member: its API server refuses, as the number of ranks of
	// a child is its burst's. An edit of a field the hub sets is put back.
	child := a.child(t, ns, "burst-a")
	scaled := child.DeepCopy()
	scaled.Spec.Size = 1
	require.True(t, apierrors.IsInvalid(a.env.Client.Patch(ctx, scaled, client.MergeFrom(child))))
	edited := child.DeepCopy()
	edited.Spec.Flux.LogLevel = ptr.To[int32](7)
	require.NoError(t, a.env.Client.Patch(ctx, edited, client.MergeFrom(child)))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, child.Spec.Flux.LogLevel, a.child(c, ns, "burst-a").Spec.Flux.LogLevel)
	}, wait, tick, "the edited child is put back")

	// Its Secret deleted.
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: ns, Name: "burst-a-curve"}
	require.NoError(t, a.env.Client.Get(ctx, key, secret))
	cert := secret.Data[names.KeyCurveCert]
	require.NoError(t, a.env.Client.Delete(ctx, secret))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &corev1.Secret{}
		require.NoError(c, a.env.Client.Get(ctx, key, got))
		require.NotEqual(c, secret.UID, got.UID)
		require.Equal(c, cert, got.Data[names.KeyCurveCert], "the root's certificate, byte for byte")
	}, wait, tick)

	// The lead broker Service changed, then deleted, on the hub.
	svc := &corev1.Service{}
	svcKey := client.ObjectKey{Namespace: ns, Name: "drifting-lead-broker"}
	require.NoError(t, f.hub.Client.Get(ctx, svcKey, svc))
	svc.Spec.PublishNotReadyAddresses = false
	require.NoError(t, f.hub.Client.Update(ctx, svc))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &corev1.Service{}
		require.NoError(c, f.hub.Client.Get(ctx, svcKey, got))
		require.True(c, got.Spec.PublishNotReadyAddresses)
	}, wait, tick)
	require.NoError(t, f.hub.Client.Delete(ctx, svc))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &corev1.Service{}
		require.NoError(c, f.hub.Client.Get(ctx, svcKey, got))
		require.NotEqual(c, svc.UID, got.UID)
	}, wait, tick)
	// The child deleted. (Without a garbage collector here, the objects the member made for the
	// old child stay; the e2e tests, which run one, see the new child become ready.)
	require.NoError(t, a.env.Client.Delete(ctx, a.child(t, ns, "burst-a")))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := a.child(c, ns, "burst-a")
		require.NotNil(c, got)
		require.NotEqual(c, child.UID, got.UID)
	}, wait, tick, "the deleted child is created again")
}

func testAnOutageIsReportedAndWhatChangedMeanwhileIsPutBack(t *testing.T, f *federation) {
	ctx := context.Background()
	ns, root := f.burstOntoBoth(t, "outage")
	b := f.members["member-b"]

	b.proxy.Cut()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ready := meta.FindStatusCondition(f.memberCluster(c, "member-b").Status.Conditions, fedv1alpha1.ConditionReady)
		require.Equal(c, metav1.ConditionFalse, ready.Status)
		require.Equal(c, fedv1alpha1.ReasonUnreachable, ready.Reason)
	}, wait, tick)
	f.waitBurst(t, root, "burst-b", fluxv1alpha2.BurstUnreachable)
	f.requireEvent(t, metav1.NamespaceDefault, fedv1alpha1.ReasonUnreachable, "did not answer")

	// While the hub cannot see member-b, someone edits the child there.
	child := b.child(t, ns, "burst-b")
	edited := child.DeepCopy()
	edited.Spec.Flux.LogLevel = ptr.To[int32](7)
	require.NoError(t, b.env.Client.Patch(ctx, edited, client.MergeFrom(child)))

	b.proxy.Restore(t)
	f.waitBurst(t, root, "burst-b", fluxv1alpha2.BurstApplied)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, child.Spec.Flux.LogLevel, b.child(c, ns, "burst-b").Spec.Flux.LogLevel, "the member is re-synced when it answers again")
	}, wait, tick)
}

// TestARestartedHubReportsNothingItHasNotChecked restarts the hub under a federation, watching
// the root's status all along: no burst turns Unreachable, no condition turns False.
func TestARestartedHubReportsNothingItHasNotChecked(t *testing.T) {
	f := startFederation(t, hub.Options{}, "member-a", "member-b")
	ctx := context.Background()
	_, root := f.burstOntoBoth(t, "restarted")

	var mu sync.Mutex
	var seen []string
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	wc, err := client.NewWithWatch(f.hub.Config, client.Options{Scheme: f.hub.Scheme})
	require.NoError(t, err)
	watcher, err := wc.Watch(watchCtx, &fluxv1alpha2.MiniClusterList{},
		client.InNamespace(root.Namespace), client.MatchingFields{"metadata.name": root.Name})
	require.NoError(t, err)
	go func() {
		for e := range watcher.ResultChan() {
			mc, ok := e.Object.(*fluxv1alpha2.MiniCluster)
			if !ok {
				continue
			}
			mu.Lock()
			for _, s := range mc.Status.Bursts {
				seen = append(seen, s.Name+"="+string(s.Phase))
			}
			if c := meta.FindStatusCondition(mc.Status.Conditions, fluxv1alpha2.ConditionBursting); c != nil {
				seen = append(seen, "Bursting="+string(c.Status)+"/"+c.Reason)
			}
			mu.Unlock()
		}
	}()

	for range 3 {
		f.stopHub()
		f.startHub(t)
		f.waitMemberReady(t, "member-a")
		f.waitMemberReady(t, "member-b")
		// A change that the restarted hub must push: it has looked at both members by then.
		f.edit(t, root, func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Logging.Quiet = !mc.Spec.Logging.Quiet })
		want := f.root(t, root).Spec.Logging.Quiet
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			require.Equal(c, want, f.members["member-b"].child(c, root.Namespace, "burst-b").Spec.Logging.Quiet)
		}, wait, tick)
	}
	stop()
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, seen)
	for _, s := range seen {
		require.NotContains(t, s, string(fluxv1alpha2.BurstUnreachable))
		require.NotContains(t, s, "Bursting=False")
	}
}
