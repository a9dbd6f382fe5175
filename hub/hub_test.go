package hub_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/fluxcheck"
	"github.com/fluxfed/fluxfed/hub"
	"github.com/fluxfed/fluxfed/internal/metrics"
	"github.com/fluxfed/fluxfed/internal/testenv"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// TestOnOneFederation runs, on one hub and two members, the scenarios that do not disturb each
// other: each works in namespaces of its own, and the one that cuts a member comes last.
// Scenarios that rotate credentials, count requests, run the sweep in the background or run
// with other permissions have a federation of their own.
func TestOnOneFederation(t *testing.T) {
	f := startFederation(t, hub.Options{ProbeInterval: time.Second, FluxInterval: 300 * time.Millisecond, JoinTimeout: 2 * time.Second},
		"member-a", "member-b")
	for _, scenario := range []struct {
		name string
		run  func(*testing.T, *federation)
	}{
		{"ARootBurstsOntoTwoMembers", testARootBurstsOntoTwoMembers},
		{"TheRootReportsEveryBurstsState", testTheRootReportsEveryBurstsState},
		{"EditingTheRootUpdatesAndRemovesChildren", testEditingTheRootUpdatesAndRemovesChildren},
		{"DeletingTheRootDeletesItsChildrenEverywhere", testDeletingTheRootDeletesItsChildrenEverywhere},
		{"ARefusedKubeconfigIsReportedOnTheSecretAndTheRoot", testARefusedKubeconfigIsReportedOnTheSecretAndTheRoot},
		{"TwoRootsShareAMemberWithoutInterfering", testTwoRootsShareAMemberWithoutInterfering},
		{"MemberCachesHoldOnlyTheHubsObjects", testMemberCachesHoldOnlyTheHubsObjects},
		{"TheLeadBrokerAddressFollowsRankZero", testTheLeadBrokerAddressFollowsRankZero},
		{"AFederationThatCannotWorkIsRefusedWithAReason", testAFederationThatCannotWorkIsRefusedWithAReason},
		{"DeletingARootWhoseMemberIsNotRegisteredDoesNotWait", testDeletingARootWhoseMemberIsNotRegisteredDoesNotWait},
		{"ABurstNamedLikeSomeoneElsesObjectsTakesNothingOver", testABurstNamedLikeSomeoneElsesObjectsTakesNothingOver},
		{"AChildPlantedWithTheHubsLabelsIsNeverAdopted", testAChildPlantedWithTheHubsLabelsIsNeverAdopted},
		{"TheRootRecordsWhatTheHubCreated", testTheRootRecordsWhatTheHubCreated},
		{"TheMembersOwnerDecidesWhereAndWhatTheHubPushes", testTheMembersOwnerDecidesWhereAndWhatTheHubPushes},
		{"AChildTheOwnerNoLongerAllowsIsWithdrawn", testAChildTheOwnerNoLongerAllowsIsWithdrawn},
		{"AMemberRegisteredLaterGetsItsChild", testAMemberRegisteredLaterGetsItsChild},
		{"ALeadBrokerThatDoesNotAnswerIsReportedAndTheChildrenPushedAnyway", testALeadBrokerThatDoesNotAnswerIsReportedAndTheChildrenPushedAnyway},
		{"AMemberClusterReportsTheMember", testAMemberClusterReportsTheMember},
		{"ASecondRegistrationOfAClusterIsNeverUsed", testASecondRegistrationOfAClusterIsNeverUsed},
		{"AHangingMemberDelaysNoOneElse", testAHangingMemberDelaysNoOneElse},
		{"WhatSomeoneElseChangesIsPutBack", testWhatSomeoneElseChangesIsPutBack},
		{"ResizingABurstWithinItsReservationRestartsNoBroker", testResizingABurstWithinItsReservationRestartsNoBroker},
		{"FluxsViewOfTheBurstsIsReported", testFluxsViewOfTheBurstsIsReported},
		{"ABurstGrowsForWaitingJobsAndShrinksOnceDrained", testABurstGrowsForWaitingJobsAndShrinksOnceDrained},
		// Last: they cut member-b for a while.
		{"AnUnreachableMemberDoesNotStopTheOthers", testAnUnreachableMemberDoesNotStopTheOthers},
		{"AnOutageIsReportedAndWhatChangedMeanwhileIsPutBack", testAnOutageIsReportedAndWhatChangedMeanwhileIsPutBack},
	} {
		t.Run(scenario.name, func(t *testing.T) { scenario.run(t, f) })
	}
}

