package member

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/member/render"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// desired is one object the reconciler applies, ready for server-side apply.
type desired struct {
	obj *unstructured.Unstructured
}

// newDesired converts a typed apply configuration into an object owned by mc (a controller
// owner reference, so deleting the MiniCluster deletes it) and stamps it with its hash.
func newDesired(mc *fluxv1alpha2.MiniCluster, ac runtime.ApplyConfiguration, gvk schema.GroupVersionKind) (desired, error) {
	data, err := json.Marshal(ac)
	if err != nil {
		return desired{}, fmt.Errorf("encoding %s: %w", gvk.Kind, err)
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(data, &u.Object); err != nil {
		return desired{}, fmt.Errorf("decoding %s: %w", gvk.Kind, err)
	}
	u.SetGroupVersionKind(gvk)
	u.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(mc, fluxv1alpha2.GroupVersion.WithKind("MiniCluster"))})
	// The manager caches only objects with the MiniCluster label (CacheByObject), so every
	// object it applies must carry it.
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range names.SelectorLabels(mc) {
		labels[k] = v
	}
	u.SetLabels(labels)

	if err := render.StampAppliedHash(u); err != nil {
		return desired{}, err
	}
	return desired{obj: u}, nil
}

// upToDate reports whether current (the cached object, nil when absent) already holds what d
// would apply.
func (d desired) upToDate(current client.Object) bool {
	return current != nil && render.UpToDate(current, d.obj)
}
