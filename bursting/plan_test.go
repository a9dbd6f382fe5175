package bursting

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
)

var testLead = Endpoint{Address: "127.0.2.10", Port: 30093}

const testHub = "hub-a"

// fourBursts is a root of 2 pods with room for 3, and bursts of 4 (member-a), 1 (reserved),
// 3 (member-b, own namespace) and 2 (member-a again, a name starting with a digit).
func fourBursts() *fluxv1alpha2.MiniCluster {
	mc := v1alpha2test.MiniCluster("flux-sample").Namespace("hpc").Size(2).MaxSize(3).Bursts(
		fluxv1alpha2.Burst{Name: "burst-0", Size: 4, Cluster: "member-a"},
		fluxv1alpha2.Burst{Name: "burst-1", Size: 1},
		fluxv1alpha2.Burst{Name: "burst-2", Size: 3, Cluster: "member-b", Namespace: "hpc-burst"},
		fluxv1alpha2.Burst{Name: "3rd", Size: 2, Cluster: "member-a"},
	).Obj()

	mc.UID = "0b7c3a52-6f5e-4d6c-9a51-7f3c1e2d9a10"
	return mc
}

func TestNewPlan(t *testing.T) {
	type child struct {
		burst, cluster, namespace, headless string
		size                                int32
		start, end                          int
	}
	tests := []struct {
		name     string
		root     *fluxv1alpha2.MiniCluster
		hostlist string
		parents  []int // Parent of every rank, on every side
		children []child
	}{
		{
			name:     "no bursts",
			root:     v1alpha2test.MiniCluster("solo").Namespace("hpc").Size(3).Obj(),
			hostlist: "solo-[0-2]",
			parents:  []int{-1, 0, 0},
		},
		{
			name:     "reserved bursts only",
			root:     v1alpha2test.MiniCluster("r").Namespace("hpc").Size(1).MaxSize(2).Bursts(fluxv1alpha2.Burst{Name: "x", Size: 2}).Obj(),
			hostlist: "r-[0-1],x-[0-1]",
			parents:  []int{-1, 0, 0, 2},
		},
		{
			name:     "four bursts of different sizes, one reserved, maxSize above size",
			root:     fourBursts(),
			hostlist: "flux-sample-[0-2],burst-0-[0-3],burst-1-0,burst-2-[0-2],3rd-[0-1]",
			parents:  []int{-1, 0, 0, 0, 3, 3, 3, 0, 0, 8, 8, 0, 11},
			children: []child{
				{burst: "burst-0", cluster: "member-a", namespace: "hpc", headless: "burst-0", size: 4, start: 3, end: 7},
				{burst: "burst-2", cluster: "member-b", namespace: "hpc-burst", headless: "burst-2", size: 3, start: 8, end: 11},
				{burst: "3rd", cluster: "member-a", namespace: "hpc", headless: "b-3rd", size: 2, start: 11, end: 13},
			},
		},
		{
			name: "two bursts in one cluster and namespace",
			root: v1alpha2test.MiniCluster("r").Namespace("hpc").Size(1).Bursts(
				fluxv1alpha2.Burst{Name: "x", Size: 1, Cluster: "m"},
				fluxv1alpha2.Burst{Name: "y", Size: 2, Cluster: "m"},
			).Obj(),
			hostlist: "r-0,x-0,y-[0-1]",
			parents:  []int{-1, 0, 0, 2},
			children: []child{
				{burst: "x", cluster: "m", namespace: "hpc", headless: "x", size: 1, start: 1, end: 2},
				{burst: "y", cluster: "m", namespace: "hpc", headless: "y", size: 2, start: 2, end: 4},
			},
		},
		{
			name: "bursts reserving more ranks than they run, one running none",
			root: v1alpha2test.MiniCluster("r").Namespace("hpc").Size(1).Bursts(
				fluxv1alpha2.Burst{Name: "x", Size: 1, MaxSize: 3, Cluster: "m"},
				fluxv1alpha2.Burst{Name: "y", Size: 0, MaxSize: 2, Cluster: "n"},
			).Obj(),
			hostlist: "r-0,x-[0-2],y-[0-1]",
			parents:  []int{-1, 0, 1, 1, 0, 4},
			children: []child{
				{burst: "x", cluster: "m", namespace: "hpc", headless: "x", size: 1, start: 1, end: 4},
				{burst: "y", cluster: "n", namespace: "hpc", headless: "y", size: 1, start: 4, end: 6},
			},
		},
		{
			name: "a flat user topology",
			root: v1alpha2test.Edit(v1alpha2test.MiniCluster("r").Namespace("hpc").Size(2).Bursts(fluxv1alpha2.Burst{Name: "x", Size: 3, Cluster: "m"}).Obj(),
				func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Flux.Topology = "kary:0" }),

			hostlist: "r-[0-1],x-[0-2]",
			parents:  []int{-1, 0, 0, 0, 0},
			children: []child{{burst: "x", cluster: "m", namespace: "hpc", headless: "x", size: 3, start: 2, end: 5}},
		},
		{
			name: "a binomial topology that keeps the burst together",
			root: v1alpha2test.Edit(v1alpha2test.MiniCluster("r").Namespace("hpc").Size(2).Bursts(fluxv1alpha2.Burst{Name: "x", Size: 4, Cluster: "m"}).Obj(),
				func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Flux.Topology = "binomial" }),

			hostlist: "r-[0-1],x-[0-3]",
			parents:  []int{-1, 0, 0, 2, 0, 4},
			children: []child{{burst: "x", cluster: "m", namespace: "hpc", headless: "x", size: 4, start: 2, end: 6}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPlan(tt.root, testLead, testHub)
			require.NoError(t, err)
			require.Equal(t, tt.hostlist, p.GlobalHostlist)
			require.Equal(t, tt.hostlist, p.Root.Hostlist)
			require.Equal(t, testLead, p.Lead)
			var parents []int
			for r := range p.Root.Hosts {
				parents = append(parents, p.Root.Parent(r))
			}
			require.Equal(t, tt.parents, parents)

			require.Len(t, p.Children, len(tt.children))
			for i, want := range tt.children {
				c := p.Children[i]
				require.Equal(t, want.burst, c.Burst)
				require.Equal(t, want.cluster, c.Cluster)
				require.Equal(t, want.namespace, c.Namespace)
				require.Equal(t, want.burst, c.MiniCluster.Name)
				require.Equal(t, want.namespace, c.MiniCluster.Namespace)
				require.Equal(t, want.size, c.MiniCluster.Spec.Size)
				require.Equal(t, want.headless, c.MiniCluster.Spec.Network.HeadlessName)
				require.Equal(t, want.start, c.Layout.LocalStart)
				require.Equal(t, want.end, c.Layout.LocalEnd)
				require.Equal(t, tt.hostlist, c.Layout.GlobalHostlist)
				require.Equal(t, testLead.Address, c.Layout.Hosts[0])
				require.Equal(t, p.Root.Hosts[1:], c.Layout.Hosts[1:])
				for r := range parents {
					require.Equal(t, parents[r], c.Layout.Parent(r), "%s: parent of rank %d", c.Burst, r)
				}
				got, ok := p.Child(want.burst)
				require.True(t, ok)
				require.Same(t, c.MiniCluster, got.MiniCluster)
			}
			_, ok := p.Child("no-such-burst")
			require.False(t, ok)
			require.NoError(t, ValidateFederation(tt.root))
		})
	}
}

