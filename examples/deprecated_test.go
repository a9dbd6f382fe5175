package examples

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/testenv"
	"github.com/fluxfed/fluxfed/member/render"
)

// fluxOperatorModule is the Go module whose examples/ holds the Flux Operator's example
// MiniClusters.
const fluxOperatorModule = "github.com/flux-framework/flux-operator"

// warnings collects the warnings the API server returns.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	msgs := w.msgs
	w.msgs = nil
	return msgs
}

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
	env := testenv.Start(t)
	ctx := context.Background()
	require.NoError(t, env.ApplyDeploy(ctx, "policy"))

	collected := &warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = collected
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
		collected.take()
		_, err := dyn.Resource(gvr).Namespace("default").Create(ctx, probe,
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && len(collected.take()) > 0
	}, 30*time.Second, 200*time.Millisecond, "the deprecation policy never warned")

	for _, file := range slices.Sorted(maps.Keys(docs)) {
		for i, obj := range docs[file] {
			t.Run(fmt.Sprintf("%s#%d %s", file, i, obj.GetName()), func(t *testing.T) {
				ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fo-"}}
				require.NoError(t, env.Client.Create(ctx, ns))
				obj = obj.DeepCopy()
				obj.SetNamespace(ns.Name)
				collected.take()
				_, err := dyn.Resource(gvr).Namespace(ns.Name).Create(ctx, obj,
					metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
				require.NoError(t, err, "creating MiniCluster %s", obj.GetName())

				var got []string
				for _, w := range collected.take() {
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
// the way older manifests do (testdata/deprecated), and one that sets none.
func TestDeprecatedFieldsApplyWithWarnings(t *testing.T) {
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

// fluxOperatorExamples returns the examples/ directory of the Flux Operator's module: the one
// FLUXFED_FLUX_OPERATOR_DIR names, else the newest version of the module in the module cache
// (go mod download github.com/flux-framework/flux-operator@VERSION puts it there). The module is
// not a requirement of fluxfed's go.mod, nor copied into this repository.
func fluxOperatorExamples(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("FLUXFED_FLUX_OPERATOR_DIR"); dir != "" {
		return filepath.Join(dir, "examples")
	}
	cache := os.Getenv("GOMODCACHE")
	if cache == "" {
		out, err := exec.Command("go", "env", "GOMODCACHE").Output()
		require.NoError(t, err, "go env GOMODCACHE")
		cache = strings.TrimSpace(string(out))
	}
	// The module cache escapes upper-case letters; this path has none.
	dirs, err := filepath.Glob(filepath.Join(cache, filepath.FromSlash(fluxOperatorModule)+"@*"))
	require.NoError(t, err)
	var newest string
	var newestVersion *version.Version
	for _, dir := range dirs {
		_, v, _ := strings.Cut(filepath.Base(dir), "@")
		parsed, err := version.ParseSemantic(v)
		if err != nil {
			continue
		}
		if newestVersion == nil || parsed.GreaterThan(newestVersion) {
			newest, newestVersion = dir, parsed
		}
	}
	if newest == "" {
		t.Skipf("the Flux Operator's module is not in the module cache (%s): run `go mod download %s@VERSION`, or set FLUXFED_FLUX_OPERATOR_DIR to a checkout of it", cache, fluxOperatorModule)
	}
	t.Logf("Flux Operator examples from %s", newest)
	return filepath.Join(newest, "examples")
}

// TestFluxOperatorExamplesApply creates every v1alpha2 MiniCluster of the Flux Operator's
// examples/ with strict field validation: all are accepted, those that set deprecated fields
// with a warning for each, and all render.
func TestFluxOperatorExamplesApply(t *testing.T) {
	docs := miniClusters(t, fluxOperatorExamples(t))
	n := 0
	for _, objs := range docs {
		n += len(objs)
	}
	t.Logf("%d v1alpha2 MiniClusters in %d files", n, len(docs))
	require.NotZero(t, n, "no v1alpha2 MiniCluster found")
	admitAndRender(t, docs)
}
