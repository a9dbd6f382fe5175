package hub

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// OriginOf returns what a child object on a member says about where it came from: the hub
// (LabelOriginHub), the root's namespace and name (LabelOriginNamespace, LabelOriginName) and
// the root's UID (AnnotationOriginUID). ok is true only when all four are present and non-empty:
// an object missing any of them proves nothing about its owner.
func OriginOf(obj metav1.Object) (hub, namespace, name, uid string, ok bool) {
	labels, annotations := obj.GetLabels(), obj.GetAnnotations()
	hub = labels[fluxv1alpha2.LabelOriginHub]
	namespace = labels[fluxv1alpha2.LabelOriginNamespace]
	name = labels[fluxv1alpha2.LabelOriginName]
	uid = annotations[fluxv1alpha2.AnnotationOriginUID]
	ok = hub != "" && namespace != "" && name != "" && uid != ""
	return hub, namespace, name, uid, ok
}

// Owns reports whether root, on the hub identified by hub, provably owns obj: all four origin
// fields of obj match the hub identity and root's namespace, name and UID. Owner references do
// not cross clusters, so this is the check before the hub deletes anything on a member.
func Owns(hub string, root *fluxv1alpha2.MiniCluster, obj metav1.Object) bool {
	h, ns, name, uid, ok := OriginOf(obj)
	return ok && hub != "" && h == hub && ns == root.Namespace && name == root.Name && uid == string(root.UID)
}

// Orphans returns the objects among children (read from one member) whose origin hub is hub but
// whose root no longer exists on the hub: roots has no entry for the origin namespace/name, or
// one with another UID (the root was deleted and re-created). Objects of other hubs, and objects
// without a full origin, are never returned. The order of children is kept.
func Orphans(hub string, children []metav1.Object, roots map[types.NamespacedName]types.UID) []metav1.Object {
	var orphans []metav1.Object
	for _, obj := range children {
		h, ns, name, uid, ok := OriginOf(obj)
		if !ok || hub == "" || h != hub {
			continue
		}
		if rootUID, found := roots[types.NamespacedName{Namespace: ns, Name: name}]; !found || string(rootUID) != uid {
			orphans = append(orphans, obj)
		}
	}
	return orphans
}