func testARootBurstsOntoTwoMembers(t *testing.T, f *federation) {
	ctx := context.Background()
	ns := f.namespace(t)
	root := newRoot(ns, "lammps",
		fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 3},
		fluxv1alpha2.Burst{Name: "burst-b", Cluster: "member-b", Size: 2})
	require.NoError(t, f.hub.Client.Create(ctx, root))

	a := f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstApplied)
	require.Equal(t, fluxv1alpha2.BurstStatus{Name: "burst-a", Cluster: "member-a", Namespace: ns, Size: 3, MaxSize: 3,
		Phase: fluxv1alpha2.BurstApplied, Message: "0 of 3 brokers ready"}, *a)
	f.waitBurst(t, root, "burst-b", fluxv1alpha2.BurstApplied)

	got := f.root(t, root)
	svc := &corev1.Service{}
	require.NoError(t, f.hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "lammps-lead-broker"}, svc))
	require.Equal(t, corev1.ServiceTypeNodePort, svc.Spec.Type)
	nodePort := svc.Spec.Ports[0].NodePort
	require.Equal(t, &fluxv1alpha2.LeadBrokerStatus{Address: "127.0.0.1", Port: nodePort, Endpoint: fmt.Sprintf("127.0.0.1:%d", nodePort)}, got.Status.LeadBroker)
	require.Equal(t, "0/2", got.Status.BurstSummary)
	require.Contains(t, got.Finalizers, fluxv1alpha2.FinalizerBursts)
	require.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, fluxv1alpha2.ConditionBursting))
	require.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, fluxv1alpha2.ConditionLeadBrokerReachable))
	require.True(t, meta.IsStatusConditionFalse(got.Status.Conditions, fluxv1alpha2.ConditionBurstsReady))

	rootCert := &corev1.Secret{}
	require.NoError(t, f.hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "lammps-curve"}, rootCert))
	for _, want := range []struct {
		member, name string
		size         int32
	}{{"member-a", "burst-a", 3}, {"member-b", "burst-b", 2}} {
		m := f.members[want.member]
		child := m.child(t, ns, want.name)
		require.NotNil(t, child, "child %s on %s", want.name, want.member)
		require.Equal(t, want.size, child.Spec.Size)
		require.Equal(t, map[string]string{
			fluxv1alpha2.LabelOriginHub: hubName, fluxv1alpha2.LabelOriginNamespace: ns, fluxv1alpha2.LabelOriginName: "lammps",
		}, child.Labels)
		require.Equal(t, string(got.UID), child.Annotations[fluxv1alpha2.AnnotationOriginUID])
		require.Equal(t, &fluxv1alpha2.LeadBroker{Name: "lammps", Address: "127.0.0.1", Port: nodePort, Size: 4}, child.Spec.Flux.Bursting.LeadBroker)
		require.Len(t, child.Spec.Flux.Bursting.Clusters, 2)
		for _, b := range child.Spec.Flux.Bursting.Clusters {
			require.Empty(t, b.Cluster, "children list the bursts without their clusters")
		}
		require.Empty(t, child.Spec.Containers[0].Command, "children run brokers only")

		cert := &corev1.Secret{}
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			require.NoError(c, m.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: want.name + "-curve"}, cert))
		}, wait, tick)
		require.Equal(t, rootCert.Data[names.KeyCurveCert], cert.Data[names.KeyCurveCert], "one certificate for the federation")
		require.Equal(t, child.UID, metav1.GetControllerOf(cert).UID, "the member deletes the Secret with the child")
	}

	// What every cluster's MiniCluster reconciler rendered, host by host, checked together: the
	// same rank for every host everywhere, every parent reachable from its broker's cluster.
	var configs []fluxcheck.HostConfig
	collect := func(c client.Client, cluster, name string, size int32) {
		cm := &corev1.ConfigMap{}
		require.EventuallyWithT(t, func(co *assert.CollectT) {
			require.NoError(co, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-flux-config"}, cm))
		}, wait, tick, "%s on %s was not rendered", name, cluster)
		cert := &corev1.Secret{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-curve"}, cert))
		for i := range size {
			configs = append(configs, fluxcheck.HostConfig{Hostname: fmt.Sprintf("%s-%d", name, i), Cluster: cluster,
				BrokerTOML: []byte(cm.Data[names.KeyBrokerTOML]), CurveCert: cert.Data[names.KeyCurveCert]})
		}
	}
	collect(f.hub.Client, "hub", "lammps", 2)
	collect(f.members["member-a"].env.Client, "member-a", "burst-a", 3)
	collect(f.members["member-b"].env.Client, "member-b", "burst-b", 2)
	require.NoError(t, fluxcheck.Check(configs))
}

// setJobReady makes the broker Job of a MiniCluster report n ready pods, as the Job controller
// would (envtest runs none).
func setJobReady(t *testing.T, c client.Client, ns, name string, n int32) {
	t.Helper()
	job := &batchv1.Job{}
	require.EventuallyWithT(t, func(co *assert.CollectT) {
		require.NoError(co, c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, job))
	}, wait, tick, "the Job %s/%s was never created", ns, name)
	patch := client.MergeFrom(job.DeepCopy())
	now := metav1.Now()
	job.Status.StartTime = &now
	job.Status.Active = n
	job.Status.Ready = ptr.To(n)
	require.NoError(t, c.Status().Patch(context.Background(), job, patch))
}