// TestResizingABurstChangesOnlyItsChildsSize checks the promise of reserved ranks: within its
// maxSize a burst's size moves the number of its child's pods and nothing else, not the root's
// hosts, not another child, not a single broker's configuration.
func TestResizingABurstChangesOnlyItsChildsSize(t *testing.T) {
	root := func(sizeX, sizeY int32) *fluxv1alpha2.MiniCluster {
		return v1alpha2test.MiniCluster("r").Namespace("hpc").Size(2).MaxSize(4).Bursts(
			fluxv1alpha2.Burst{Name: "x", Size: sizeX, MaxSize: 4, Cluster: "m"},
			fluxv1alpha2.Burst{Name: "y", Size: sizeY, MaxSize: 3, Cluster: "n"},
		).Obj()
	}
	base, err := NewPlan(root(0, 3), testLead, testHub)
	require.NoError(t, err)
	for _, sizes := range [][2]int32{{1, 3}, {4, 3}, {4, 1}, {2, 0}} {
		p, err := NewPlan(root(sizes[0], sizes[1]), testLead, testHub)
		require.NoError(t, err)
		require.Equal(t, base.Root, p.Root, "sizes %v: the root's layout", sizes)
		for i, c := range p.Children {
			b := base.Children[i]
			require.Equal(t, sizes[i], c.Size)
			require.Equal(t, b.Reserved, c.Reserved)
			require.Equal(t, b.Layout, c.Layout, "sizes %v: the layout of %s", sizes, c.Burst)
			want := b.MiniCluster.DeepCopy()
			want.Spec.Size = max(sizes[i], 1)
			require.Equal(t, want, c.MiniCluster, "sizes %v: the child %s differs in more than its size", sizes, c.Burst)
		}
	}
}

