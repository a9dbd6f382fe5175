package hub

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// deleteByUID deletes obj, as it was read: another object of its name is left alone. One
// already gone counts as deleted; the UID precondition's failure is returned as a Conflict.
func deleteByUID(ctx context.Context, c client.Client, obj client.Object) error {
	uid := obj.GetUID()
	err := c.Delete(ctx, obj, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s: %w", describe(obj), err)
	}
	return nil
}

// recordedObject returns an empty object of p's kind that names p.
func recordedObject(p fluxv1alpha2.PushedObject) client.Object {
	meta := metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}
	if p.Kind == "Secret" {
		return &corev1.Secret{ObjectMeta: meta}
	}
	return &fluxv1alpha2.MiniCluster{ObjectMeta: meta}
}

// deleteExactly deletes obj as it was read: a changed object (adopted by a re-created root, for
// example) is left alone. An object already gone counts as deleted.
func deleteExactly(ctx context.Context, c client.Client, obj client.Object) error {
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	err := c.Delete(ctx, obj, client.Preconditions{UID: &uid, ResourceVersion: &rv}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s: %w", describe(obj), err)
	}
	return nil
}

// describe names an object pushed to a member: "MiniCluster ns/name" or "Secret ns/name".
func describe(obj client.Object) string {
	kind := "MiniCluster"
	if _, ok := obj.(*corev1.Secret); ok {
		kind = "Secret"
	}
	return kind + " " + obj.GetNamespace() + "/" + obj.GetName()
}

// metaApplyObject is an apply request for root that carries only its identity.
func metaApplyObject(root *fluxv1alpha2.MiniCluster) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(fluxv1alpha2.GroupVersion.WithKind("MiniCluster"))
	u.SetNamespace(root.Namespace)
	u.SetName(root.Name)
	return u
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
