package v1alpha2

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Bursting lets a Flux instance span more than one MiniCluster.
//
// On the root MiniCluster (no leadBroker) it lists the bursts whose hosts the instance reserves,
// after its own maxSize brokers: every burst entry adds '<name>-0' .. '<name>-<maxSize-1>' (or
// up to size-1 without maxSize) to the hostlist, in order. A burst entry with a cluster is created by the fluxfed hub on that member
// cluster; one without a cluster is only reserved, for someone else to bring up, as in the Flux
// Operator. Instead of clusters, hostlist gives the whole hostlist verbatim.
//
// On a burst child, leadBroker points at the root's rank 0 and clusters repeats the root's list,
// so that both sides compute the same ranks.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.hostlist) && size(self.hostlist) > 0 && has(self.clusters) && size(self.clusters) > 0)",message="spec.flux.bursting: set either hostlist or clusters, not both"
// +kubebuilder:validation:XValidation:rule="!has(self.leadBroker) || !has(self.clusters) || self.clusters.all(c, !has(c.cluster))",message="spec.flux.bursting.clusters[].cluster must not be set together with spec.flux.bursting.leadBroker: a burst child does not burst further",fieldPath=".clusters"
type Bursting struct {
	// leadBroker makes this MiniCluster a burst child: its brokers join the Flux instance whose
	// rank 0 is reachable at this address instead of starting their own. Leave it unset on the
	// root MiniCluster; the fluxfed hub sets it on the children it creates.
	// +optional
	LeadBroker *LeadBroker `json:"leadBroker,omitempty"`

	// hostlist replaces the generated hostlist of the instance with this RFC 29 hostlist, for
	// bursting to hosts whose names do not follow the '<name>-<index>' pattern, for example
	// "flux-sample-[0-3],compute-a-[001-003]". It cannot be combined with clusters.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	Hostlist string `json:"hostlist,omitempty"`

	// clusters are the bursts, in rank order. Their names must be unique.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Clusters []Burst `json:"clusters,omitempty"`

	// expose says how the fluxfed hub makes the root's lead broker reachable from the member
	// clusters of its bursts. Only used on a root with bursts that name a cluster; when unset,
	// a NodePort Service is used.
	// +optional
	Expose *Expose `json:"expose,omitempty"`

	// scaling says who decides how many brokers each burst runs. Unset (or mode Manual): each
	// burst runs its size. With mode OnDemand, the fluxfed hub runs between size and maxSize
	// brokers per burst, as the root's Flux instance needs them (docs/bursting.md).
	// +optional
	Scaling *Scaling `json:"scaling,omitempty"`
}

// Scaling is how the hub sizes a root's bursts.
type Scaling struct {
	// mode is Manual (each burst runs its size) or OnDemand (the hub grows a burst up to its
	// maxSize while jobs wait that the instance cannot run, and shrinks it back to its size once
	// its ranks idled for scaleDownAfter, draining them in Flux first).
	// +optional
	// +kubebuilder:default=Manual
	Mode ScalingMode `json:"mode,omitempty"`

	// scaleDownAfter is how long a rank above a burst's size must run no job before it is
	// drained and removed, for example "5m" (the default).
	// +optional
	ScaleDownAfter *metav1.Duration `json:"scaleDownAfter,omitempty"`
}

// ScalingMode says who sizes the bursts.
//
// +kubebuilder:validation:Enum=Manual;OnDemand
type ScalingMode string

const (
	// ScalingManual runs each burst at its size.
	ScalingManual ScalingMode = "Manual"
	// ScalingOnDemand lets the hub size the bursts from the root's Flux queue.
	ScalingOnDemand ScalingMode = "OnDemand"
)

// DefaultScaleDownAfter is spec.flux.bursting.scaling.scaleDownAfter when unset.
const DefaultScaleDownAfter = 5 * time.Minute

// OnDemand reports whether the hub sizes the bursts, and after how long idle ranks go.
func (b *Bursting) OnDemand() (bool, time.Duration) {
	if b.Scaling == nil || b.Scaling.Mode != ScalingOnDemand {
		return false, 0
	}
	if b.Scaling.ScaleDownAfter != nil && b.Scaling.ScaleDownAfter.Duration > 0 {
		return true, b.Scaling.ScaleDownAfter.Duration
	}
	return true, DefaultScaleDownAfter
}

