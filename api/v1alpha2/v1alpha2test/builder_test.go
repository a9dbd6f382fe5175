package v1alpha2test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

func TestBuilder(t *testing.T) {
	b := MiniCluster("root").Namespace("hpc").Size(2).MaxSize(4).Burst("burst-a", 3, "member-a").Expose("127.0.0.1")
	first := b.Obj()
	second := b.Burst("burst-b", 1, "").Obj()

	want := fluxv1alpha2.MiniClusterSpec{
		Size: 2, MaxSize: 4,
		Containers: []fluxv1alpha2.Container{{Image: "rockylinux:9", Command: "hostname"}},
		Flux: fluxv1alpha2.FluxSpec{Bursting: fluxv1alpha2.Bursting{
			Expose:   &fluxv1alpha2.Expose{Address: "127.0.0.1"},
			Clusters: []fluxv1alpha2.Burst{{Name: "burst-a", Size: 3, Cluster: "member-a"}},
		}},
	}
	if diff := cmp.Diff(want, first.Spec); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
	if first.Name != "root" || first.Namespace != "hpc" || first.Kind != "MiniCluster" {
		t.Errorf("metadata: %s/%s %s", first.Namespace, first.Name, first.Kind)
	}
	if len(first.Spec.Flux.Bursting.Clusters) != 1 || len(second.Spec.Flux.Bursting.Clusters) != 2 {
		t.Errorf("Obj does not return a copy: %d and %d bursts", len(first.Spec.Flux.Bursting.Clusters), len(second.Spec.Flux.Bursting.Clusters))
	}
}