func testTheRootReportsEveryBurstsState(t *testing.T, f *federation) {
	ctx := context.Background()
	ns := f.namespace(t)
	root := newRoot(ns, "states",
		fluxv1alpha2.Burst{Name: "reserved", Size: 1},
		fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 3},
		fluxv1alpha2.Burst{Name: "burst-b", Cluster: "member-b", Size: 2})
	require.NoError(t, f.hub.Client.Create(ctx, root))
	f.waitBurst(t, root, "burst-b", fluxv1alpha2.BurstApplied)
	require.Nil(t, burstStatus(f.root(t, root), "reserved"), "a reserved burst is not the hub's to report")

	setJobReady(t, f.members["member-a"].env.Client, ns, "burst-a", 3)
	ready := f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstReady)
	require.Equal(t, int32(3), ready.Ready)
	require.Equal(t, "3 of 3 brokers ready", ready.Message)
	got := f.root(t, root)
	c := meta.FindStatusCondition(got.Status.Conditions, fluxv1alpha2.ConditionBurstsReady)
	require.Equal(t, metav1.ConditionFalse, c.Status)
	require.Equal(t, "1 of 2 bursts ready; not ready: burst-b", c.Message)

	setJobReady(t, f.members["member-b"].env.Client, ns, "burst-b", 2)
	f.waitBurst(t, root, "burst-b", fluxv1alpha2.BurstReady)
	require.EventuallyWithT(t, func(co *assert.CollectT) {
		require.True(co, meta.IsStatusConditionTrue(f.root(co, root).Status.Conditions, fluxv1alpha2.ConditionBurstsReady))
	}, wait, tick)

	// The member reconciler's conditions and the hub's live side by side on the root.
	got = f.root(t, root)
	for _, typ := range []string{fluxv1alpha2.ConditionReady, fluxv1alpha2.ConditionFailed, fluxv1alpha2.ConditionBursting,
		fluxv1alpha2.ConditionBurstsReady, fluxv1alpha2.ConditionLeadBrokerReachable} {
		require.NotNil(t, meta.FindStatusCondition(got.Status.Conditions, typ), typ)
	}
	require.Equal(t, "states-[0-3],reserved-0,burst-a-[0-2],burst-b-[0-1]", got.Status.Hostlist)
}

func testEditingTheRootUpdatesAndRemovesChildren(t *testing.T, f *federation) {
	ctx := context.Background()
	ns, root := f.burstOntoBoth(t, "edited")
	a, b := f.members["member-a"], f.members["member-b"]

	// A change of the layout is refused by the API server, and changes nothing. A status write
	// of the controllers in between is a conflict, not the answer: retried.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := f.root(t, root)
		got.Spec.Flux.Bursting.Clusters[0].MaxSize = 4
		return f.hub.Client.Update(ctx, got)
	})
	require.True(t, apierrors.IsInvalid(err), "resizing a burst: %v", err)
	require.Equal(t, int32(3), a.child(t, ns, "burst-a").Spec.Size)

	// An edit every child carries, and burst-b moved to member-a in another namespace.
	f.edit(t, root, func(got *fluxv1alpha2.MiniCluster) {
		got.Spec.Logging.Quiet = true
		got.Spec.Flux.Bursting.Clusters[1].Cluster = "member-a"
		got.Spec.Flux.Bursting.Clusters[1].Namespace = ns + "-moved"
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		child := a.child(c, ns, "burst-a")
		require.NotNil(c, child)
		require.True(c, child.Spec.Logging.Quiet, "the edit reaches the children")
		moved := a.child(c, ns+"-moved", "burst-b")
		require.NotNil(c, moved, "the moved burst's child is on member-a")
		require.Equal(c, []fluxv1alpha2.Burst{{Name: "burst-a", Size: 3}, {Name: "burst-b", Size: 2}}, moved.Spec.Flux.Bursting.Clusters,
			"every side computes the same hostlist")
		require.Nil(c, b.child(c, ns, "burst-b"), "the moved burst's child left member-b")
		require.True(c, apierrors.IsNotFound(b.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "burst-b-curve"}, &corev1.Secret{})))
		s := burstStatus(f.root(c, root), "burst-b")
		require.NotNil(c, s)
		require.Equal(c, "member-a", s.Cluster)
	}, wait, tick)
	f.requireEvent(t, ns, fluxv1alpha2.EventBurstRemoved, "deleted MiniCluster "+ns+"/burst-b and Secret "+ns+"/burst-b-curve on member member-b")
	require.Equal(t, "edited-[0-3],burst-a-[0-2],burst-b-[0-1]", f.root(t, root).Status.Hostlist, "the layout is unchanged")

	// Bursts that name no member any more are only reserved: their children go, and with no
	// burst left on a member the root is released.
	f.edit(t, root, func(got *fluxv1alpha2.MiniCluster) {
		for i := range got.Spec.Flux.Bursting.Clusters {
			got.Spec.Flux.Bursting.Clusters[i].Cluster = ""
		}
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Nil(c, a.child(c, ns, "burst-a"))
		require.Nil(c, a.child(c, ns+"-moved", "burst-b"))
		got := f.root(c, root)
		require.NotContains(c, got.Finalizers, fluxv1alpha2.FinalizerBursts)
		require.Empty(c, got.Status.Bursts)
		require.Empty(c, got.Status.BurstSummary)
		require.Nil(c, meta.FindStatusCondition(got.Status.Conditions, fluxv1alpha2.ConditionBursting))
		require.NotNil(c, meta.FindStatusCondition(got.Status.Conditions, fluxv1alpha2.ConditionReady), "the member reconciler's conditions stay")
	}, wait, tick)
}

