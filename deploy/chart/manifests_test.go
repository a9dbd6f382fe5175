package chart_test

// The release manifests, applied with kubectl as docs/install.md says, over what another field
// manager applied, and upgraded from an older release. Here rather than in deploy/release to
// share the chart's upgrade helpers.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fluxfed/fluxfed/deploy/release"
	"github.com/fluxfed/fluxfed/e2e/k8sbin"
)

// kubectl runs the pinned kubectl against env with args and returns its output, failing the
// test when it fails.
func kubectl(t *testing.T, env *cluster, args ...string) string {
	t.Helper()
	out, err := tryKubectl(t, env, args...)
	require.NoError(t, err, "kubectl %s:\n%s", strings.Join(args, " "), out)
	return out
}

func tryKubectl(t *testing.T, env *cluster, args ...string) (string, error) {
	t.Helper()
	bin, err := k8sbin.Dir("kubectl")
	require.NoError(t, err)
	kc, err := env.Kubeconfig()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, kc, 0o600))
	out, err := exec.Command(filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", path}, args...)...).CombinedOutput()
	return string(out), err
}

// writeManifest writes the release manifest of mode into a temporary file, after edit changes
// its objects (nil: as `make release-manifests` writes it).
func writeManifest(t *testing.T, mode string, edit func(*unstructured.Unstructured)) string {
	t.Helper()
	var m release.Mode
	for _, x := range release.Modes {
		if x.Name == mode {
			m = x
		}
	}
	require.NotEmpty(t, m.Name, mode)
	data, err := release.Manifest(kustomize(t), m, "v0.0.0-test")
	require.NoError(t, err)
	if edit != nil {
		var b strings.Builder
		for _, o := range decode(t, string(data)) {
			edit(o)
			out, err := yaml.Marshal(o.Object)
			require.NoError(t, err)
			b.WriteString("---\n")
			b.Write(out)
		}
		data = []byte(b.String())
	}
	path := filepath.Join(t.TempDir(), m.File)
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
}

// A release manifest applies with `kubectl apply --server-side` over the same objects written
// by another field manager: a client-side `kubectl apply` (an older install), or Helm's
// server-side apply of the chart's deprecation policy. The ValidatingAdmissionPolicy conflicted
// on spec.matchConstraints, an atomic field the API server fills with defaults, until the
// manifest spelt the defaults out.
func TestReleaseManifestAppliesOverAnotherFieldManager(t *testing.T) {
	env := bareEnv(t)
	ctx := context.Background()
	for _, mode := range []string{"single", "hub", "member"} {
		path := writeManifest(t, mode, nil)
		kubectl(t, env, "apply", "-f", path)
		out := kubectl(t, env, "apply", "--server-side", "-f", path)
		require.NotContains(t, out, "conflict", mode)
	}

	// The chart's policy is deploy/policy's (TestChartPolicyIsDeploysPolicy), applied by Helm.
	policy, err := release.Objects(kustomize(t), "policy")
	require.NoError(t, err)
	for _, o := range policy {
		require.NoError(t, env.Client.Delete(ctx, o.DeepCopy()))
		require.NoError(t, env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner("helm")))
	}
	out, err := tryKubectl(t, env, "apply", "--server-side", "-f", writeManifest(t, "hub", nil))
	require.NoError(t, err, "%s", out)
}

// kubectl apply --server-side of a release manifest upgrades an older one, installed as the
// docs said then or with a client-side apply: kubectl applies the objects in the manifest's
// order, the CRDs before the Deployment that runs the new manager, and the MiniClusters stay.
func TestReleaseManifestUpgradesCRDsBeforeTheManager(t *testing.T) {
	// The older release: a MiniCluster CRD without spec.jobLabels, another image, and the
	// deprecation policy without the defaults spelt out, as v0.1.0 shipped it.
	older := func(o *unstructured.Unstructured) {
		switch {
		case o.GetKind() == "CustomResourceDefinition" && o.GetName() == "miniclusters.flux-framework.org":
			dropSpecProperty(t, o.Object, "jobLabels")
		case o.GetKind() == "Deployment":
			ctrs, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			require.NoError(t, err)
			ctrs[0].(map[string]any)["image"] = "ghcr.io/fluxfed/fluxfed:v0.0.9"
			require.NoError(t, unstructured.SetNestedSlice(o.Object, ctrs, "spec", "template", "spec", "containers"))
		case o.GetKind() == "ValidatingAdmissionPolicy":
			rules, _, err := unstructured.NestedSlice(o.Object, "spec", "matchConstraints", "resourceRules")
			require.NoError(t, err)
			delete(rules[0].(map[string]any), "scope")
			require.NoError(t, unstructured.SetNestedField(o.Object, map[string]any{"resourceRules": rules}, "spec", "matchConstraints"))
		}
	}
	newer := writeManifest(t, "hub", nil)
	var image string
	for _, o := range decode(t, mustRead(t, newer)) {
		if o.GetKind() == "Deployment" {
			image = managerContainer(t, []*unstructured.Unstructured{o}).Image
		}
	}
	require.NotEqual(t, "ghcr.io/fluxfed/fluxfed:v0.0.9", image)

	for name, apply := range map[string][]string{
		"installed with kubectl apply --server-side": {"apply", "--server-side", "-f"},
		"installed with a client-side kubectl apply": {"apply", "-f"},
	} {
		t.Run(name, func(t *testing.T) {
			env := bareEnv(t)
			ctx := context.Background()
			kubectl(t, env, append(apply, writeManifest(t, "hub", older))...)
			c, err := client.New(env.Config, client.Options{})
			require.NoError(t, err)
			before := miniCluster("before", nil)
			require.EventuallyWithT(t, func(ct *assert.CollectT) {
				require.NoError(ct, c.Create(ctx, before))
			}, 30*time.Second, 100*time.Millisecond, "the MiniCluster kind is served")

			stop := recordUpdates(t, env)
			out := kubectl(t, env, "apply", "--server-side", "-f", newer)
			updates := stop()
			require.NotContains(t, out, "conflict")

			requireUpgraded(t, c, updates, before, image)
		})
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(data)
}