// Burst is one group of brokers that joins the instance from outside the MiniCluster.
//
// maxSize (or size, without it) is how many ranks the instance reserves for the burst: it is
// part of the hostlist of every side and fixed when the root is created. size is how many of
// them run now, and may change at any time within maxSize: that resizes only the burst's child,
// and no broker anywhere restarts. With size 0 the ranks are reserved and nothing runs.
//
// +kubebuilder:validation:XValidation:rule="size(self.name) + 1 + size(string((has(self.maxSize) ? self.maxSize : self.size) - 1)) <= 63",message="name is too long for maxSize: every burst hostname '<name>-<index>' must fit in 63 characters",fieldPath=".name"
// +kubebuilder:validation:XValidation:rule="!has(self.maxSize) || self.size <= self.maxSize",message="size must not exceed maxSize, the ranks reserved for the burst",fieldPath=".size"
// +kubebuilder:validation:XValidation:rule="has(self.maxSize) || self.size >= 1",message="size 0 reserves no rank: set maxSize to reserve ranks for a burst that runs no broker yet",fieldPath=".size"
type Burst struct {
	// name of the burst. Its brokers are named '<name>-0' .. '<name>-<maxSize-1>', which is
	// also the name of the child MiniCluster the hub creates. It must be a DNS label, unique in
	// the list and different from the root MiniCluster's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// size is the number of brokers of the burst that run now, from 0 to maxSize. It may be
	// changed while the instance runs: the hub resizes the burst's child and nothing else.
	// +required
	// +kubebuilder:validation:Minimum=0
	Size int32 `json:"size"`

	// maxSize is the number of ranks the instance reserves for the burst, at least size. Unset
	// means size. Like the root's own maxSize it is fixed when the root is created, because a
	// running broker never learns a new hostlist.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxSize int32 `json:"maxSize,omitempty"`

	// cluster is the name of the member cluster, as registered with the fluxfed hub, on which
	// the hub creates this burst as a child MiniCluster. When unset the hosts are only reserved
	// in the hostlist and the hub does not create anything.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Cluster string `json:"cluster,omitempty"`

	// namespace on the member cluster for the child MiniCluster. Defaults to the root
	// MiniCluster's namespace.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`

	// resources is the hardware of each node of this burst as Flux describes it: how many
	// cores and GPUs every broker of the burst offers to jobs. When unset, the burst's nodes
	// are described like the root's own, from the container that runs Flux (see
	// docs/bursting.md, "Each burst's hardware"). It does not change what the burst's pods
	// request from Kubernetes, which are the root's containers' resources. Whenever the
	// hardware of every group of ranks is known, each node of the burst also gets a Flux
	// property named like the burst, so that 'flux run --requires=<name>' pins work to it.
	// +optional
	Resources *BurstResources `json:"resources,omitempty"`
}

// BurstResources is the hardware Flux is told each node of a burst has. The cores are numbered
// from 0 (cores 0 .. cores-1) and so are the GPUs.
type BurstResources struct {
	// cores is the number of cores of each node of the burst, at least 1. Flux drains a node
	// that has fewer cores than this (it counts physical cores, not hyperthreads).
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	Cores int32 `json:"cores"`

	// gpus is the number of GPUs of each node of the burst; unset or 0 means none.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1024
	GPUs int32 `json:"gpus,omitempty"`
}

// Reserved returns the number of ranks the instance reserves for the burst: maxSize, or size
// when maxSize is unset (or smaller, which the schema refuses).
func (b Burst) Reserved() int32 {
	return max(b.MaxSize, b.Size)
}

// LeadBroker locates the rank 0 broker of the instance a burst child joins.
//
// +kubebuilder:validation:XValidation:rule="size(self.name) + 1 + size(string(self.size - 1)) <= 63",message="spec.flux.bursting.leadBroker.name is too long for its size: every hostname '<name>-<index>' must fit in 63 characters",fieldPath=".name"
type LeadBroker struct {
	// address at which the lead broker is reachable from this cluster: an IPv4 address or a
	// DNS name, for example a node address of the root's cluster. Flux does not accept IPv6
	// addresses or '_' in host names.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?$`
	Address string `json:"address"`

	// name of the root MiniCluster, from which the root's hostnames are formed.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// size is the number of hosts the root reserves for itself: its maxSize (or size).
	// +required
	// +kubebuilder:validation:Minimum=1
	Size int32 `json:"size"`

	// port on which the lead broker is reachable at address, for example a NodePort.
	// +optional
	// +kubebuilder:default=8050
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
}

// Expose says how the hub publishes the root's lead broker to its bursts.
type Expose struct {
	// type of the Service that exposes the lead broker.
	// +optional
	// +kubebuilder:default=NodePort
	Type ExposeType `json:"type,omitempty"`

	// nodePort fixes the node port of the Service instead of letting Kubernetes pick one. It
	// must lie in the cluster's node port range (30000-32767 unless the API server is
	// configured otherwise).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	NodePort int32 `json:"nodePort,omitempty"`

	// address is advertised to the bursts as the lead broker's address instead of the one the
	// hub discovers (a node address, or the load balancer's ingress). Use it when the members
	// reach the root through NAT, a proxy or a DNS name. An IPv4 address or a DNS name; Flux
	// does not accept IPv6 addresses.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?$`
	Address string `json:"address,omitempty"`
}

// ExposeType is the kind of Service that exposes the lead broker to the member clusters.
//
// +kubebuilder:validation:Enum=NodePort;LoadBalancer
type ExposeType string

const (
	// ExposeNodePort publishes the lead broker on a port of every node of the root's cluster.
	ExposeNodePort ExposeType = "NodePort"
	// ExposeLoadBalancer publishes the lead broker through a cloud load balancer.
	ExposeLoadBalancer ExposeType = "LoadBalancer"
)
