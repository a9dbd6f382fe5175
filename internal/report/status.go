package report

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Status writes the status fields a controller owns with server-side apply, and remembers on
// which version of each object it wrote them. Its zero value needs Client and Owner set; it is
// safe for concurrent use.
type Status struct {
	// Client writes the status subresource.
	Client client.Client
	// Owner is the field manager: the controller owns the fields of the status it writes, and
	// leaves the others to their owners.
	Owner string

	// writtenAt maps an object's key to the resourceVersion the object had when its status was
	// last written.
	writtenAt sync.Map
}

// Lags reports whether obj is the version the last status write was made on: the cache has
// not seen that write yet, what obj's status says is older than what was written, and a
// status computed from it must not be written again.
func (s *Status) Lags(obj client.Object) bool {
	v, ok := s.writtenAt.Load(client.ObjectKeyFromObject(obj))
	return ok && v == obj.GetResourceVersion()
}

// Apply writes status, a typed status value holding only the fields the controller owns, as
// obj's status with server-side apply, forcing ownership of those fields. Once written, obj's
// version is remembered (see Lags), unless the write changed nothing.
func (s *Status) Apply(ctx context.Context, obj client.Object, status any) error {
	gvk, err := s.Client.GroupVersionKindFor(obj)
	if err != nil {
		return fmt.Errorf("writing the status of %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	fields, err := runtime.DefaultUnstructuredConverter.ToUnstructured(status)
	if err != nil {
		return fmt.Errorf("encoding the status of %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": fields}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(obj.GetNamespace())
	u.SetName(obj.GetName())
	if err := s.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(s.Owner), client.ForceOwnership); err != nil {
		return fmt.Errorf("writing the status of %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	// The answer is the object as stored. One of the same version is a write that changed
	// nothing: obj is as current as the server, and there is no later version to wait for.
	key := client.ObjectKeyFromObject(obj)
	if u.GetResourceVersion() == obj.GetResourceVersion() {
		s.writtenAt.Delete(key)
		return nil
	}
	s.writtenAt.Store(key, obj.GetResourceVersion())
	return nil
}

// Forget drops what is remembered of the object of key, once it is gone.
func (s *Status) Forget(key client.ObjectKey) {
	s.writtenAt.Delete(key)
}
