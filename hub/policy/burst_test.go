package policy_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/bursting"
	"github.com/fluxfed/fluxfed/hub/policy"
)

func TestBurst(t *testing.T) {
	plan := func(namespace string, hostPID bool) bursting.Child {
		root := v1alpha2test.MiniCluster("lammps").Namespace("research").Size(2).
			Bursts(fluxv1alpha2.Burst{Name: "burst-a", Size: 2, Cluster: "member-a", Namespace: namespace}).
			Spec(func(s *fluxv1alpha2.MiniClusterSpec) { s.Pod.HostPID = hostPID }).Obj()
		p, err := bursting.NewPlan(root, bursting.Endpoint{Address: "127.0.2.10", Port: 30050}, "hub-a")
		require.NoError(t, err)
		return p.Children[0]
	}
	var member fedv1alpha1.MemberClusterSpec // as stored without a policy: the defaults

	require.NoError(t, policy.Burst(member, "research", plan("", false)), "the root's namespace, plain pods")

	var nsErr *policy.NamespaceError
	err := policy.Burst(member, "research", plan("kube-system", true))
	require.True(t, errors.As(err, &nsErr), "the namespace is checked first: %v", err)

	var podErr *policy.PodSecurityError
	err = policy.Burst(member, "research", plan("", true))
	require.True(t, errors.As(err, &podErr), "%v", err)
	require.Equal(t, fedv1alpha1.PodSecurityBaseline, podErr.Level)
	require.Equal(t, "host namespaces", podErr.Violations[0].Check)

	member.PodSecurity.Level = fedv1alpha1.PodSecurityPrivileged
	require.NoError(t, policy.Burst(member, "research", plan("", true)), "a privileged member takes it")
}