func TestChildWithSize(t *testing.T) {
	p, err := NewPlan(v1alpha2test.MiniCluster("r").Namespace("hpc").Size(1).Bursts(fluxv1alpha2.Burst{Name: "x", Size: 0, MaxSize: 3, Cluster: "m"}).Obj(), testLead, testHub)
	require.NoError(t, err)
	c := p.Children[0]
	require.Equal(t, int32(0), c.Size)
	require.Equal(t, int32(3), c.Reserved)
	require.Equal(t, int32(3), c.MiniCluster.Spec.MaxSize)
	require.Equal(t, []fluxv1alpha2.Burst{{Name: "x", Size: 3}}, c.MiniCluster.Spec.Flux.Bursting.Clusters)
	for _, size := range []int32{1, 3} {
		mc, err := c.WithSize(size)
		require.NoError(t, err)
		require.Equal(t, size, mc.Spec.Size)
		l, err := NewLayout(mc)
		require.NoError(t, err)
		require.Equal(t, c.Layout, l)
	}
	require.Equal(t, int32(1), c.MiniCluster.Spec.Size, "WithSize copies")
	for _, size := range []int32{0, 4, -1} {
		_, err := c.WithSize(size)
		require.ErrorContains(t, err, "burst x cannot run")
	}
}

// richRoot sets (nearly) every field of a root MiniCluster, to show which of them a child keeps.
func richRoot() *fluxv1alpha2.MiniCluster {
	mc := v1alpha2test.MiniCluster("lammps").Namespace("hpc").Size(2).MaxSize(4).Bursts(
		fluxv1alpha2.Burst{Name: "gpu", Size: 3, Cluster: "member-a", Namespace: "hpc-gpu", Resources: &fluxv1alpha2.BurstResources{Cores: 8, GPUs: 2}},
		fluxv1alpha2.Burst{Name: "spare", Size: 2},
	).Obj()

	mc.UID = "5f1e7c1a-0000-4000-8000-000000000001"
	mc.Labels = map[string]string{"team": "a"}
	mc.Annotations = map[string]string{"note": "root only"}
	mc.Spec.MinSize = 1
	mc.Spec.Tasks = ptr.To[int32](16)
	mc.Spec.Interactive = true
	mc.Spec.BackoffLimit = 3
	mc.Spec.DeadlineSeconds = 3600
	mc.Spec.Cleanup = true
	mc.Spec.ShareProcessNamespace = true
	mc.Spec.JobLabels = map[string]string{"queue": "hpc"}
	mc.Spec.Archive.Path = "/state/archive.tar"
	mc.Spec.Network = fluxv1alpha2.Network{HeadlessName: "brokers", DisableAffinity: true}
	mc.Spec.Logging = fluxv1alpha2.Logging{Quiet: true, Strict: true, Debug: true, Zeromq: true, Timed: true}
	mc.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu-template")}}
	mc.Spec.Pod = fluxv1alpha2.MiniClusterPod{
		Labels:             map[string]string{"pod": "label"},
		ServiceAccountName: "flux",
		NodeSelector:       map[string]string{"node": "gpu"},
		Tolerations:        []fluxv1alpha2.Toleration{{Key: "nvidia.com/gpu", Operator: fluxv1alpha2.TolerationOpExists}},
	}
	mc.Spec.Services = []fluxv1alpha2.Container{{Name: "registry", Image: "registry:2"}}
	mc.Spec.Containers = []fluxv1alpha2.Container{
		{
			Name: "lammps", Image: "ghcr.io/rse-ops/lammps-mpich:tag-latest", RunFlux: true,
			ImagePullSecret: "pull", PullAlways: true, ImagePullPolicy: fluxv1alpha2.PullAlways,
			WorkingDir: "/opt/lammps", Command: "lmp -in in.reaxc.hns", Launcher: true,
			Batch: true, BatchRaw: true, Logs: "/shared/out",
			Commands: fluxv1alpha2.Commands{
				Init: "export A=1", Pre: "echo pre", BrokerPre: "flux resource list", WorkerPre: "echo worker",
				ServicePre: "echo service", Post: "echo post", Prefix: "wrapper", Script: "#!/bin/sh\necho job",
			},
			Ports:       []int32{9000},
			Environment: map[string]string{"OMP_NUM_THREADS": "2"},
			Secrets:     map[string]fluxv1alpha2.SecretKey{"TOKEN": {Name: "tok", Key: "t"}},
			Volumes:     map[string]fluxv1alpha2.ContainerVolume{"data": {Path: "/data", ClaimName: "data"}},
			LifeCycle:   fluxv1alpha2.LifeCycle{PreStopExec: "sleep 1"},
			Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")},
				Claims: []corev1.ResourceClaim{{Name: "gpu"}},
			},
			SecurityContext: &fluxv1alpha2.ContainerSecurityContext{AddCapabilities: []string{"SYS_PTRACE"}},
			PreCommand:      "echo older pre",
		},
		{Name: "exporter", Image: "prom/node-exporter", Command: "node_exporter --web.listen-address=:9100", Ports: []int32{9100}},
	}
	mc.Spec.Flux = fluxv1alpha2.FluxSpec{
		Container:       fluxv1alpha2.FluxView{Name: "flux-view", Image: "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy", MountPath: "/opt/flux"},
		Arch:            "arm",
		SubmitCommand:   "flux mini submit",
		Wrap:            "strace,-e,network",
		ConnectTimeout:  ptr.To("10s"),
		OptionFlags:     "-ompi=openmpi@5",
		MinimalService:  true,
		DisableSocket:   true,
		NoWaitSocket:    true,
		CompleteWorkers: true,
		LogLevel:        ptr.To[int32](7),
		CurveCert:       "# not copied",
		Scheduler:       fluxv1alpha2.Scheduler{QueuePolicy: fluxv1alpha2.QueuePolicyEasy},
		MungeSecret:     "munge",
		Environment:     map[string]string{"FLUX_X": "1"},
		Bursting:        mc.Spec.Flux.Bursting,
	}
	mc.Spec.Flux.Bursting.Expose = &fluxv1alpha2.Expose{Type: fluxv1alpha2.ExposeNodePort, NodePort: 30093}
	return mc
}

