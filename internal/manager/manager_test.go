package manager

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
)

// TestTheCacheHoldsObjectsWithoutTheirManagedFields: neither a cached MiniCluster nor a cached
// object fluxfed applies has managedFields; internal/apply reads an object live when its claim
// needs them.
func TestTheCacheHoldsObjectsWithoutTheirManagedFields(t *testing.T) {
	fields := []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsV1: metav1.NewFieldsV1(`{"f:spec":{}}`)}}
	byObject := cacheOptions().ByObject
	entry := func(obj client.Object) (cache.ByObject, bool) {
		for o, c := range byObject {
			if reflect.TypeOf(o) == reflect.TypeOf(obj) {
				return c, true
			}
		}
		return cache.ByObject{}, false
	}

	mc := v1alpha2test.MiniCluster("a").Namespace("ns").Obj()
	mc.ManagedFields = fields
	c, ok := entry(&fluxv1alpha2.MiniCluster{})
	require.True(t, ok, "no cache options for MiniClusters")
	require.NotNil(t, c.Transform)
	got, err := c.Transform(mc)
	require.NoError(t, err)
	require.Empty(t, got.(*fluxv1alpha2.MiniCluster).ManagedFields)
	require.Equal(t, "a", got.(*fluxv1alpha2.MiniCluster).Name)

	for _, obj := range []client.Object{&batchv1.Job{}, &corev1.Service{}, &corev1.ConfigMap{}, &corev1.Secret{}} {
		c, ok := entry(obj)
		require.True(t, ok, "no cache options for %T", obj)
		require.NotNil(t, c.Label, "%T: the cache holds only the objects of MiniClusters", obj)
		require.NotNil(t, c.Transform, "%T", obj)
		obj.SetManagedFields(fields)
		obj.SetName("b")
		got, err := c.Transform(obj)
		require.NoError(t, err)
		require.Empty(t, got.(client.Object).GetManagedFields(), "%T: internal/apply reads them live when it needs them", obj)
		require.Equal(t, "b", got.(client.Object).GetName())
	}
}
