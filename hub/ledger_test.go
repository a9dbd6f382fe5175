package hub

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

func TestLedgerOwnsOnlyWhatItRecorded(t *testing.T) {
	child := func(ns, name, uid string) *fluxv1alpha2.MiniCluster {
		return &fluxv1alpha2.MiniCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}}
	}
	secret := func(ns, name, uid string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}}
	}
	l := newLedger([]fluxv1alpha2.PushedObject{
		{Cluster: "member-a", Kind: "MiniCluster", Namespace: "research", Name: "burst-a", UID: "uid-1"},
		{Cluster: "member-a", Kind: "Secret", Namespace: "research", Name: "burst-a-curve", UID: "uid-2"},
	})
	tests := []struct {
		name   string
		member string
		obj    metav1.Object
		owns   bool
	}{
		{"the recorded child", "member-a", child("research", "burst-a", "uid-1"), true},
		{"the recorded Secret", "member-a", secret("research", "burst-a-curve", "uid-2"), true},
		{"same name, another UID (re-created by someone else)", "member-a", child("research", "burst-a", "uid-9"), false},
		{"same name and UID on another member", "member-b", child("research", "burst-a", "uid-1"), false},
		{"same name in another namespace", "member-a", child("prod", "burst-a", "uid-1"), false},
		{"a Secret named like the child", "member-a", secret("research", "burst-a", "uid-1"), false},
		{"a child named like the Secret", "member-a", child("research", "burst-a-curve", "uid-2"), false},
		{"an object without a UID", "member-a", child("research", "burst-a", ""), false},
		{"never recorded", "member-a", child("research", "payroll", "uid-3"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.owns, l.owns(tt.member, tt.obj))
		})
	}

	// Re-created by the hub: the new UID replaces the old one.
	l.record("member-a", child("research", "burst-a", "uid-5"))
	require.True(t, l.owns("member-a", child("research", "burst-a", "uid-5")))
	require.False(t, l.owns("member-a", child("research", "burst-a", "uid-1")))
	// Forgetting an object that is not the recorded one changes nothing.
	l.drop(fluxv1alpha2.PushedObject{Cluster: "member-a", Kind: "MiniCluster", Namespace: "research", Name: "burst-a", UID: "uid-1"})
	require.True(t, l.owns("member-a", child("research", "burst-a", "uid-5")))
	l.drop(fluxv1alpha2.PushedObject{Cluster: "member-a", Kind: "MiniCluster", Namespace: "research", Name: "burst-a", UID: "uid-5"})
	require.Equal(t, []fluxv1alpha2.PushedObject{
		{Cluster: "member-a", Kind: "Secret", Namespace: "research", Name: "burst-a-curve", UID: "uid-2"},
	}, l.list())
	require.Empty(t, l.on("member-b"))
	require.Len(t, l.list(), 1)
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
}