// requireEvent waits for an event of reason in ns whose note contains note.
func (f *federation) requireEvent(t *testing.T, ns, reason, note string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var events eventsv1.EventList
		require.NoError(c, f.hub.Client.List(context.Background(), &events, client.InNamespace(ns)))
		var notes []string
		for _, e := range events.Items {
			if e.Reason == reason {
				notes = append(notes, e.Note)
				if strings.Contains(e.Note, note) {
					return
				}
			}
		}
		require.Failf(c, "no such event", "no %s event saying %q among %q", reason, note, notes)
	}, wait, tick)
}

func testDeletingTheRootDeletesItsChildrenEverywhere(t *testing.T, f *federation) {
	ctx := context.Background()
	ns, root := f.burstOntoBoth(t, "doomed")

	require.NoError(t, f.hub.Client.Delete(ctx, root))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, apierrors.IsNotFound(f.hub.Client.Get(ctx, client.ObjectKeyFromObject(root), &fluxv1alpha2.MiniCluster{})),
			"the finalizer is released")
		for _, m := range f.members {
			var children fluxv1alpha2.MiniClusterList
			require.NoError(c, m.env.Client.List(ctx, &children, client.InNamespace(ns)))
			require.Empty(c, children.Items, "children on %s", m.name)
			var secrets corev1.SecretList
			require.NoError(c, m.env.Client.List(ctx, &secrets, client.InNamespace(ns), client.HasLabels{fluxv1alpha2.LabelOriginHub}))
			require.Empty(c, secrets.Items, "Secrets on %s", m.name)
		}
	}, wait, tick)
}

func testAnUnreachableMemberDoesNotStopTheOthers(t *testing.T, f *federation) {
	ns, root := f.burstOntoBoth(t, "resilient")
	a, b := f.members["member-a"], f.members["member-b"]

	b.proxy.Cut()
	f.edit(t, root, func(got *fluxv1alpha2.MiniCluster) { got.Spec.Logging.Quiet = true })

	unreachable := f.waitBurst(t, root, "burst-b", fluxv1alpha2.BurstUnreachable)
	require.Contains(t, unreachable.Message, "member member-b is unreachable")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, a.child(c, ns, "burst-a").Spec.Logging.Quiet, "member-a is updated while member-b is down")
	}, wait, tick)
	got := f.root(t, root)
	cond := meta.FindStatusCondition(got.Status.Conditions, fluxv1alpha2.ConditionBursting)
	require.Equal(t, metav1.ConditionFalse, cond.Status)
	require.Equal(t, fluxv1alpha2.ReasonMemberUnreachable, cond.Reason)
	require.Contains(t, cond.Message, "burst-b on member-b")
	ready := meta.FindStatusCondition(got.Status.Conditions, fluxv1alpha2.ConditionBurstsReady)
	require.Equal(t, fluxv1alpha2.ReasonMemberUnreachable, ready.Reason)
	require.Contains(t, ready.Message, "member member-b is unreachable")
	require.NotNil(t, b.child(t, ns, "burst-b"), "nothing is deleted because a member is unreachable")

	b.proxy.Restore(t)
	f.waitBurst(t, root, "burst-b", fluxv1alpha2.BurstApplied)
	require.True(t, b.child(t, ns, "burst-b").Spec.Logging.Quiet, "member-b catches up once it answers")
}

