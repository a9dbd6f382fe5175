package render

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

func TestAppliedHash(t *testing.T) {
	object := func(data string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"data": map[string]any{"key": data}}}
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
		u.SetName("config")
		u.SetAnnotations(map[string]string{"kept": "yes"})
		require.NoError(t, StampAppliedHash(u))
		return u
	}
	stored := func(u *unstructured.Unstructured, deleting bool) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: u.GetAnnotations()}}
		if deleting {
			cm.DeletionTimestamp = &metav1.Time{}
		}
		return cm
	}
	a, again, b := object("one"), object("one"), object("two")
	require.Len(t, a.GetAnnotations()[fluxv1alpha2.AnnotationAppliedHash], 32)
	require.Equal(t, "yes", a.GetAnnotations()["kept"])

	tests := []struct {
		name    string
		current metav1.Object
		desired *unstructured.Unstructured
		want    bool
	}{
		{"same content, same hash", stored(a, false), again, true},
		{"other content", stored(a, false), b, false},
		{"being deleted", stored(a, true), again, false},
		{"never stamped", &corev1.ConfigMap{}, a, false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, UpToDate(tt.current, tt.desired), tt.name)
	}
}