func TestChildMiniCluster(t *testing.T) {
	root := richRoot()
	p, err := NewPlan(root, testLead, testHub)
	require.NoError(t, err)
	require.Len(t, p.Children, 1, "the reserved burst has no child")
	c := p.Children[0]

	want := &fluxv1alpha2.MiniCluster{
		TypeMeta: metav1.TypeMeta{APIVersion: "flux-framework.org/v1alpha2", Kind: "MiniCluster"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "gpu", Namespace: "hpc-gpu",
			Labels: map[string]string{
				fluxv1alpha2.LabelOriginHub:       testHub,
				fluxv1alpha2.LabelOriginNamespace: "hpc",
				fluxv1alpha2.LabelOriginName:      "lammps",
			},
			Annotations: map[string]string{fluxv1alpha2.AnnotationOriginUID: "5f1e7c1a-0000-4000-8000-000000000001"},
		},
		Spec: fluxv1alpha2.MiniClusterSpec{
			Size:                  3,
			BackoffLimit:          3,
			DeadlineSeconds:       3600,
			Cleanup:               true,
			ShareProcessNamespace: true,
			JobLabels:             map[string]string{"queue": "hpc"},
			Network:               fluxv1alpha2.Network{HeadlessName: "gpu", DisableAffinity: true},
			Logging:               root.Spec.Logging,
			ResourceClaims:        root.Spec.ResourceClaims,
			Pod:                   root.Spec.Pod,
			Containers: []fluxv1alpha2.Container{
				{
					Name: "lammps", Image: "ghcr.io/rse-ops/lammps-mpich:tag-latest", RunFlux: true,
					ImagePullSecret: "pull", PullAlways: true, ImagePullPolicy: fluxv1alpha2.PullAlways,
					WorkingDir: "/opt/lammps", Logs: "/shared/out",
					Commands: fluxv1alpha2.Commands{
						Init: "export A=1", Pre: "echo pre", WorkerPre: "echo worker",
						ServicePre: "echo service", Post: "echo post", Prefix: "wrapper", Script: "#!/bin/sh\necho job",
					},
					Ports:           []int32{9000},
					Environment:     map[string]string{"OMP_NUM_THREADS": "2"},
					Secrets:         map[string]fluxv1alpha2.SecretKey{"TOKEN": {Name: "tok", Key: "t"}},
					Volumes:         map[string]fluxv1alpha2.ContainerVolume{"data": {Path: "/data", ClaimName: "data"}},
					LifeCycle:       fluxv1alpha2.LifeCycle{PreStopExec: "sleep 1"},
					Resources:       root.Spec.Containers[0].Resources,
					SecurityContext: root.Spec.Containers[0].SecurityContext,
					PreCommand:      "echo older pre",
				},
				root.Spec.Containers[1],
			},
			Flux: fluxv1alpha2.FluxSpec{
				Container:       root.Spec.Flux.Container,
				Arch:            "arm",
				Wrap:            "strace,-e,network",
				ConnectTimeout:  ptr.To("10s"),
				MinimalService:  true,
				DisableSocket:   true,
				NoWaitSocket:    true,
				CompleteWorkers: true,
				LogLevel:        ptr.To[int32](7),
				Scheduler:       fluxv1alpha2.Scheduler{QueuePolicy: fluxv1alpha2.QueuePolicyEasy},
				MungeSecret:     "munge",
				Environment:     map[string]string{"FLUX_X": "1"},
				Bursting: fluxv1alpha2.Bursting{
					LeadBroker: &fluxv1alpha2.LeadBroker{Address: "127.0.2.10", Port: 30093, Name: "lammps", Size: 4},
					Clusters: []fluxv1alpha2.Burst{
						{Name: "gpu", Size: 3, Resources: &fluxv1alpha2.BurstResources{Cores: 8, GPUs: 2}},
						{Name: "spare", Size: 2},
					},
				},
			},
		},
	}
	if diff := cmp.Diff(want, c.MiniCluster); diff != "" {
		t.Errorf("child MiniCluster mismatch (-want +got):\n%s", diff)
	}

	// The child is a copy: changing it leaves the root alone, and the other way round.
	c.MiniCluster.Spec.Containers[0].Environment["X"] = "y"
	c.MiniCluster.Spec.Flux.Bursting.Clusters[0].Size = 99
	c.MiniCluster.Spec.Flux.Bursting.Clusters[0].Resources.Cores = 99
	require.Equal(t, int32(8), root.Spec.Flux.Bursting.Clusters[0].Resources.Cores)
	require.NotContains(t, root.Spec.Containers[0].Environment, "X")
	require.Equal(t, "member-a", root.Spec.Flux.Bursting.Clusters[0].Cluster)
	require.Equal(t, int32(3), root.Spec.Flux.Bursting.Clusters[0].Size)
	require.Equal(t, "lmp -in in.reaxc.hns", root.Spec.Containers[0].Command)
}

