package v1alpha2test

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// Builder builds a MiniCluster for a test: MiniCluster("lammps").Size(2).MaxSize(4).Obj().
// Only what a test sets differs from a one-container MiniCluster of size 1 in namespace
// "default"; schema defaults are left to the API server (or to the test).
type Builder struct{ mc fluxv1alpha2.MiniCluster }

// MiniCluster starts a MiniCluster named name: namespace "default", size 1, one container
// (rockylinux:9 running hostname).
func MiniCluster(name string) *Builder {
	return &Builder{mc: fluxv1alpha2.MiniCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: fluxv1alpha2.GroupVersion.String(), Kind: "MiniCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: fluxv1alpha2.MiniClusterSpec{
			Size:       1,
			Containers: []fluxv1alpha2.Container{{Image: "rockylinux:9", Command: "hostname"}},
		},
	}}
}

// Namespace sets metadata.namespace.
func (b *Builder) Namespace(ns string) *Builder { b.mc.Namespace = ns; return b }

// UID sets metadata.uid, for pure tests that need an identity.
func (b *Builder) UID(uid types.UID) *Builder { b.mc.UID = uid; return b }

// Size sets spec.size.
func (b *Builder) Size(n int32) *Builder { b.mc.Spec.Size = n; return b }

// MaxSize sets spec.maxSize.
func (b *Builder) MaxSize(n int32) *Builder { b.mc.Spec.MaxSize = n; return b }

// MinSize sets spec.minSize.
func (b *Builder) MinSize(n int32) *Builder { b.mc.Spec.MinSize = n; return b }

// Command sets the command of the Flux container.
func (b *Builder) Command(command string) *Builder {
	b.mc.Spec.Containers[0].Command = command
	return b
}

// Image sets the image of the Flux container.
func (b *Builder) Image(image string) *Builder { b.mc.Spec.Containers[0].Image = image; return b }

// HeadlessName sets spec.network.headlessName.
func (b *Builder) HeadlessName(name string) *Builder { b.mc.Spec.Network.HeadlessName = name; return b }

// Interactive sets spec.interactive.
func (b *Builder) Interactive() *Builder { b.mc.Spec.Interactive = true; return b }

// Burst adds a burst of size brokers that the hub pushes to member cluster (reserved when
// cluster is empty).
func (b *Builder) Burst(name string, size int32, cluster string) *Builder {
	return b.Bursts(fluxv1alpha2.Burst{Name: name, Size: size, Cluster: cluster})
}

// Bursts adds bursts as given.
func (b *Builder) Bursts(bursts ...fluxv1alpha2.Burst) *Builder {
	b.mc.Spec.Flux.Bursting.Clusters = append(b.mc.Spec.Flux.Bursting.Clusters, bursts...)
	return b
}

// Expose advertises the lead broker at address (spec.flux.bursting.expose.address).
func (b *Builder) Expose(address string) *Builder {
	if b.mc.Spec.Flux.Bursting.Expose == nil {
		b.mc.Spec.Flux.Bursting.Expose = &fluxv1alpha2.Expose{}
	}
	b.mc.Spec.Flux.Bursting.Expose.Address = address
	return b
}

// Labels adds metadata.labels.
func (b *Builder) Labels(labels map[string]string) *Builder {
	if b.mc.Labels == nil {
		b.mc.Labels = map[string]string{}
	}
	for k, v := range labels {
		b.mc.Labels[k] = v
	}
	return b
}

// Spec changes anything else of the spec.
func (b *Builder) Spec(change func(*fluxv1alpha2.MiniClusterSpec)) *Builder {
	change(&b.mc.Spec)
	return b
}

// Obj returns the MiniCluster built so far; the builder can go on from there.
func (b *Builder) Obj() *fluxv1alpha2.MiniCluster { return b.mc.DeepCopy() }

// Edit applies change to mc and returns mc: a fixture built elsewhere (Child, a case), changed
// for one test.
func Edit(mc *fluxv1alpha2.MiniCluster, change func(*fluxv1alpha2.MiniCluster)) *fluxv1alpha2.MiniCluster {
	change(mc)
	return mc
}
