package v1alpha2test

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// RootCluster is the cluster the root MiniClusters of the fixtures run in.
const RootCluster = "hub"

// LeadAddress and LeadPort are where the fixtures' children reach the root's rank 0.
const (
	LeadAddress = "127.0.2.10"
	LeadPort    = 31050
)

// Member is one MiniCluster of a federation and the cluster its pods run in.
type Member struct {
	MiniCluster *fluxv1alpha2.MiniCluster
	Cluster     string
}

// Federation is a root MiniCluster (Members[0]) and the burst children that join its Flux
// instance.
type Federation struct {
	// Name names the case; golden files are <Name>.toml for the root and
	// <Name>.<child>.toml for each child.
	Name    string
	Members []Member
}

// FederationRoot starts a root MiniCluster of size pods running rockylinux:9, as the API server
// stores it (Stored): the root of every federation of Federations.
func FederationRoot(name string, size int32) *Builder {
	return Stored(name).Size(size).Image("rockylinux:9")
}

// Child returns the burst child the hub would create for the root's entry named burst: a copy
// of the root's spec named like the entry, as large as it, pointing at the lead broker,
// repeating the root's bursts (without their clusters). It runs in the entry's namespace, else
// the root's.
func Child(root *fluxv1alpha2.MiniCluster, burst, address string, port int32) *fluxv1alpha2.MiniCluster {
	mc := &fluxv1alpha2.MiniCluster{
		ObjectMeta: metav1.ObjectMeta{Name: burst, Namespace: root.Namespace},
		Spec:       *root.Spec.DeepCopy(),
	}
	mc.Spec.MaxSize, mc.Spec.MinSize = 0, 0
	mc.Spec.Flux.Bursting = fluxv1alpha2.Bursting{}
	for _, c := range root.Spec.Flux.Bursting.Clusters {
		if c.Name == burst {
			mc.Spec.Size = c.Size
			if c.Namespace != "" {
				mc.Namespace = c.Namespace
			}
		}
		c.Cluster, c.Namespace = "", ""
		mc.Spec.Flux.Bursting.Clusters = append(mc.Spec.Flux.Bursting.Clusters, c)
	}
	mc.Spec.Flux.Bursting.LeadBroker = &fluxv1alpha2.LeadBroker{Address: address, Name: root.Name, Size: root.MaxSize(), Port: port}
	return mc
}

// federation returns root and a child of each of its bursts, each child in the burst's
// cluster, or in "external-<burst>" for a reserved burst (brought up by someone else).
func federation(name string, root *fluxv1alpha2.MiniCluster) Federation {
	f := Federation{Name: name, Members: []Member{{MiniCluster: root, Cluster: RootCluster}}}
	for _, c := range root.Spec.Flux.Bursting.Clusters {
		cluster := c.Cluster
		if cluster == "" {
			cluster = "external-" + c.Name
		}
		f.Members = append(f.Members, Member{MiniCluster: Child(root, c.Name, LeadAddress, LeadPort), Cluster: cluster})
	}
	return f
}

// Federations returns the federations that package brokerconf renders broker.toml for (its
// golden files) and that package e2e/fluxcheck checks against the rules of FLUX.md: single
// MiniClusters and federations with bursts.
func Federations() []Federation {
	return []Federation{
		federation("root-size-1", FederationRoot("flux-sample", 1).Obj()),
		federation("root-size-4", FederationRoot("flux-sample", 4).Obj()),
		federation("max-size", Edit(FederationRoot("flux-sample", 2).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.MaxSize = 5
			mc.Spec.MinSize = 1
		})),
		federation("minimal-service", Edit(FederationRoot("flux-sample", 3).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.MinimalService = true
		})),
		federation("three-bursts", Edit(FederationRoot("flux-sample", 2).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.MaxSize = 3
			mc.Spec.Flux.Bursting.Clusters = []fluxv1alpha2.Burst{
				{Name: "burst-0", Size: 4, Cluster: "member-a"},
				{Name: "burst-1", Size: 1},
				{Name: "burst-2", Size: 3, Cluster: "member-b", Namespace: "hpc-burst"},
			}
		})),
		federation("custom-hostlist", Edit(FederationRoot("flux-sample", 2).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Bursting.Hostlist = "flux-sample-[0-1],compute-a-[001-003]"
		})),
		federation("kary-2", Edit(FederationRoot("flux-sample", 6).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Topology = "kary:2"
		})),
		federation("flat-bursts", Edit(FederationRoot("flux-sample", 2).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Topology = "kary:0"
			mc.Spec.Flux.Bursting.Clusters = []fluxv1alpha2.Burst{{Name: "burst-0", Size: 3, Cluster: "member-a"}}
		})),
		federation("broker-config", Edit(FederationRoot("flux-sample", 2).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.BrokerConfig = `[bootstrap]
curve_cert = "/mnt/flux/curve/curve.cert"
default_port = 9000
default_bind = "tcp://eth1:%p"
default_connect = "tcp://%h.flux-service.hpc.svc.cluster.local:%p"
hosts = [{ host = "flux-sample-[0-1]" }]
`
		})),
		// Each group described with its own hardware: the root's from its container (3.5 cpu
		// rounds up to 4 cores, one GPU), two bursts with their own, one like the root's.
		federation("burst-hardware", Edit(FederationRoot("flux-sample", 2).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.MaxSize = 3
			mc.Spec.Containers[0].Resources = corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3500m"), "nvidia.com/gpu": resource.MustParse("1")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			}
			mc.Spec.Flux.Bursting.Clusters = []fluxv1alpha2.Burst{
				{Name: "big", Size: 2, MaxSize: 3, Cluster: "member-a", Resources: &fluxv1alpha2.BurstResources{Cores: 64, GPUs: 8}},
				{Name: "small", Size: 1, Cluster: "member-b", Resources: &fluxv1alpha2.BurstResources{Cores: 1}},
				{Name: "same", Size: 2, Cluster: "member-a", Namespace: "hpc-burst"},
			}
		})),
		// The bursts' hardware is known but the root's is not: every side falls back to R
		// encoded on each node.
		federation("burst-hardware-unknown", Edit(FederationRoot("flux-sample", 2).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Bursting.Clusters = []fluxv1alpha2.Burst{
				{Name: "big", Size: 2, Cluster: "member-a", Resources: &fluxv1alpha2.BurstResources{Cores: 64, GPUs: 8}},
			}
		})),
		federation("custom-names", Edit(FederationRoot("lammps", 3).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Namespace = "team-a"
			mc.Spec.Network.HeadlessName = "brokers"
			mc.Spec.Flux.Container.MountPath = "/opt/flux view/"
			mc.Spec.Flux.ConnectTimeout = nil
			mc.Spec.Flux.Scheduler = fluxv1alpha2.Scheduler{Simple: true}
			mc.Spec.Logging.Zeromq = true
			mc.Spec.Flux.Bursting.Clusters = []fluxv1alpha2.Burst{{Name: "remote", Size: 2, Cluster: "member-a", Namespace: "team-a-burst"}}
		})),
	}
}