func TestARotatedKubeconfigIsUsedAndADeletedOneDisengages(t *testing.T) {
	f := startFederation(t, hub.Options{}, "member-a")
	ctx := context.Background()
	ns := f.namespace(t)
	a := f.members["member-a"]
	root := newRoot(ns, "rotated", fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 3})
	require.NoError(t, f.hub.Client.Create(ctx, root))
	f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstApplied)

	// New credentials without any permission: the hub reconnects with them and is refused.
	nobody, err := a.env.AddUser("nobody")
	require.NoError(t, err)
	f.register(t, "member-a", nobody)
	f.edit(t, root, func(got *fluxv1alpha2.MiniCluster) { got.Spec.Logging.Quiet = true })
	denied := f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstFailed)
	require.Contains(t, denied.Message, "AccessDenied", "the old credentials are no longer used")
	require.Equal(t, fedv1alpha1.ReasonAccessDenied, meta.FindStatusCondition(f.memberCluster(t, "member-a").Status.Conditions, fedv1alpha1.ConditionReady).Reason)
	require.False(t, a.child(t, ns, "burst-a").Spec.Logging.Quiet)

	// Rotated back to credentials that may: the change goes through.
	f.register(t, "member-a", a.env.Config)
	f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstApplied)
	require.True(t, a.child(t, ns, "burst-a").Spec.Logging.Quiet)

	// Deleting the Secret disengages the member, and says so.
	require.NoError(t, f.hub.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "member-a-kubeconfig", Namespace: membersNamespace}}))
	gone := f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstFailed)
	require.Contains(t, gone.Message, "Secret fluxfed-system/member-a-kubeconfig does not exist")
	cond := meta.FindStatusCondition(f.root(t, root).Status.Conditions, fluxv1alpha2.ConditionBursting)
	require.Equal(t, fluxv1alpha2.ReasonMemberNotReady, cond.Reason)

	// Deleting the MemberCluster unregisters it.
	require.NoError(t, f.hub.Client.Delete(ctx, &fedv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "member-a"}}))
	unregistered := f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstUnreachable)
	require.Equal(t, "member member-a is not registered: no MemberCluster member-a is registered on the hub", unregistered.Message)
	require.NotNil(t, a.child(t, ns, "burst-a"), "the children stay on a member the hub no longer uses")
}

func testARefusedKubeconfigIsReportedOnTheSecretAndTheRoot(t *testing.T, f *federation) {
	ctx := context.Background()
	ns := f.namespace(t)
	kc, err := testenv.Kubeconfig(f.members["member-a"].env.Config)
	require.NoError(t, err)
	exec := []byte(string(kc) + `
users:
- name: envtest
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: /bin/steal-credentials
`)
	// The users list above replaces the inline credentials with an exec plugin.
	f.registerKubeconfig(t, "member-x", exec)
	root := newRoot(ns, "refused", fluxv1alpha2.Burst{Name: "burst-x", Cluster: "member-x", Size: 1})
	require.NoError(t, f.hub.Client.Create(ctx, root))

	failed := f.waitBurst(t, root, "burst-x", fluxv1alpha2.BurstFailed)
	require.Contains(t, failed.Message, "KubeconfigRefused")
	require.Contains(t, failed.Message, "exec")
	cond := meta.FindStatusCondition(f.root(t, root).Status.Conditions, fluxv1alpha2.ConditionBursting)
	require.Equal(t, fluxv1alpha2.ReasonKubeconfigRefused, cond.Reason)

	ready := meta.FindStatusCondition(f.memberCluster(t, "member-x").Status.Conditions, fedv1alpha1.ConditionReady)
	require.Equal(t, metav1.ConditionFalse, ready.Status)
	require.Equal(t, fedv1alpha1.ReasonKubeconfigRefused, ready.Reason)
	require.Contains(t, ready.Message, "exec")
	// A MemberCluster is cluster-scoped: its events are in the default namespace.
	f.requireEvent(t, metav1.NamespaceDefault, fedv1alpha1.ReasonKubeconfigRefused, "exec")
}

func testTwoRootsShareAMemberWithoutInterfering(t *testing.T, f *federation) {
	ctx := context.Background()
	a := f.members["member-a"]
	ns1, ns2 := f.namespace(t), f.namespace(t)
	one := newRoot(ns1, "sim", fluxv1alpha2.Burst{Name: "burst", Cluster: "member-a", Size: 2})
	two := newRoot(ns2, "sim", fluxv1alpha2.Burst{Name: "burst", Cluster: "member-a", Size: 3})
	require.NoError(t, f.hub.Client.Create(ctx, one))
	require.NoError(t, f.hub.Client.Create(ctx, two))
	f.waitBurst(t, one, "burst", fluxv1alpha2.BurstApplied)
	f.waitBurst(t, two, "burst", fluxv1alpha2.BurstApplied)
	require.Equal(t, int32(2), a.child(t, ns1, "burst").Spec.Size)
	require.Equal(t, int32(3), a.child(t, ns2, "burst").Spec.Size)
	certOf := func(ns string) []byte {
		s := &corev1.Secret{}
		require.NoError(t, a.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "burst-curve"}, s))
		return s.Data[names.KeyCurveCert]
	}
	require.NotEqual(t, certOf(ns1), certOf(ns2), "each federation has its own certificate")

	require.NoError(t, f.hub.Client.Delete(ctx, one))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Nil(c, a.child(c, ns1, "burst"))
	}, wait, tick)
	require.NotNil(t, a.child(t, ns2, "burst"), "the other root's child stays")
	f.waitBurst(t, two, "burst", fluxv1alpha2.BurstApplied)
	deleted, err := f.reconc.Sweep(ctx)
	require.NoError(t, err)
	require.Empty(t, deleted, "a live root's child is no orphan")
}

