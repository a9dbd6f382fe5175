package bursting

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
)

func TestContainerHardware(t *testing.T) {
	list := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	tests := []struct {
		name string
		c    *fluxv1alpha2.Container
		want Hardware
	}{
		{name: "no container", want: Hardware{}},
		{name: "nothing requested", c: &fluxv1alpha2.Container{}, want: Hardware{}},
		{name: "cpu limit", c: &fluxv1alpha2.Container{Resources: corev1.ResourceRequirements{Limits: list("cpu", "4")}}, want: Hardware{Cores: 4}},
		{name: "fractional cpu limit rounds up", c: &fluxv1alpha2.Container{Resources: corev1.ResourceRequirements{Limits: list("cpu", "3500m")}}, want: Hardware{Cores: 4}},
		{name: "a sliver of a cpu is one core", c: &fluxv1alpha2.Container{Resources: corev1.ResourceRequirements{Limits: list("cpu", "1m")}}, want: Hardware{Cores: 1}},
		{name: "the limit wins over the request", c: &fluxv1alpha2.Container{Resources: corev1.ResourceRequirements{
			Limits: list("cpu", "8"), Requests: list("cpu", "2"),
		}}, want: Hardware{Cores: 8}},
		{name: "the request without a limit", c: &fluxv1alpha2.Container{Resources: corev1.ResourceRequirements{Requests: list("cpu", "2.2")}}, want: Hardware{Cores: 3}},
		{name: "a zero cpu is unknown", c: &fluxv1alpha2.Container{Resources: corev1.ResourceRequirements{Limits: list("cpu", "0")}}, want: Hardware{}},
		{name: "cores wins over cpu", c: &fluxv1alpha2.Container{Cores: 16, Resources: corev1.ResourceRequirements{Limits: list("cpu", "4")}}, want: Hardware{Cores: 16}},
		{name: "nvidia and amd GPUs", c: &fluxv1alpha2.Container{Resources: corev1.ResourceRequirements{
			Limits: list("cpu", "2", "nvidia.com/gpu", "2", "amd.com/gpu", "1", "vpc.amazonaws.com/efa", "1"),
		}}, want: Hardware{Cores: 2, GPUs: 3}},
		{name: "GPUs without cpu leave the cores unknown", c: &fluxv1alpha2.Container{Resources: corev1.ResourceRequirements{Limits: list("nvidia.com/gpu", "1")}}, want: Hardware{GPUs: 1}},
		{name: "an absurd cpu is clamped, not wrapped", c: &fluxv1alpha2.Container{Resources: corev1.ResourceRequirements{Limits: list("cpu", "3e12")}}, want: Hardware{Cores: 1<<31 - 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, ContainerHardware(tt.c))
		})
	}
}

// withCPU gives mc one container with the cpu limit cpu and gpus NVIDIA GPUs.
func withCPU(mc *fluxv1alpha2.MiniCluster, cpu string, gpus string) *fluxv1alpha2.MiniCluster {
	limits := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	if gpus != "" {
		limits["nvidia.com/gpu"] = resource.MustParse(gpus)
	}
	mc.Spec.Containers = []fluxv1alpha2.Container{{Image: "rockylinux:9", Resources: corev1.ResourceRequirements{Limits: limits}}}
	return mc
}

