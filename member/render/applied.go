package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// StampAppliedHash records in u, under fluxv1alpha2.AnnotationAppliedHash, a hash of all else u
// holds: what a server-side apply of u sends. Both the member reconciler and the hub stamp what
// they apply, so that an object whose stored copy carries the same hash is not sent again.
func StampAppliedHash(u *unstructured.Unstructured) error {
	data, err := json.Marshal(u.Object)
	if err != nil {
		return fmt.Errorf("hashing %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	sum := sha256.Sum256(data)
	annotations := u.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[fluxv1alpha2.AnnotationAppliedHash] = hex.EncodeToString(sum[:16])
	u.SetAnnotations(annotations)
	return nil
}

// UpToDate reports whether current, the object as stored, already holds what the stamped u
// would apply: it carries u's hash and is not being deleted.
func UpToDate(current metav1.Object, u *unstructured.Unstructured) bool {
	return current.GetDeletionTimestamp() == nil &&
		current.GetAnnotations()[fluxv1alpha2.AnnotationAppliedHash] == u.GetAnnotations()[fluxv1alpha2.AnnotationAppliedHash]
}