func TestChildOfASingleContainer(t *testing.T) {
	root := fourBursts()
	root.Spec.Containers = []fluxv1alpha2.Container{{Image: "rockylinux:9", Command: "hostname", Batch: true}}
	p, err := NewPlan(root, testLead, testHub)
	require.NoError(t, err)
	for _, c := range p.Children {
		require.Equal(t, []fluxv1alpha2.Container{{Image: "rockylinux:9"}}, c.MiniCluster.Spec.Containers, c.Burst)
	}
}

// TestChildKeepsTheDeprecatedVolumes: a child runs the root's containers, and a container volume
// named like an entry of the deprecated spec.volumes means that entry, on the member too.
//
//nolint:staticcheck // the deprecated fields are what this test is about
func TestChildKeepsTheDeprecatedVolumes(t *testing.T) {
	root := fourBursts()
	root.Spec.Volumes = map[string]fluxv1alpha2.MiniClusterVolume{"data": {Path: "/data"}}
	root.Spec.Oversubscribe = true
	p, err := NewPlan(root, testLead, testHub)
	require.NoError(t, err)
	for _, c := range p.Children {
		require.Equal(t, root.Spec.Volumes, c.MiniCluster.Spec.Volumes, c.Burst)
		require.True(t, c.MiniCluster.Spec.Oversubscribe, c.Burst)
	}
}

// TestChildSpecCoversEveryField fails when the API gains a field: decide whether a child copies
// it (and document the decision at NewPlan), then add it here.
func TestChildSpecCoversEveryField(t *testing.T) {
	known := map[reflect.Type][]string{
		reflect.TypeFor[fluxv1alpha2.MiniClusterSpec](): {
			"Containers", "Services", "ResourceClaims", "Network", "JobLabels", "Interactive", "Flux", "Logging",
			"Archive", "ShareProcessNamespace", "Cleanup", "Size", "MaxSize", "MinSize", "BackoffLimit", "Tasks",
			"DeadlineSeconds", "Pod", "Volumes", "Oversubscribe",
		},
		reflect.TypeFor[fluxv1alpha2.FluxSpec](): {
			"Container", "Arch", "SubmitCommand", "Wrap", "ConnectTimeout", "OptionFlags", "MinimalService",
			"DisableSocket", "Topology", "NoWaitSocket", "CompleteWorkers", "LogLevel", "CurveCert", "Scheduler",
			"MungeSecret", "Bursting", "BrokerConfig", "Environment",
		},
		reflect.TypeFor[fluxv1alpha2.Container](): {
			"Name", "Image", "ImagePullSecret", "PullAlways", "ImagePullPolicy", "WorkingDir", "Command", "Commands",
			"Launcher", "Batch", "BatchRaw", "Logs", "RunFlux", "NoWrapEntrypoint", "Ports", "Environment", "Secrets",
			"Volumes", "ExistingVolumes", "LifeCycle", "Resources", "SecurityContext", "Cores", "FluxUser",
			"PreCommand", "Diagnostics",
		},
		reflect.TypeFor[fluxv1alpha2.Commands](): {
			"Init", "Pre", "BrokerPre", "WorkerPre", "ServicePre", "Post", "Prefix", "Script", "RunFluxAsRoot",
		},
		reflect.TypeFor[fluxv1alpha2.Bursting](): {"LeadBroker", "Hostlist", "Clusters", "Expose", "Scaling"},
		reflect.TypeFor[fluxv1alpha2.Burst]():    {"Name", "Size", "MaxSize", "Cluster", "Namespace", "Resources"},
		reflect.TypeFor[fluxv1alpha2.Network]():  {"HeadlessName", "DisableAffinity"},
	}
	for typ, fields := range known {
		var got []string
		for f := range typ.Fields() {
			got = append(got, f.Name)
		}
		slices.Sort(got)
		slices.Sort(fields)
		require.Equal(t, fields, got, "fields of %s: decide what a burst child does with the new ones", typ.Name())
	}
}

