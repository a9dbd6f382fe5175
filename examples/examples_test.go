// Package examples holds the MiniCluster YAMLs users start from; its test applies every one of
// them to a real API server.
package examples

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

// The tests share one API server (testenv.Shared), each MiniCluster in a namespace of its own;
// the deprecation policy that TestDeprecatedFieldsApplyWithWarnings installs only warns.
func TestMain(m *testing.M) { testenv.Main(m) }

// TestExamplesApply creates every MiniCluster under examples/ with strict field validation, so a
// field the CRD does not know (a typo, or a field we dropped) fails the test, and checks that the
// stored object reads back as a MiniCluster with the schema defaults filled in.
func TestExamplesApply(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files, "no examples found")

	env := testenv.Shared(t)
	ctx := context.Background()
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			docs := readDocuments(t, file)
			require.NotEmpty(t, docs, "%s holds no objects", file)

			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "example-"}}
			require.NoError(t, env.Client.Create(ctx, ns))

			for _, obj := range docs {
				obj.SetNamespace(ns.Name)
				require.NoError(t, env.Client.Create(ctx, obj, client.FieldValidation(metav1.FieldValidationStrict)),
					"creating %s %s", obj.GetKind(), obj.GetName())
				if obj.GroupVersionKind() != fluxv1alpha2.GroupVersion.WithKind("MiniCluster") {
					continue
				}
				var mc fluxv1alpha2.MiniCluster
				require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(obj), &mc))
				require.GreaterOrEqual(t, mc.Spec.Size, int32(1), "size defaulted")
				written, _, _ := unstructured.NestedString(obj.Object, "spec", "network", "headlessName")
				require.Equal(t, written, mc.Spec.Network.HeadlessName, "network.headlessName is stored as written, never defaulted")
				require.NotEmpty(t, mc.Spec.Containers, "containers")
			}
		})
	}
}

func readDocuments(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		require.NoError(t, err)
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &obj.Object); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(obj.Object) == 0 {
			continue // a document of comments only
		}
		objs = append(objs, obj)
	}
}
