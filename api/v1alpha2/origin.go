package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Origin is where an object on a member cluster came from: the hub that pushed it and the root
// MiniCluster it was pushed for. Owner references do not cross clusters, so the hub marks what
// it pushes with LabelOriginHub, LabelOriginNamespace, LabelOriginName and AnnotationOriginUID,
// and both the hub and the member reconciler read those marks through this type.
type Origin struct {
	// Hub is the identity of the hub (the value of LabelOriginHub).
	Hub string
	// Namespace and Name are those of the root on the hub.
	Namespace, Name string
	// UID is the root's UID: a root deleted and re-created under the same name is another root.
	UID types.UID
}

// RootOrigin is the origin of what hub pushes for root.
func RootOrigin(hub string, root *MiniCluster) Origin {
	return Origin{Hub: hub, Namespace: root.Namespace, Name: root.Name, UID: root.UID}
}

// OriginOf returns the origin obj carries. ok is true only when all four marks are present and
// non-empty: an object missing any of them was not pushed by a hub.
func OriginOf(obj metav1.Object) (o Origin, ok bool) {
	labels := obj.GetLabels()
	o = Origin{
		Hub:       labels[LabelOriginHub],
		Namespace: labels[LabelOriginNamespace],
		Name:      labels[LabelOriginName],
		UID:       types.UID(obj.GetAnnotations()[AnnotationOriginUID]),
	}
	return o, o.complete()
}

func (o Origin) complete() bool {
	return o.Hub != "" && o.Namespace != "" && o.Name != "" && o.UID != ""
}

// Labels returns the origin's labels: a selector for everything pushed for the root.
func (o Origin) Labels() map[string]string {
	return map[string]string{LabelOriginHub: o.Hub, LabelOriginNamespace: o.Namespace, LabelOriginName: o.Name}
}

// Mark sets the origin's labels and annotation on obj, keeping its other labels and annotations.
func (o Origin) Mark(obj metav1.Object) {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range o.Labels() {
		labels[k] = v
	}
	obj.SetLabels(labels)
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AnnotationOriginUID] = string(o.UID)
	obj.SetAnnotations(annotations)
}

// String describes the origin for messages: "hub h, root ns/name".
func (o Origin) String() string {
	return "hub " + o.Hub + ", root " + o.Namespace + "/" + o.Name
}