func TestARootDeletedWhileAMemberIsDownIsReleasedAndSweptLater(t *testing.T) {
	f := startFederation(t, hub.Options{CleanupTimeout: 3 * time.Second, SweepInterval: time.Second}, "member-a", "member-b")
	ctx := context.Background()
	ns := f.namespace(t)
	a, b := f.members["member-a"], f.members["member-b"]
	root := newRoot(ns, "abandoned",
		fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 1},
		fluxv1alpha2.Burst{Name: "burst-b", Cluster: "member-b", Size: 1})
	require.NoError(t, f.hub.Client.Create(ctx, root))
	f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstApplied)
	f.waitBurst(t, root, "burst-b", fluxv1alpha2.BurstApplied)

	b.proxy.Cut()
	require.NoError(t, f.hub.Client.Delete(ctx, root))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Nil(c, a.child(c, ns, "burst-a"), "the reachable member is cleaned at once")
		require.True(c, apierrors.IsNotFound(f.hub.Client.Get(ctx, client.ObjectKeyFromObject(root), &fluxv1alpha2.MiniCluster{})),
			"the root goes after the cleanup timeout")
	}, wait, tick)
	left := b.child(t, ns, "burst-b")
	require.NotNil(t, left, "left on the member that was down")
	// What is left is recorded on the member's MemberCluster, with the UIDs the hub created.
	orphans := f.memberCluster(t, "member-b").Status.Orphans
	require.Contains(t, orphans, fedv1alpha1.OrphanObject{Kind: "MiniCluster", Namespace: ns, Name: "burst-b", UID: string(left.UID)})
	require.Len(t, orphans, 2, "the child and its Secret")
	orphaned := map[string]string{metrics.LabelMember: "member-b"}
	require.EventuallyWithT(t, func(c *assert.CollectT) { requireSeries(c, scrapeRegistry(c), "fluxfed_orphans", orphaned, 2) }, wait, tick)

	b.proxy.Restore(t)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Nil(c, b.child(c, ns, "burst-b"), "the orphan sweep deletes it once the member answers")
		require.Empty(c, f.memberCluster(c, "member-b").Status.Orphans, "and forgets it")
		requireSeries(c, scrapeRegistry(c), "fluxfed_orphans", orphaned, 0)
	}, wait, tick)
}

func testAMemberRegisteredLaterGetsItsChild(t *testing.T, f *federation) {
	ctx := context.Background()
	ns := f.namespace(t)
	root := newRoot(ns, "early", fluxv1alpha2.Burst{Name: "burst-late", Cluster: "member-late", Size: 2})
	require.NoError(t, f.hub.Client.Create(ctx, root))
	missing := f.waitBurst(t, root, "burst-late", fluxv1alpha2.BurstUnreachable)
	require.Equal(t, "member member-late is not registered: no MemberCluster member-late is registered on the hub", missing.Message)

	late := f.addMember(t, "member-late")
	f.waitBurst(t, root, "burst-late", fluxv1alpha2.BurstApplied)
	require.NotNil(t, late.child(t, ns, "burst-late"))
}

func testMemberCachesHoldOnlyTheHubsObjects(t *testing.T, f *federation) {
	ctx := context.Background()
	ns := f.namespace(t)
	a := f.members["member-a"]
	root := newRoot(ns, "cached", fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 1})
	require.NoError(t, f.hub.Client.Create(ctx, root))
	f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstApplied)
	// Someone else's MiniCluster and Secret on the member.
	require.NoError(t, a.env.Client.Create(ctx, &fluxv1alpha2.MiniCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "users-own", Namespace: ns},
		Spec:       fluxv1alpha2.MiniClusterSpec{Containers: []fluxv1alpha2.Container{{Image: "busybox"}}},
	}))
	require.NoError(t, a.env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "users-own", Namespace: ns}}))

	cl, err := f.mgr.GetCluster(ctx, "member-a")
	require.NoError(t, err)
	time.Sleep(time.Second) // long enough for a watch event to reach the cache, were it watched
	var mcs fluxv1alpha2.MiniClusterList
	require.NoError(t, cl.GetCache().List(ctx, &mcs, client.InNamespace(ns)))
	var secrets corev1.SecretList
	require.NoError(t, cl.GetCache().List(ctx, &secrets, client.InNamespace(ns)))
	names := func(objs ...client.Object) []string {
		var out []string
		for _, o := range objs {
			out = append(out, o.GetNamespace()+"/"+o.GetName())
		}
		return out
	}
	require.Equal(t, []string{ns + "/burst-a"}, names(&mcs.Items[0]))
	require.Len(t, mcs.Items, 1)
	require.Len(t, secrets.Items, 1)
	require.Equal(t, []string{ns + "/burst-a-curve"}, names(&secrets.Items[0]))
}

