package v1alpha2

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOrigin(t *testing.T) {
	root := &MiniCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "hpc", Name: "root", UID: "uid-1"}}
	origin := RootOrigin("hub-1", root)
	marked := func(change func(labels, annotations map[string]string)) *metav1.ObjectMeta {
		obj := &metav1.ObjectMeta{Labels: map[string]string{"keep": "me"}}
		origin.Mark(obj)
		if change != nil {
			change(obj.Labels, obj.Annotations)
		}
		return obj
	}

	tests := []struct {
		name     string
		obj      *metav1.ObjectMeta
		complete bool
	}{
		{name: "marked for the root", obj: marked(nil), complete: true},
		{name: "unmarked", obj: &metav1.ObjectMeta{}},
		{name: "no UID", obj: marked(func(_, a map[string]string) { delete(a, AnnotationOriginUID) })},
		{name: "empty hub", obj: marked(func(l, _ map[string]string) { l[LabelOriginHub] = "" })},
		{name: "no name", obj: marked(func(l, _ map[string]string) { delete(l, LabelOriginName) })},
		{name: "an earlier root of the name", obj: marked(func(_, a map[string]string) { a[AnnotationOriginUID] = "uid-0" }), complete: true},
		{name: "another hub", obj: marked(func(l, _ map[string]string) { l[LabelOriginHub] = "hub-2" }), complete: true},
		{name: "another namespace", obj: marked(func(l, _ map[string]string) { l[LabelOriginNamespace] = "other" }), complete: true},
		{name: "another root", obj: marked(func(l, _ map[string]string) { l[LabelOriginName] = "other" }), complete: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := OriginOf(tt.obj); ok != tt.complete {
				t.Errorf("OriginOf complete = %t, want %t", ok, tt.complete)
			}
		})
	}

	obj := marked(nil)
	if obj.Labels["keep"] != "me" {
		t.Errorf("Mark dropped a label: %v", obj.Labels)
	}
	if got, _ := OriginOf(obj); got != origin {
		t.Errorf("OriginOf(marked) = %+v, want %+v", got, origin)
	}
	if got, want := origin.String(), "hub hub-1, root hpc/root"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestHeadlessName(t *testing.T) {
	mc := &MiniCluster{ObjectMeta: metav1.ObjectMeta{Name: "lammps"}}
	if got := mc.HeadlessName(); got != "lammps" {
		t.Errorf("unset: HeadlessName() = %q, want the MiniCluster's name", got)
	}
	mc.Spec.Network.HeadlessName = "brokers"
	if got := mc.HeadlessName(); got != "brokers" {
		t.Errorf("set: HeadlessName() = %q, want brokers", got)
	}
}
