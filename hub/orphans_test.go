package hub

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

const (
	orphanHub     = "hub-east"
	orphanRootUID = types.UID("6f1c0b1e-0000-4000-8000-000000000001")
)

// originObj is a child object on a member carrying the given origin; an empty value leaves that
// label or annotation out.
func originObj(name, hub, namespace, rootName, uid string) metav1.Object {
	obj := &fluxv1alpha2.MiniCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "hpc", Labels: map[string]string{}, Annotations: map[string]string{}}}
	for k, v := range map[string]string{
		fluxv1alpha2.LabelOriginHub: hub, fluxv1alpha2.LabelOriginNamespace: namespace, fluxv1alpha2.LabelOriginName: rootName,
	} {
		if v != "" {
			obj.Labels[k] = v
		}
	}
	if uid != "" {
		obj.Annotations[fluxv1alpha2.AnnotationOriginUID] = uid
	}
	return obj
}

func TestOrphans(t *testing.T) {
	uid := string(orphanRootUID)
	root := types.NamespacedName{Namespace: "hpc", Name: "flux-sample"}
	tests := []struct {
		name     string
		children []metav1.Object
		roots    map[types.NamespacedName]types.UID
		want     []string
	}{
		{name: "existing root keeps its child",
			children: []metav1.Object{originObj("c", orphanHub, "hpc", "flux-sample", uid)},
			roots:    map[types.NamespacedName]types.UID{root: orphanRootUID}},
		{name: "deleted root leaves an orphan",
			children: []metav1.Object{originObj("c", orphanHub, "hpc", "flux-sample", uid)},
			want:     []string{"c"}},
		{name: "re-created root (another UID) leaves an orphan",
			children: []metav1.Object{originObj("c", orphanHub, "hpc", "flux-sample", uid)},
			roots:    map[types.NamespacedName]types.UID{root: "new-uid"},
			want:     []string{"c"}},
		{name: "root of the same name in another namespace does not count",
			children: []metav1.Object{originObj("c", orphanHub, "hpc", "flux-sample", uid)},
			roots:    map[types.NamespacedName]types.UID{{Namespace: "other", Name: "flux-sample"}: orphanRootUID},
			want:     []string{"c"}},
		{name: "another hub's children are untouched",
			children: []metav1.Object{originObj("c", "hub-west", "hpc", "flux-sample", uid)}},
		{name: "missing annotation is untouched",
			children: []metav1.Object{originObj("c", orphanHub, "hpc", "flux-sample", "")}},
		{name: "missing label is untouched",
			children: []metav1.Object{originObj("c", orphanHub, "hpc", "", uid)}},
		{name: "objects without origin are untouched",
			children: []metav1.Object{&fluxv1alpha2.MiniCluster{ObjectMeta: metav1.ObjectMeta{Name: "handmade"}}}},
		{name: "mixed, in the order of children",
			children: []metav1.Object{
				originObj("gone-1", orphanHub, "hpc", "deleted", "u1"),
				originObj("kept", orphanHub, "hpc", "flux-sample", uid),
				originObj("west", "hub-west", "hpc", "deleted", "u1"),
				originObj("recreated", orphanHub, "hpc", "flux-sample", "old-uid"),
				originObj("gone-2", orphanHub, "lab", "deleted", "u2"),
			},
			roots: map[types.NamespacedName]types.UID{root: orphanRootUID},
			want:  []string{"gone-1", "recreated", "gone-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, o := range Orphans(orphanHub, tt.children, tt.roots) {
				got = append(got, o.GetName())
			}
			require.Equal(t, tt.want, got)
		})
	}
	require.Empty(t, Orphans("", []metav1.Object{originObj("c", "", "hpc", "x", "u")}, nil), "an empty hub identity proves nothing")
}