// TestANewRootIsPushedWithoutReadingFirst checks that the first push of a root onto members that
// have been Ready all along reads nothing on them: their caches have watched them since, and a
// create finds what a cache misses (TestOwnershipSurvivesAKillOrALostReplyAfterEveryWrite covers
// that).
func TestANewRootIsPushedWithoutReadingFirst(t *testing.T) {
	f := startFederation(t, hub.Options{}, "member-a", "member-b")
	before := map[string]int{}
	for name, m := range f.members {
		before[name] = m.objectReads.mark()
	}
	f.burstOntoBoth(t, "fresh")
	for name, m := range f.members {
		require.Empty(t, m.objectReads.since(before[name]), "reads on %s", name)
	}
}

func TestASettledFederationCostsNoRequests(t *testing.T) {
	f := startFederation(t, hub.Options{}, "member-a", "member-b")
	_, root := f.burstOntoBoth(t, "quiet")
	time.Sleep(2 * time.Second) // the children's status settles

	hubMark := f.hubCount.mark()
	before := map[string]int64{}
	for name, m := range f.members {
		before[name] = m.requests.Load()
	}
	// A reconcile of the settled root, as a resync or an unrelated event would cause.
	f.edit(t, root, func(mc *fluxv1alpha2.MiniCluster) { mc.Labels = map[string]string{"touched": "yes"} })
	time.Sleep(3 * time.Second)
	for name, m := range f.members {
		require.Equal(t, before[name], m.requests.Load(), "requests to %s", name)
	}
	require.Empty(t, f.hubCount.since(hubMark), "the hub writes nothing on its own cluster")
}

func testTheLeadBrokerAddressFollowsRankZero(t *testing.T, f *federation) {
	ctx := context.Background()
	ns := f.namespace(t)
	a := f.members["member-a"]
	for i, addrs := range [][]corev1.NodeAddress{
		{{Type: corev1.NodeInternalIP, Address: "127.0.1.1"}, {Type: corev1.NodeExternalIP, Address: "127.0.101.1"}},
		{{Type: corev1.NodeInternalIP, Address: "127.0.1.2"}, {Type: corev1.NodeInternalIP, Address: "fd00::2"}},
	} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i+1)}}
		require.NoError(t, f.hub.Client.Create(ctx, node))
		node.Status.Addresses = addrs
		require.NoError(t, f.hub.Client.Status().Update(ctx, node))
	}
	root := newRoot(ns, "moving", fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 1})
	root.Spec.Flux.Bursting.Expose = nil
	require.NoError(t, f.hub.Client.Create(ctx, root))

	// No rank 0 yet: nothing to tell the children.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cond := meta.FindStatusCondition(f.root(c, root).Status.Conditions, fluxv1alpha2.ConditionLeadBrokerReachable)
		require.NotNil(c, cond)
		require.Equal(c, fluxv1alpha2.ReasonAddressPending, cond.Reason)
	}, wait, tick)
	require.Nil(t, a.child(t, ns, "burst-a"))

	leadPod := func(name, node string) *corev1.Pod {
		got := f.root(t, root)
		labels := hub.LeadBrokerSelector(got)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "flux", Image: "busybox"}}},
		}
		require.NoError(t, f.hub.Client.Create(ctx, pod))
		return pod
	}
	first := leadPod("moving-0-aaaaa", "node-1")
	svc := &corev1.Service{}
	require.NoError(t, f.hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "moving-lead-broker"}, svc))
	port := svc.Spec.Ports[0].NodePort
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		child := a.child(c, ns, "burst-a")
		require.NotNil(c, child)
		require.Equal(c, "127.0.101.1", child.Spec.Flux.Bursting.LeadBroker.Address, "the node's ExternalIP first")
		require.Equal(c, port, child.Spec.Flux.Bursting.LeadBroker.Port)
	}, wait, tick)

	// Rank 0 is rescheduled to a node with an InternalIP only. In between, the address is
	// pending, and the children and the status keep the one they have.
	require.NoError(t, f.hub.Client.Delete(ctx, first, client.GracePeriodSeconds(0)))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := f.root(c, root)
		cond := meta.FindStatusCondition(got.Status.Conditions, fluxv1alpha2.ConditionLeadBrokerReachable)
		require.Equal(c, fluxv1alpha2.ReasonAddressPending, cond.Reason)
		require.Equal(c, &fluxv1alpha2.LeadBrokerStatus{Address: "127.0.101.1", Port: port, Endpoint: fmt.Sprintf("127.0.101.1:%d", port)}, got.Status.LeadBroker)
	}, wait, tick)
	leadPod("moving-0-bbbbb", "node-2")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, "127.0.1.2", a.child(c, ns, "burst-a").Spec.Flux.Bursting.LeadBroker.Address, "the IPv4 InternalIP")
		require.Equal(c, &fluxv1alpha2.LeadBrokerStatus{Address: "127.0.1.2", Port: port, Endpoint: fmt.Sprintf("127.0.1.2:%d", port)}, f.root(c, root).Status.LeadBroker)
	}, wait, tick)
	f.requireEvent(t, ns, fluxv1alpha2.EventLeadBrokerMoved, fmt.Sprintf("from 127.0.101.1:%d to 127.0.1.2:%d", port, port))
}

