package clusters

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestFailingChecks(t *testing.T) {
	body := "[+]ping ok\n[+]etcd ok\n[-]poststarthook/rbac/bootstrap-roles failed: reason withheld\n" +
		"[-]poststarthook/scheduling/bootstrap-system-priority-classes failed: reason withheld\n[+]shutdown ok\nreadyz check failed"
	require.Equal(t, []string{"poststarthook/rbac/bootstrap-roles", "poststarthook/scheduling/bootstrap-system-priority-classes"}, failingChecks(body))
	require.Empty(t, failingChecks("ok"))
	require.Empty(t, failingChecks(""))
}

func TestReadyNodes(t *testing.T) {
	node := func(name, ip string, ready corev1.ConditionStatus) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if ip != "" {
			n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip}}
		}
		if ready != "" {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
		}
		return n
	}
	for _, tc := range []struct {
		name         string
		nodes        []corev1.Node
		addrs, notOK []string
	}{
		{name: "none"},
		{
			name:  "sorted by node name",
			nodes: []corev1.Node{node("b", "127.101.0.2", corev1.ConditionTrue), node("a", "127.101.0.1", corev1.ConditionTrue)},
			addrs: []string{"127.101.0.1", "127.101.0.2"},
		},
		{
			name:  "not Ready or without a Ready condition",
			nodes: []corev1.Node{node("a", "127.101.0.1", corev1.ConditionFalse), node("b", "127.101.0.2", ""), node("c", "127.101.0.3", corev1.ConditionTrue)},
			addrs: []string{"127.101.0.3"},
			notOK: []string{"a", "b"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addrs, notOK := readyNodes(tc.nodes)
			require.Equal(t, tc.addrs, addrs)
			require.Equal(t, tc.notOK, notOK)
		})
	}
}