func TestResourceGroups(t *testing.T) {
	explicit := func() *fluxv1alpha2.MiniCluster {
		return withCPU(v1alpha2test.MiniCluster("root").Namespace("hpc").Size(2).MaxSize(3).Bursts(
			fluxv1alpha2.Burst{Name: "big", Size: 2, Cluster: "m-a", Resources: &fluxv1alpha2.BurstResources{Cores: 64, GPUs: 8}},
			fluxv1alpha2.Burst{Name: "like-root", Size: 1, MaxSize: 2},
			fluxv1alpha2.Burst{Name: "small", Size: 1, Cluster: "m-b", Resources: &fluxv1alpha2.BurstResources{Cores: 1}},
		).Obj(),
			"1500m", "1")
	}
	// The groups every side must give, but for the hosts of rank 0.
	groups := func(rank0 string) []ResourceGroup {
		return []ResourceGroup{
			{Hosts: []string{rank0, "root-1", "root-2"}, Start: 0, End: 3, Hardware: Hardware{Cores: 2, GPUs: 1}, Property: "root"},
			{Hosts: []string{"big-0", "big-1"}, Start: 3, End: 5, Hardware: Hardware{Cores: 64, GPUs: 8}, Property: "big"},
			{Hosts: []string{"like-root-0", "like-root-1"}, Start: 5, End: 7, Hardware: Hardware{Cores: 2, GPUs: 1}, Property: "like-root"},
			{Hosts: []string{"small-0"}, Start: 7, End: 8, Hardware: Hardware{Cores: 1}, Property: "small"},
		}
	}
	// A child runs the root's containers (v1alpha2test.Child copies the root's spec).
	child := func(root *fluxv1alpha2.MiniCluster, burst string) *fluxv1alpha2.MiniCluster {
		return v1alpha2test.Child(root, burst, "127.0.2.10", 30093)
	}
	tests := []struct {
		name         string
		mc           *fluxv1alpha2.MiniCluster
		want         []ResourceGroup
		wantFallback string
	}{
		{name: "root with explicit and inherited bursts", mc: explicit(), want: groups("root-0")},
		{name: "a child names rank 0 by the lead address", mc: child(explicit(), "big"), want: groups("127.0.2.10")},
		{name: "a reserved burst's child too", mc: child(explicit(), "like-root"), want: groups("127.0.2.10")},
		{name: "no bursts: nothing to describe, nothing said", mc: withCPU(v1alpha2test.MiniCluster("root").Namespace("hpc").Size(2).Obj(), "4", "")},
		{name: "no bursts and no cpu", mc: v1alpha2test.MiniCluster("root").Namespace("hpc").Size(2).Obj()},
		{name: "the root's cores unknown", mc: v1alpha2test.MiniCluster("root").Namespace("hpc").Size(2).Bursts(fluxv1alpha2.Burst{Name: "big", Size: 2, Resources: &fluxv1alpha2.BurstResources{Cores: 64}}).Obj(),
			wantFallback: "the cores of the root MiniCluster root are unknown"},
		{name: "nothing known, on a child", mc: child(v1alpha2test.MiniCluster("root").Namespace("hpc").Size(2).Bursts(fluxv1alpha2.Burst{Name: "b", Size: 2}).Obj(), "b"),
			wantFallback: "the cores of the root MiniCluster root are unknown"},
		{name: "only the root's cores known, on a child", mc: child(withCPU(v1alpha2test.MiniCluster("root").Namespace("hpc").Size(2).Bursts(
			fluxv1alpha2.Burst{Name: "b", Size: 2, Resources: &fluxv1alpha2.BurstResources{Cores: 2}},
			fluxv1alpha2.Burst{Name: "c", Size: 2},
		).Obj(),
			"2", ""), "b"), want: []ResourceGroup{
			{Hosts: []string{"127.0.2.10", "root-1"}, Start: 0, End: 2, Hardware: Hardware{Cores: 2}, Property: "root"},
			{Hosts: []string{"b-0", "b-1"}, Start: 2, End: 4, Hardware: Hardware{Cores: 2}, Property: "b"},
			{Hosts: []string{"c-0", "c-1"}, Start: 4, End: 6, Hardware: Hardware{Cores: 2}, Property: "c"},
		}},
		{name: "a custom hostlist", mc: v1alpha2test.Edit(withCPU(v1alpha2test.MiniCluster("root").Namespace("hpc").Size(2).Obj(), "4", ""), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Bursting.Hostlist = "root-[0-1],other-[0-2]"
		}),

			wantFallback: "the hardware of the 3 hosts that spec.flux.bursting.hostlist lists outside this MiniCluster is unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := NewLayout(tt.mc)
			require.NoError(t, err)
			got, fallback := l.ResourceGroups()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("groups (-want +got):\n%s", diff)
			}
			require.Contains(t, fallback, tt.wantFallback)
			require.Equal(t, tt.wantFallback == "", fallback == "", fallback)
			// Whatever it says, the groups hold exactly the bootstrap hosts, in rank order.
			if got != nil {
				var hosts []string
				for _, g := range got {
					hosts = append(hosts, g.Hosts...)
				}
				require.Equal(t, l.Hosts, hosts)
			}
		})
	}
}

// TestResourceGroupsRefusesGroupsThatDoNotFollowEachOther guards against a Layout whose
// groups would describe some host twice or not at all.
func TestResourceGroupsRefusesGroupsThatDoNotFollowEachOther(t *testing.T) {
	l := &Layout{
		Hosts: []string{"a-0", "a-1", "b-0", "b-1"},
		Groups: []Group{
			{Name: "a", Start: 0, End: 2, Hardware: Hardware{Cores: 1}},
			{Name: "b", Start: 1, End: 3, Hardware: Hardware{Cores: 1}},
			{Name: "c", Start: 3, End: 4, Hardware: Hardware{Cores: 1}},
		},
	}
	got, fallback := l.ResourceGroups()
	require.Nil(t, got)
	require.Contains(t, fallback, "the groups of ranks do not follow each other (burst b holds ranks 1-2 after rank 1)")
}