func testALeadBrokerThatDoesNotAnswerIsReportedAndTheChildrenPushedAnyway(t *testing.T, f *federation) {
	f.probes.set(errors.New("127.0.0.1:30000: connection refused"))
	ctx := context.Background()
	ns := f.namespace(t)
	root := newRoot(ns, "silent", fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 1})
	require.NoError(t, f.hub.Client.Create(ctx, root))
	f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstApplied)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cond := meta.FindStatusCondition(f.root(c, root).Status.Conditions, fluxv1alpha2.ConditionLeadBrokerReachable)
		require.NotNil(c, cond)
		require.Equal(c, metav1.ConditionFalse, cond.Status)
		require.Equal(c, fluxv1alpha2.ReasonNotAnswering, cond.Reason)
		require.Regexp(c, `^no Flux broker answered at 127\.0\.0\.1:\d+$`, cond.Message, "what went wrong is not told")
	}, wait, tick)

	// The broker starts answering: the next probe sees it.
	f.probes.set(nil)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, meta.IsStatusConditionTrue(f.root(c, root).Status.Conditions, fluxv1alpha2.ConditionLeadBrokerReachable))
	}, wait, tick)
}

func testAFederationThatCannotWorkIsRefusedWithAReason(t *testing.T, f *federation) {
	ctx := context.Background()
	ns := f.namespace(t)
	root := newRoot(ns, "crossed", fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 2})
	root.Spec.Flux.Topology = "kary:1"
	require.NoError(t, f.hub.Client.Create(ctx, root))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cond := meta.FindStatusCondition(f.root(c, root).Status.Conditions, fluxv1alpha2.ConditionBursting)
		require.NotNil(c, cond)
		require.Equal(c, fluxv1alpha2.ReasonInvalidFederation, cond.Reason)
		require.Contains(c, cond.Message, `spec.flux.topology "kary:1": rank 4 (burst-a-0) would have parent rank 3 (crossed-3)`)
	}, wait, tick)
	require.Nil(t, f.members["member-a"].child(t, ns, "burst-a"), "nothing is pushed")
	require.True(t, apierrors.IsNotFound(f.hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "crossed-lead-broker"}, &corev1.Service{})),
		"nothing is exposed")
}

// TestTheDeployedPermissionsSuffice runs the hub with the permissions deploy/hub gives it, and
// reaches the members as the ServiceAccount of deploy/member-access: a permission the hub
// needs and the manifests lack fails here.
func TestTheDeployedPermissionsSuffice(t *testing.T) {
	f := startFederationAs(t, true, hub.Options{}, "member-a", "member-b")
	ctx := context.Background()
	ns, root := f.burstOntoBoth(t, "least")
	f.edit(t, root, func(mc *fluxv1alpha2.MiniCluster) {
		mc.Spec.Flux.Bursting.Clusters[1].Cluster = ""
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Nil(c, f.members["member-b"].child(c, ns, "burst-b"))
	}, wait, tick)
	deleted, err := f.reconc.Sweep(ctx)
	require.NoError(t, err)
	require.Empty(t, deleted)
	require.NoError(t, f.hub.Client.Delete(ctx, root))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Nil(c, f.members["member-a"].child(c, ns, "burst-a"))
		require.True(c, apierrors.IsNotFound(f.hub.Client.Get(ctx, client.ObjectKeyFromObject(root), &fluxv1alpha2.MiniCluster{})))
	}, wait, tick)
}

func testDeletingARootWhoseMemberIsNotRegisteredDoesNotWait(t *testing.T, f *federation) {
	ctx := context.Background()
	ns := f.namespace(t)
	root := newRoot(ns, "nowhere",
		fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 1},
		fluxv1alpha2.Burst{Name: "burst-x", Cluster: "member-nowhere", Size: 1})
	require.NoError(t, f.hub.Client.Create(ctx, root))
	f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstApplied)
	f.waitBurst(t, root, "burst-x", fluxv1alpha2.BurstUnreachable)

	require.NoError(t, f.hub.Client.Delete(ctx, root))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, apierrors.IsNotFound(f.hub.Client.Get(ctx, client.ObjectKeyFromObject(root), &fluxv1alpha2.MiniCluster{})),
			"no cleanup timeout for a member that is not registered")
		require.Nil(c, f.members["member-a"].child(c, ns, "burst-a"))
	}, wait, tick)
}
