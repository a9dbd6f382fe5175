package hub

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

func TestLedgerAsksForItsIntentsToBePersistedOnce(t *testing.T) {
	child := ledgerKey{"member-a", "MiniCluster", "research", "burst-a"}
	secret := ledgerKey{"member-a", "Secret", "research", "burst-a-curve"}
	l := newLedger([]fluxv1alpha2.PushedObject{
		{Cluster: "member-b", Kind: "MiniCluster", Namespace: "research", Name: "burst-b", UID: "uid-1"},
	})
	require.False(t, l.intend([]ledgerKey{{"member-b", "MiniCluster", "research", "burst-b"}}), "what the status names is persisted")
	require.True(t, l.intend([]ledgerKey{child, secret}), "new objects must be written to the status before they are created")
	require.True(t, l.intend([]ledgerKey{child}), "and stay unpersisted until they are")
	require.Equal(t, []fluxv1alpha2.PushedObject{
		{Cluster: "member-a", Kind: "MiniCluster", Namespace: "research", Name: "burst-a"},
		{Cluster: "member-a", Kind: "Secret", Namespace: "research", Name: "burst-a-curve"},
		{Cluster: "member-b", Kind: "MiniCluster", Namespace: "research", Name: "burst-b", UID: "uid-1"},
	}, l.list(), "an intent has no UID yet")
	l.persist(l.list())
	require.False(t, l.intend([]ledgerKey{child, secret}))

	// Created: the UID is recorded, the entry stays persisted.
	l.record("member-a", &fluxv1alpha2.MiniCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "burst-a", UID: "uid-2"}})
	l.record("member-a", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "burst-a-curve", UID: "uid-3"}})
	require.False(t, l.intend([]ledgerKey{child, secret}))
	require.Equal(t, []string{"member-a", "member-b"}, l.clusters())
	require.Equal(t, []fluxv1alpha2.PushedObject{
		{Cluster: "member-a", Kind: "MiniCluster", Namespace: "research", Name: "burst-a", UID: "uid-2"},
		{Cluster: "member-a", Kind: "Secret", Namespace: "research", Name: "burst-a-curve", UID: "uid-3"},
	}, l.on("member-a"))

	// Dropped and wanted again: it must be persisted again before the next create.
	l.drop(fluxv1alpha2.PushedObject{Cluster: "member-a", Kind: "MiniCluster", Namespace: "research", Name: "burst-a"})
	require.True(t, l.intend([]ledgerKey{child}))
}

func TestLedgerListIsStable(t *testing.T) {
	l := newLedger([]fluxv1alpha2.PushedObject{
		{Cluster: "member-b", Kind: "Secret", Namespace: "n", Name: "x-curve", UID: "4"},
		{Cluster: "member-a", Kind: "Secret", Namespace: "n", Name: "x-curve", UID: "2"},
		{Cluster: "member-b", Kind: "MiniCluster", Namespace: "n", Name: "x", UID: "3"},
		{Cluster: "member-a", Kind: "MiniCluster", Namespace: "n", Name: "x", UID: "1"},
	})
	var uids []string
	for _, p := range l.list() {
		uids = append(uids, p.UID)
	}
	require.Equal(t, []string{"1", "2", "3", "4"}, uids, "by member, namespace, name: status.pushed does not churn")
	require.Equal(t, ledgerKey{"member-a", "Secret", "n", "x-curve"},
		keyOf("member-a", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "x-curve", UID: types.UID("2")}}))
}
