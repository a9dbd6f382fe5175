package v1alpha2

import "testing"

func TestMaxSize(t *testing.T) {
	tests := []struct {
		name    string
		size    int32
		maxSize int32
		want    int32
	}{
		{name: "max unset", size: 3, want: 3},
		{name: "max larger", size: 2, maxSize: 8, want: 8},
		{name: "max equal", size: 4, maxSize: 4, want: 4},
		{name: "max smaller is ignored", size: 5, maxSize: 2, want: 5},
		{name: "nothing set", want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := &MiniCluster{Spec: MiniClusterSpec{Size: tt.size, MaxSize: tt.maxSize}}
			if got := mc.MaxSize(); got != tt.want {
				t.Errorf("MaxSize() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestIsBurstChild(t *testing.T) {
	tests := []struct {
		name     string
		bursting Bursting
		want     bool
	}{
		{name: "no bursting", want: false},
		{name: "root with bursts", bursting: Bursting{Clusters: []Burst{{Name: "burst-0", Size: 2, Cluster: "west"}}}, want: false},
		{name: "root with hostlist", bursting: Bursting{Hostlist: "a-[0-3]"}, want: false},
		{name: "child", bursting: Bursting{LeadBroker: &LeadBroker{Address: "10.0.0.1", Name: "root", Size: 2, Port: 30093}}, want: true},
		{name: "empty lead broker still marks a child", bursting: Bursting{LeadBroker: &LeadBroker{}}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := &MiniCluster{Spec: MiniClusterSpec{Flux: FluxSpec{Bursting: tt.bursting}}}
			if got := mc.IsBurstChild(); got != tt.want {
				t.Errorf("IsBurstChild() = %t, want %t", got, tt.want)
			}
		})
	}
}

func TestFluxContainer(t *testing.T) {
	tests := []struct {
		name       string
		containers []Container
		wantIndex  int // -1 for nil
	}{
		{name: "no containers", wantIndex: -1},
		{name: "single container without runFlux", containers: []Container{{Image: "a"}}, wantIndex: 0},
		{name: "single named container", containers: []Container{{Name: "app", Image: "a"}}, wantIndex: 0},
		{name: "runFlux first", containers: []Container{{Image: "a", RunFlux: true}, {Name: "side", Image: "b"}}, wantIndex: 0},
		{name: "runFlux second", containers: []Container{{Name: "side", Image: "b"}, {Image: "a", RunFlux: true}}, wantIndex: 1},
		{name: "several without runFlux", containers: []Container{{Name: "x"}, {Name: "y"}}, wantIndex: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := &MiniCluster{Spec: MiniClusterSpec{Containers: tt.containers}}
			got := mc.FluxContainer()
			if tt.wantIndex < 0 {
				if got != nil {
					t.Fatalf("FluxContainer() = %+v, want nil", got)
				}
				return
			}
			if got != &mc.Spec.Containers[tt.wantIndex] {
				t.Fatalf("FluxContainer() = %+v, want containers[%d]", got, tt.wantIndex)
			}
		})
	}
}
