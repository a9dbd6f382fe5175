package policy_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	"github.com/fluxfed/fluxfed/hub/policy"
)

func TestNamespace(t *testing.T) {
	mirror := fedv1alpha1.MemberNamespaces{Allow: fedv1alpha1.NamespaceAllowMirror}
	listed := func(names ...fedv1alpha1.MemberNamespaceName) fedv1alpha1.MemberNamespaces {
		return fedv1alpha1.MemberNamespaces{Allow: fedv1alpha1.NamespaceAllowListed, Names: names}
	}
	many := listed()
	for i := range 64 {
		many.Names = append(many.Names, fedv1alpha1.MemberNamespaceName(fmt.Sprintf("team-%02d", i)))
	}
	const burstField = "spec.flux.bursting.clusters[].namespace"
	reserved := "never burst into"

	tests := []struct {
		name            string
		policy          fedv1alpha1.MemberNamespaces
		root, namespace string
		// field is the field the refusal names, empty when the namespace is allowed; says is
		// part of its message.
		field, says string
	}{
		{name: "mirror: the root's namespace", policy: mirror, root: "research", namespace: "research"},
		{name: "unset: the default, mirror", policy: fedv1alpha1.MemberNamespaces{}, root: "research", namespace: "research"},
		{name: "mirror: another namespace", policy: mirror, root: "research", namespace: "research-burst",
			field: "spec.namespaces.allow", says: `a root in namespace "research" may burst only into namespace "research"`},
		{name: "unset: another namespace", root: "research", namespace: "prod",
			field: "spec.namespaces.allow", says: "allows Mirror"},
		{name: "mirror ignores names", policy: fedv1alpha1.MemberNamespaces{Names: []fedv1alpha1.MemberNamespaceName{"prod"}}, root: "research", namespace: "prod",
			field: "spec.namespaces.allow"},
		{name: "listed: a listed namespace", policy: listed("hpc", "research-burst"), root: "research", namespace: "research-burst"},
		{name: "listed: any root may use it", policy: listed("hpc"), root: "other-team", namespace: "hpc"},
		{name: "listed: the root's own namespace is not implied", policy: listed("hpc"), root: "research", namespace: "research",
			field: "spec.namespaces.names", says: `allows only "hpc"`},
		{name: "listed: nothing listed", policy: listed(), root: "research", namespace: "research",
			field: "spec.namespaces.names", says: "lists no namespace"},
		{name: "listed: a long list is cut", policy: many, root: "research", namespace: "research",
			field: "spec.namespaces.names", says: `"team-07" and 56 more`},
		{name: "any: another namespace", policy: fedv1alpha1.MemberNamespaces{Allow: fedv1alpha1.NamespaceAllowAny}, root: "research", namespace: "prod"},
		{name: "any: still never kube-system", policy: fedv1alpha1.MemberNamespaces{Allow: fedv1alpha1.NamespaceAllowAny}, root: "research", namespace: "kube-system",
			field: "spec.namespaces", says: reserved},
		{name: "any: still never fluxfed-system", policy: fedv1alpha1.MemberNamespaces{Allow: fedv1alpha1.NamespaceAllowAny}, root: "research", namespace: "fluxfed-system",
			field: "spec.namespaces", says: reserved},
		{name: "an unknown policy allows nothing", policy: fedv1alpha1.MemberNamespaces{Allow: "Every"}, root: "research", namespace: "research",
			field: "spec.namespaces.allow", says: "nothing is allowed"},
		{name: "listed in lower case is unknown", policy: fedv1alpha1.MemberNamespaces{Allow: "listed", Names: []fedv1alpha1.MemberNamespaceName{"research"}},
			root: "research", namespace: "research", field: "spec.namespaces.allow"},

		// Reserved namespaces, whatever the policy says.
		{name: "mirror: a root in kube-system", policy: mirror, root: "kube-system", namespace: "kube-system", field: "spec.namespaces", says: reserved},
		{name: "mirror: a root in kube-public", policy: mirror, root: "kube-public", namespace: "kube-public", field: "spec.namespaces", says: reserved},
		{name: "mirror: a root in kube-node-lease", policy: mirror, root: "kube-node-lease", namespace: "kube-node-lease", field: "spec.namespaces", says: reserved},
		{name: "mirror: a root in fluxfed-system", policy: mirror, root: "fluxfed-system", namespace: "fluxfed-system", field: "spec.namespaces", says: reserved},
		{name: "listed kube-system (the schema refuses it)", policy: listed("kube-system"), root: "research", namespace: "kube-system", field: "spec.namespaces", says: reserved},
		{name: "listed fluxfed-system (the schema refuses it)", policy: listed("fluxfed-system"), root: "research", namespace: "fluxfed-system", field: "spec.namespaces", says: reserved},
		{name: "another kube- namespace", policy: listed("kube-flannel"), root: "research", namespace: "kube-flannel", field: "spec.namespaces", says: reserved},
		{name: "kube, not a kube- namespace", policy: listed("kube"), root: "research", namespace: "kube"},

		// Names that are no namespace names: refused before any comparison.
		{name: "empty", policy: mirror, root: "", namespace: "", field: burstField, says: "not a namespace name"},
		{name: "capitals", policy: listed("Kube-System"), root: "research", namespace: "Kube-System", field: burstField},
		{name: "capitals, mirrored", policy: mirror, root: "KUBE-SYSTEM", namespace: "KUBE-SYSTEM", field: burstField},
		{name: "a trailing space", policy: listed("kube-system "), root: "research", namespace: "kube-system ", field: burstField},
		{name: "a trailing newline", policy: mirror, root: "research\n", namespace: "research\n", field: burstField},
		{name: "a NUL byte", policy: mirror, root: "research\x00", namespace: "research\x00", field: burstField},
		{name: "a path", policy: mirror, root: "../kube-system", namespace: "../kube-system", field: burstField},
		{name: "a dot", policy: listed("team.a"), root: "research", namespace: "team.a", field: burstField},
		{name: "unicode that looks like kube-system", policy: mirror, root: "kube‐system", namespace: "kube‐system", field: burstField},
		{name: "64 characters", policy: mirror, root: strings.Repeat("a", 64), namespace: strings.Repeat("a", 64), field: burstField, says: "no more than 63"},
		{name: "100000 characters", policy: mirror, root: strings.Repeat("a", 100000), namespace: strings.Repeat("a", 100000), field: burstField},
		{name: "63 characters", policy: mirror, root: strings.Repeat("a", 63), namespace: strings.Repeat("a", 63)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := policy.Namespace(tt.policy, tt.root, tt.namespace)
			if tt.field == "" {
				require.NoError(t, err)
				return
			}
			var refusal *policy.NamespaceError
			require.True(t, errors.As(err, &refusal), "want a *NamespaceError, got %v", err)
			require.Equal(t, tt.field, refusal.Field)
			require.Equal(t, tt.namespace, refusal.Namespace)
			require.Contains(t, err.Error(), tt.field)
			require.Contains(t, err.Error(), tt.says)
			require.LessOrEqual(t, len(err.Error()), policy.MaxMessageLength)
		})
	}
}

