package hub

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// Orphans returns the objects among children (read from one member) whose origin hub is hub but
// whose root no longer exists on the hub: roots has no entry for the origin namespace/name, or
// one with another UID (the root was deleted and re-created). Objects of other hubs, and objects
// without a full origin, are never returned. The order of children is kept.
func Orphans(hub string, children []metav1.Object, roots map[types.NamespacedName]types.UID) []metav1.Object {
	var orphans []metav1.Object
	for _, obj := range children {
		origin, ok := fluxv1alpha2.OriginOf(obj)
		if !ok || hub == "" || origin.Hub != hub {
			continue
		}
		if uid, found := roots[types.NamespacedName{Namespace: origin.Namespace, Name: origin.Name}]; !found || uid != origin.UID {
			orphans = append(orphans, obj)
		}
	}
	return orphans
}
