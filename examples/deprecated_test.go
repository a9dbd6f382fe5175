package examples

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/internal/testenv"
	"github.com/fluxfed/fluxfed/member/render"
)

// deprecatedFields lists the deprecated fields a MiniCluster sets, as the policy of deploy/policy
// names them in its warnings.
func deprecatedFields(obj *unstructured.Unstructured) []string {
	var fields []string
	spec, _ := obj.Object["spec"].(map[string]any)
	if _, ok := spec["volumes"]; ok {
		fields = append(fields, "spec.volumes")
	}
	if v, _ := spec["oversubscribe"].(bool); v {
		fields = append(fields, "spec.oversubscribe")
	}
	var containers []any
	for _, key := range []string{"containers", "services"} {
		list, _ := spec[key].([]any)
		containers = append(containers, list...)
	}
	seen := map[string]bool{}
	for _, item := range containers {
		c, _ := item.(map[string]any)
		_, existing := c["existingVolumes"]
		_, pre := c["preCommand"]
		_, user := c["fluxUser"]
		diag, _ := c["diagnostics"].(bool)
		commands, _ := c["commands"].(map[string]any)
		root, _ := commands["runFluxAsRoot"].(bool)
		for field, set := range map[string]bool{
			"spec.containers[].existingVolumes": existing, "spec.containers[].preCommand": pre,
			"spec.containers[].fluxUser": user, "spec.containers[].diagnostics": diag,
			"spec.containers[].commands.runFluxAsRoot": root,
		} {
			if set && !seen[field] {
				seen[field] = true
				fields = append(fields, field)
			}
		}
	}
	slices.Sort(fields)
	return fields
}

// admitAndRender creates each MiniCluster with strict field validation, in a namespace of its
// own, with the deprecation policy of deploy/policy installed; checks that it is stored, that
// the API server warns about each deprecated field it sets and about nothing else, and that it
// renders as the member controller renders it.
func admitAndRender(t *testing.T, docs map[string][]*unstructured.Unstructured) {
	t.Helper()
	env := testenv.Shared(t)
	ctx := context.Background()
	require.NoError(t, env.ApplyDeploy(ctx, "policy"))

	collected := &testenv.Warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandlerWithContext = collected
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	gvr := fluxv1alpha2.GroupVersion.WithResource("miniclusters")

	// The policy takes effect shortly after it is created: wait until a deprecated field warns.
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": fluxv1alpha2.GroupVersion.String(), "kind": "MiniCluster",
		"metadata": map[string]any{"name": "probe"},
		"spec": map[string]any{
			"oversubscribe": true,
			"containers":    []any{map[string]any{"image": "rockylinux:9"}},
		},
	}}
	require.Eventually(t, func() bool {
		collected.Take()
		_, err := dyn.Resource(gvr).Namespace("default").Create(ctx, probe,
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && len(collected.Take()) > 0
	}, 30*time.Second, 200*time.Millisecond, "the deprecation policy never warned")

	for _, file := range slices.Sorted(maps.Keys(docs)) {
		for i, obj := range docs[file] {
			t.Run(fmt.Sprintf("%s#%d %s", file, i, obj.GetName()), func(t *testing.T) {
				ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fo-"}}
				require.NoError(t, env.Client.Create(ctx, ns))
				obj = obj.DeepCopy()
				obj.SetNamespace(ns.Name)
				collected.Take()
				_, err := dyn.Resource(gvr).Namespace(ns.Name).Create(ctx, obj,
					metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
				require.NoError(t, err, "creating MiniCluster %s", obj.GetName())

				var got []string
				for _, w := range collected.Take() {
					// "Validation failed for ValidatingAdmissionPolicy '...' with binding '...': <message>"
					require.Contains(t, w, "ValidatingAdmissionPolicy 'fluxfed-minicluster-deprecations'", "unexpected warning")
					w = w[strings.LastIndex(w, "': ")+len("': "):]
					field, _, ok := strings.Cut(w, " is deprecated")
					require.True(t, ok, "unexpected warning: %s", w)
					got = append(got, field)
				}
				slices.Sort(got)
				require.Equal(t, deprecatedFields(obj), got, "a warning for each deprecated field set, and no other")

				stored, err := dyn.Resource(gvr).Namespace(ns.Name).Get(ctx, obj.GetName(), metav1.GetOptions{})
				require.NoError(t, err)
				var mc fluxv1alpha2.MiniCluster
				require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(stored.Object, &mc))
				_, err = render.Render(&mc)
				require.NoError(t, err, "rendering MiniCluster %s", obj.GetName())
			})
		}
	}
}

// miniClusters reads the v1alpha2 MiniClusters of the YAML files under dir, keyed by the file's
// path relative to dir; other objects and versions are left out.
func miniClusters(t *testing.T, dir string) map[string][]*unstructured.Unstructured {
	t.Helper()
	out := map[string][]*unstructured.Unstructured{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || (!strings.HasSuffix(path, ".yaml") && !strings.HasSuffix(path, ".yml")) {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		for _, obj := range readDocuments(t, path) {
			if obj.GroupVersionKind() == fluxv1alpha2.GroupVersion.WithKind("MiniCluster") {
				out[rel] = append(out[rel], obj)
			}
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// TestDeprecatedFieldsApplyWithWarnings creates MiniClusters that set each deprecated field
// the way older manifests do (testdata/deprecated), and one that sets none. With
// FLUXFED_FLUX_OPERATOR_DIR set to a checkout of the Flux Operator, it also creates every
// v1alpha2 MiniCluster of its examples/ (the module proxy does not serve that module, and its
// files are not copied here): all must be accepted, with a warning for each deprecated field,
// and render.
func TestDeprecatedFieldsApplyWithWarnings(t *testing.T) {
	if dir := os.Getenv("FLUXFED_FLUX_OPERATOR_DIR"); dir != "" {
		t.Run("the Flux Operator's examples", func(t *testing.T) {
			docs := miniClusters(t, filepath.Join(dir, "examples"))
			n := 0
			for _, objs := range docs {
				n += len(objs)
			}
			t.Logf("%d v1alpha2 MiniClusters in %d files of %s", n, len(docs), dir)
			require.NotZero(t, n, "no v1alpha2 MiniCluster found")
			admitAndRender(t, docs)
		})
	}
	docs := miniClusters(t, filepath.Join("testdata", "deprecated"))
	var fields []string
	for _, objs := range docs {
		for _, obj := range objs {
			fields = append(fields, deprecatedFields(obj)...)
		}
	}
	slices.Sort(fields)
	require.Equal(t, []string{
		"spec.containers[].commands.runFluxAsRoot", "spec.containers[].diagnostics",
		"spec.containers[].existingVolumes", "spec.containers[].fluxUser",
		"spec.containers[].preCommand", "spec.oversubscribe", "spec.volumes", "spec.volumes",
	}, fields, "the fixtures set every deprecated field")
	admitAndRender(t, docs)
}