func TestNewPlanErrors(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	pushed := func(edit func(*fluxv1alpha2.MiniCluster)) *fluxv1alpha2.MiniCluster {
		return v1alpha2test.Edit(v1alpha2test.MiniCluster("r").Namespace("hpc").Size(2).Bursts(fluxv1alpha2.Burst{Name: "x", Size: 2, Cluster: "m"}, fluxv1alpha2.Burst{Name: "y", Size: 1}).Obj(), edit)
	}
	none := func(*fluxv1alpha2.MiniCluster) {}
	tests := []struct {
		name    string
		root    *fluxv1alpha2.MiniCluster
		lead    *Endpoint // nil: testLead
		want    string
		errType any // nil: valid
	}{
		{name: "no MiniCluster", root: nil, want: "metadata: no MiniCluster given", errType: &SpecError{}},
		{name: "a burst child as root", root: v1alpha2test.Child(threeBursts(), "burst-0", "127.0.2.1", 30000),
			want: "spec.flux.bursting.leadBroker: is set: a burst child joins another MiniCluster's instance", errType: &SpecError{}},
		{name: "root without a namespace", root: pushed(func(mc *fluxv1alpha2.MiniCluster) { mc.Namespace = "" }),
			want: "metadata.namespace: is empty", errType: &SpecError{}},
		{name: "root without a namespace and only reserved bursts",
			root: v1alpha2test.Edit(v1alpha2test.MiniCluster("r").Namespace("hpc").Size(1).Bursts(fluxv1alpha2.Burst{Name: "y", Size: 1}).Obj(), func(mc *fluxv1alpha2.MiniCluster) { mc.Namespace = "" })},
		{name: "brokerConfig with bursts to push", root: pushed(func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Flux.BrokerConfig = "[bootstrap]\n" }),
			want: "spec.flux.brokerConfig: cannot be combined with bursts that name a cluster", errType: &SpecError{}},
		{name: "brokerConfig with reserved bursts only",
			root: v1alpha2test.Edit(v1alpha2test.MiniCluster("r").Namespace("hpc").Size(1).Bursts(fluxv1alpha2.Burst{Name: "y", Size: 1}).Obj(), func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Flux.BrokerConfig = "[bootstrap]\n" })},
		{name: "hostlist and clusters", root: pushed(func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Flux.Bursting.Hostlist = "r-[0-1],x-[0-1],y-0" }),
			want: "spec.flux.bursting.hostlist: cannot be combined with spec.flux.bursting.clusters", errType: &SpecError{}},

		{name: "root name too long for maxSize", root: v1alpha2test.Edit(v1alpha2test.MiniCluster(long(61)).Namespace("hpc").Size(2).MaxSize(11).Bursts(fluxv1alpha2.Burst{Name: "x", Size: 1, Cluster: "m"}).Obj(), none),
			want: `metadata.name: host "` + long(61) + `-10" has a label longer than 63 characters`, errType: &HostError{}},
		{name: "longest root name for maxSize", root: v1alpha2test.Edit(v1alpha2test.MiniCluster(long(61)).Namespace("hpc").Size(2).MaxSize(10).Bursts(fluxv1alpha2.Burst{Name: "x", Size: 1, Cluster: "m"}).Obj(), none)},
		{name: "burst name too long for its size", root: v1alpha2test.MiniCluster("r").Namespace("hpc").Size(1).Bursts(fluxv1alpha2.Burst{Name: long(60), Size: 101, Cluster: "m"}).Obj(),
			want: `spec.flux.bursting.clusters[0].name: host "` + long(60) + `-100" has a label longer than 63 characters`, errType: &HostError{}},
		{name: "longest burst name for its size", root: v1alpha2test.MiniCluster("r").Namespace("hpc").Size(1).Bursts(fluxv1alpha2.Burst{Name: long(60), Size: 100, Cluster: "m"}).Obj()},
		{name: "a topology that crosses clusters", root: pushed(func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Flux.Topology = "kary:1" }),
			want: `spec.flux.topology "kary:1": rank 2 (x-0) would have parent rank 1 (r-1)`, errType: &TopologyError{}},
		{name: "minimalService with a topology that nests a burst under its second broker",
			root: v1alpha2test.Edit(v1alpha2test.MiniCluster("r").Namespace("hpc").Size(2).Bursts(fluxv1alpha2.Burst{Name: "x", Size: 6, Cluster: "m"}).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
				mc.Spec.Flux.Topology = "binomial"
				mc.Spec.Flux.MinimalService = true
			}),

			want: `the child MiniCluster of burst x: spec.flux.topology "binomial": rank 5 (x-3) would have parent rank 4 (x-2), which has no DNS name`, errType: &TopologyError{}},

		{name: "port 0", root: pushed(none), lead: &Endpoint{Address: "127.0.2.10"},
			want: "lead broker endpoint 127.0.2.10:0: the port must be 1-65535", errType: &EndpointError{}},
		{name: "port too large", root: pushed(none), lead: &Endpoint{Address: "127.0.2.10", Port: 70000},
			want: "the port must be 1-65535", errType: &EndpointError{}},
		{name: "IPv6 address", root: pushed(none), lead: &Endpoint{Address: "fd00::1", Port: 30000},
			want: `lead broker endpoint fd00::1:30000: the address contains ':'`, errType: &EndpointError{}},
		{name: "empty address", root: pushed(none), lead: &Endpoint{Port: 30000},
			want: "the address is empty", errType: &EndpointError{}},
		{name: "address with an underscore", root: pushed(none), lead: &Endpoint{Address: "lead_broker.example", Port: 30000},
			want: "the address contains '_'", errType: &EndpointError{}},
		{name: "address too long", root: pushed(none), lead: &Endpoint{Address: strings.Repeat("abcdefgh.", 29) + "x", Port: 30000},
			want: "the address is longer than 253 characters", errType: &EndpointError{}},
		{name: "IPv4 address out of range", root: pushed(none), lead: &Endpoint{Address: "127.0.2.300", Port: 30000},
			want: "the address is not a valid IPv4 address", errType: &EndpointError{}},
		{name: "IPv4 address too short", root: pushed(none), lead: &Endpoint{Address: "10.1.2", Port: 30000},
			want: "the address is not a valid IPv4 address", errType: &EndpointError{}},
		{name: "address that is a burst host", root: pushed(none), lead: &Endpoint{Address: "y-0", Port: 30000},
			want: "the address is also the hostname of rank 4", errType: &EndpointError{}},
		{name: "address that is a root host", root: pushed(none), lead: &Endpoint{Address: "r-1", Port: 30000},
			want: "the address is also the hostname of rank 1", errType: &EndpointError{}},
		{name: "DNS address", root: pushed(none), lead: &Endpoint{Address: "lead.hub.example.org", Port: 8050}},
		{name: "single-label DNS address", root: pushed(none), lead: &Endpoint{Address: "lead", Port: 1}},
		{name: "bad endpoint without bursts to push", root: v1alpha2test.MiniCluster("r").Namespace("hpc").Size(1).Bursts(fluxv1alpha2.Burst{Name: "y", Size: 1}).Obj(), lead: &Endpoint{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lead := testLead
			if tt.lead != nil {
				lead = *tt.lead
			}
			p, err := NewPlan(tt.root, lead, testHub)
			if tt.errType == nil {
				require.NoError(t, err)
				require.NotNil(t, p)
				return
			}
			require.ErrorContains(t, err, tt.want)
			require.True(t, IsInvalid(err), "IsInvalid(%v)", err)
			require.True(t, IsInvalid(fmt.Errorf("wrapped: %w", err)))
			require.IsType(t, tt.errType, unwrapAll(err))
			if _, isEndpoint := tt.errType.(*EndpointError); !isEndpoint {
				require.Equal(t, err.Error(), ValidateFederation(tt.root).Error(), "ValidateFederation finds what NewPlan finds in the spec")
			}
		})
	}
}

