package release_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxfed/fluxfed/deploy"
	"github.com/fluxfed/fluxfed/deploy/release"
	"github.com/fluxfed/fluxfed/e2e/k8sbin"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

func kustomizer(t *testing.T) release.Kustomizer {
	t.Helper()
	bin, err := k8sbin.Dir("kubectl")
	require.NoError(t, err)
	return release.Kubectl(filepath.Join(bin, "kubectl"), filepath.Join(testenv.RepoRoot(), "deploy"))
}

func decode(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	objs, err := deploy.Decode(data)
	require.NoError(t, err)
	return objs
}

func kinds(objs []*unstructured.Unstructured) map[string]int {
	out := map[string]int{}
	for _, o := range objs {
		out[o.GetKind()]++
	}
	return out
}

// TestReleaseManifestsApplyWithServerSideDryRun writes the manifests as `make release-manifests`
// does, into a temporary directory, and applies each to a real API server: its CRDs for real,
// then everything else with server-side dry-run.
func TestReleaseManifestsApplyWithServerSideDryRun(t *testing.T) {
	dir := t.TempDir()
	paths, err := release.WriteManifests(kustomizer(t), dir, "v0.0.0-test")
	require.NoError(t, err)
	require.Equal(t, []string{
		filepath.Join(dir, "fluxfed.yaml"), filepath.Join(dir, "fluxfed-hub.yaml"), filepath.Join(dir, "fluxfed-member.yaml"),
	}, paths)

	manifests := map[string][]*unstructured.Unstructured{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		require.True(t, bytes.HasPrefix(data, []byte("# fluxfed v0.0.0-test, mode ")), "%s", data[:80])
		manifests[filepath.Base(p)] = decode(t, data)
	}
	single := map[string]int{
		"Namespace": 1, "CustomResourceDefinition": 1, "ServiceAccount": 1, "ClusterRole": 2, "ClusterRoleBinding": 1,
		"Role": 1, "RoleBinding": 1, "Service": 1, "Deployment": 1,
		"ValidatingAdmissionPolicy": 1, "ValidatingAdmissionPolicyBinding": 1,
	}
	require.Equal(t, single, kinds(manifests["fluxfed.yaml"]))
	require.Equal(t, map[string]int{
		"Namespace": 1, "CustomResourceDefinition": 2, "ServiceAccount": 1, "ClusterRole": 5, "ClusterRoleBinding": 2,
		// Leader election's, and the hub's for its ownership key; the gateway's reading of the
		// API server's front-proxy settings in kube-system.
		"Role": 2, "RoleBinding": 3, "Service": 2, "Deployment": 1, "APIService": 1,
		"ValidatingAdmissionPolicy": 1, "ValidatingAdmissionPolicyBinding": 1,
	}, kinds(manifests["fluxfed-hub.yaml"]))
	require.Equal(t, map[string]int{
		"Namespace": 1, "CustomResourceDefinition": 1, "ServiceAccount": 2, "ClusterRole": 4, "ClusterRoleBinding": 2,
		"Role": 1, "RoleBinding": 1, "Service": 1, "Deployment": 1,
		"ValidatingAdmissionPolicy": 1, "ValidatingAdmissionPolicyBinding": 1,
	}, kinds(manifests["fluxfed-member.yaml"]), "the operator and the hub's identity, no namespace lent")

	for file, objs := range manifests {
		// The namespace first, restricted by Pod Security.
		require.Equal(t, "Namespace", objs[0].GetKind(), file)
		require.Equal(t, "restricted", objs[0].GetLabels()["pod-security.kubernetes.io/enforce"], file)
		for _, o := range objs {
			if o.GetKind() != "Deployment" {
				continue
			}
			ctrs, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			require.NoError(t, err)
			args, _ := ctrs[0].(map[string]any)["args"].([]any)
			require.Equal(t, file == "fluxfed-hub.yaml", slices.Contains(args, any("--hub")), "%s: %v", file, args)
		}
	}

	env := testenv.Start(t)
	ctx := context.Background()
	for _, file := range []string{"fluxfed.yaml", "fluxfed-hub.yaml", "fluxfed-member.yaml"} {
		t.Run(file, func(t *testing.T) {
			objs := manifests[file]
			for _, o := range objs {
				// The CRDs, and the namespace what follows goes into, for real.
				if k := o.GetKind(); k == "CustomResourceDefinition" || k == "Namespace" {
					require.NoError(t, env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
						client.FieldOwner("release-test"), client.ForceOwnership), "%s %s", k, o.GetName())
				}
			}
			for _, o := range objs {
				if k := o.GetKind(); k == "CustomResourceDefinition" || k == "Namespace" {
					continue
				}
				err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
					client.FieldOwner("release-test"), client.DryRunAll)
				require.NoError(t, err, "%s %s", o.GetKind(), o.GetName())
			}
		})
	}
}

// A member's manifest joins deploy/default and deploy/member-access, which both hold namespace
// fluxfed-system: the first stays. Any other object twice is an error.
func TestObjectsJoinsKustomizations(t *testing.T) {
	fake := func(out map[string]string) release.Kustomizer {
		return func(dir string) ([]byte, error) { return []byte(out[dir]), nil }
	}
	objs, err := release.Objects(fake(map[string]string{
		"a": "apiVersion: v1\nkind: Namespace\nmetadata: {name: x, labels: {first: 'yes'}}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a, namespace: x}\n",
		"b": "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: b, namespace: x}\n",
	}), "a", "b")
	require.NoError(t, err)
	var names []string
	for _, o := range objs {
		names = append(names, o.GetKind()+" "+o.GetName())
	}
	require.Equal(t, []string{"Namespace x", "ServiceAccount a", "ServiceAccount b"}, names)
	require.Equal(t, "yes", objs[0].GetLabels()["first"])

	_, err = release.Objects(fake(map[string]string{
		"a": "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a, namespace: x}\n",
		"b": "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a, namespace: x}\n",
	}), "a", "b")
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), "both in deploy/a and deploy/b"), "%v", err)
}