func TestNamespaceMissing(t *testing.T) {
	require.False(t, policy.MayCreateNamespace(fedv1alpha1.MemberNamespaces{}), "the default is no")
	require.True(t, policy.MayCreateNamespace(fedv1alpha1.MemberNamespaces{Create: true}))
	err := policy.NamespaceMissing("research")
	var refusal *policy.NamespaceError
	require.True(t, errors.As(err, &refusal))
	require.Equal(t, "spec.namespaces.create", refusal.Field)
	require.EqualError(t, err, `namespace "research" is not allowed on this member (spec.namespaces.create): it does not exist, `+
		`and the MemberCluster does not let the hub create namespaces: the member's owner creates it, or sets spec.namespaces.create`)
}

func TestNamespaceLabels(t *testing.T) {
	for level, want := range map[fedv1alpha1.PodSecurityLevel]string{
		"":                                "baseline",
		fedv1alpha1.PodSecurityPrivileged: "privileged",
		fedv1alpha1.PodSecurityBaseline:   "baseline",
		fedv1alpha1.PodSecurityRestricted: "restricted",
	} {
		require.Equal(t, map[string]string{
			"pod-security.kubernetes.io/enforce":         want,
			"pod-security.kubernetes.io/enforce-version": "latest",
		}, policy.NamespaceLabels(level), "level %q", level)
	}
}

// FuzzNamespace checks what holds whatever the policy and the names: a reserved namespace or a
// name that is not a namespace name is never allowed, and an allowed namespace is the root's
// (Mirror) or a listed one (Listed).
func FuzzNamespace(f *testing.F) {
	f.Add("", "research", "research", "")
	f.Add("Mirror", "kube-system", "kube-system", "")
	f.Add("Listed", "research", "fluxfed-system", "fluxfed-system")
	f.Add("Listed", "research", "kube-public", "kube-public")
	f.Add("Listed", "research", "hpc", "hpc")
	f.Add("Mirror", "Research", "Research", "")
	f.Fuzz(func(t *testing.T, allow, root, namespace, listed string) {
		ns := fedv1alpha1.MemberNamespaces{Allow: fedv1alpha1.NamespaceAllow(allow), Names: []fedv1alpha1.MemberNamespaceName{fedv1alpha1.MemberNamespaceName(listed)}}
		err := policy.Namespace(ns, root, namespace)
		if err != nil {
			var refusal *policy.NamespaceError
			require.True(t, errors.As(err, &refusal))
			require.LessOrEqual(t, len(err.Error()), policy.MaxMessageLength)
			return
		}
		require.False(t, fedv1alpha1.IsReservedNamespace(namespace), "a reserved namespace was allowed")
		require.Empty(t, validation.IsDNS1123Label(namespace), "an invalid name was allowed")
		switch ns.Allow {
		case "", fedv1alpha1.NamespaceAllowMirror:
			require.Equal(t, root, namespace)
		case fedv1alpha1.NamespaceAllowListed:
			require.Equal(t, listed, namespace)
		case fedv1alpha1.NamespaceAllowAny:
		default:
			t.Fatalf("policy %q allowed %q", allow, namespace)
		}
	})
}