// unwrapAll returns the innermost error of a chain of single wraps.
func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}

func TestNewPlanHubIdentity(t *testing.T) {
	for _, hub := range []string{"", "no spaces", strings.Repeat("h", 64), "-dash"} {
		_, err := NewPlan(fourBursts(), testLead, hub)
		require.ErrorContains(t, err, "cannot be the value of label fluxfed.io/origin-hub", "hub %q", hub)
		require.False(t, IsInvalid(err), "a bad hub identity is not the root's fault")
	}
	for _, hub := range []string{"h", "hub.example_1", strings.Repeat("h", 63)} {
		_, err := NewPlan(fourBursts(), testLead, hub)
		require.NoError(t, err, "hub %q", hub)
	}
}

func TestChildHeadlessName(t *testing.T) {
	for burst, want := range map[string]string{"burst-0": "burst-0", "a": "a", "0": "b-0", "9lives": "b-9lives"} {
		require.Equal(t, want, ChildHeadlessName(burst))
	}
}

func TestFederationErrorText(t *testing.T) {
	err := error(&FederationError{Burst: "x", Reason: "rank 3 differs"})
	require.Equal(t, "burst x: rank 3 differs", err.Error())
	require.True(t, IsInvalid(err))
}

// TestAgree feeds agree layouts that disagree with the root, which NewPlan cannot produce.
func TestAgree(t *testing.T) {
	root := fourBursts()
	rootLayout, err := NewLayout(root)
	require.NoError(t, err)
	g := rootLayout.Groups[1]
	childLayout := func(edit func(*fluxv1alpha2.MiniCluster)) *Layout {
		mc := v1alpha2test.Child(root, g.Name, testLead.Address, testLead.Port)
		edit(mc)
		l, err := NewLayout(mc)
		require.NoError(t, err)
		return l
	}
	tests := []struct {
		name  string
		child *Layout
		want  string
	}{
		{name: "agrees", child: childLayout(func(*fluxv1alpha2.MiniCluster) {})},
		{name: "another lead size", child: childLayout(func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Flux.Bursting.LeadBroker.Size = 2 }),
			want: "the child lists 12 hosts, the root 13"},
		{name: "another port", child: childLayout(func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Flux.Bursting.LeadBroker.Port = 1 }),
			want: "the child reaches rank 0 at 127.0.2.10:1"},
		{name: "another order", child: childLayout(func(mc *fluxv1alpha2.MiniCluster) {
			b := mc.Spec.Flux.Bursting.Clusters
			b[2], b[3] = b[3], b[2]
		}), want: "the child's hostlist"},
		{name: "another topology", child: childLayout(func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Flux.Topology = "kary:0" }),
			want: `the child's topology "kary:0" differs from the root's ""`},
		{name: "another burst", child: func() *Layout {
			mc := v1alpha2test.Child(root, "burst-2", testLead.Address, testLead.Port)
			l, err := NewLayout(mc)
			require.NoError(t, err)
			return l
		}(), want: "the child's pods hold ranks 8-10, the burst's hosts are ranks 3-6 on the root"},
		{name: "other parents", child: func() *Layout {
			l := childLayout(func(*fluxv1alpha2.MiniCluster) {})
			l.Parents = map[int]int{5: 4}
			return l
		}(), want: "rank 4 (burst-0-1) has parent 0 on the child, 3 on the root"},
		{name: "another burst's hardware", child: childLayout(func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Bursting.Clusters[2].Resources = &fluxv1alpha2.BurstResources{Cores: 4, GPUs: 1}
		}), want: "the child describes ranks 8-10 as burst-2 with 4 cores and 1 GPUs per node, the root as burst-2 with 0 cores and 0 GPUs"},
		{name: "other containers' cores", child: childLayout(func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Containers = []fluxv1alpha2.Container{{Image: "rockylinux:9", Cores: 2}}
		}), want: "the child describes ranks 0-2 as flux-sample with 2 cores"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want == "", agree(rootLayout, tt.child, g, testLead) == "")
			require.Contains(t, agree(rootLayout, tt.child, g, testLead), tt.want)
		})
	}
}

// FuzzNewPlan plans arbitrary roots of up to three bursts: NewPlan must not panic, every error
// about the root or the endpoint must be typed, and every plan must have one child per burst
// with a cluster, each agreeing with the root.
func FuzzNewPlan(f *testing.F) {
	f.Add("r", int32(2), int32(3), "x", int32(2), "m", "y", int32(1), "", "", "127.0.2.10", int32(30000), "")
	f.Add("flux-sample", int32(1), int32(0), "0b", int32(4), "m", "y", int32(3), "m", "kary:0", "lead.example", int32(8050), "ns")
	f.Add("r", int32(4), int32(0), "x", int32(3), "m", "x", int32(3), "n", "binomial", "fd00::1", int32(0), "")
	f.Fuzz(func(t *testing.T, name string, size, maxSize int32, b1 string, s1 int32, c1, b2 string, s2 int32, c2, topo, address string, port int32, ns string) {
		root := v1alpha2test.MiniCluster(name).Namespace("hpc").Size(size%50).MaxSize(maxSize%50).Bursts(
			fluxv1alpha2.Burst{Name: b1, Size: s1 % 50, Cluster: c1, Namespace: ns},
			fluxv1alpha2.Burst{Name: b2, Size: s2 % 50, Cluster: c2},
			fluxv1alpha2.Burst{Name: "reserved", Size: 1},
		).Obj()

		root.Spec.Flux.Topology = topo
		p, err := NewPlan(root, Endpoint{Address: address, Port: port}, testHub)
		if err != nil {
			if !IsInvalid(err) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		var want []string
		for _, g := range p.Root.Groups[1:] {
			if g.Cluster != "" {
				want = append(want, g.Name)
			}
		}
		var got []string
		for _, c := range p.Children {
			got = append(got, c.Burst)
			g, _ := p.Root.GroupOf(c.Layout.LocalStart)
			if reason := agree(p.Root, c.Layout, g, p.Lead); reason != "" {
				t.Fatalf("child %s: %s", c.Burst, reason)
			}
			if c.MiniCluster.Spec.Flux.CurveCert != "" || c.MiniCluster.Spec.Flux.Bursting.Clusters[0].Cluster != "" {
				t.Fatalf("child %s carries what it must not", c.Burst)
			}
		}
		if !slices.Equal(want, got) {
			t.Fatalf("children %v, want %v", got, want)
		}
	})
}

func TestChildNamespace(t *testing.T) {
	root := &fluxv1alpha2.MiniCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "research"}}
	tests := []struct {
		burst fluxv1alpha2.Burst
		want  string
	}{
		{fluxv1alpha2.Burst{Name: "a"}, "research"},
		{fluxv1alpha2.Burst{Name: "b", Namespace: "burst-ns"}, "burst-ns"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, ChildNamespace(root, tt.burst), tt.burst.Name)
	}
}
