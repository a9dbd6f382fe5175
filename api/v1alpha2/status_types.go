package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MiniClusterStatus is the observed state of a MiniCluster, computed by fluxfed.
type MiniClusterStatus struct {
	// observedGeneration is the metadata.generation of the spec that the MiniCluster's own
	// objects and this status were last computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions describe the MiniCluster's state: Ready, Complete and Failed for the local
	// pods, and on a root with bursts Bursting, BurstsReady and LeadBrokerReachable.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// size is the number of broker pods currently requested, for the scale subresource.
	// +optional
	Size int32 `json:"size,omitempty"`

	// selector is the label selector of the MiniCluster's pods, in string form, for the scale
	// subresource.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Selector string `json:"selector,omitempty"`

	// maximumSize is the number of brokers the Flux instance was created with room for: the
	// largest size the MiniCluster can be scaled to.
	// +optional
	MaximumSize int32 `json:"maximumSize,omitempty"`

	// ready is the number of broker pods that are running and ready.
	// +optional
	Ready int32 `json:"ready,omitempty"`

	// jobid is kept for compatibility with the Flux Operator, which reserved it for a Flux job
	// ID. fluxfed does not set it.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Jobid string `json:"jobid,omitempty"`

	// leadBroker is where the bursts reach the lead broker, once the hub has exposed it.
	// +optional
	LeadBroker *LeadBrokerStatus `json:"leadBroker,omitempty"`

	// hostlist is the instance's global hostlist in rank order, as given to every broker of
	// the root and of its bursts, for example "flux-sample-[0-1],burst-0-[0-3]".
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	Hostlist string `json:"hostlist,omitempty"`

	// phase says in one word where the MiniCluster's own brokers are, from its conditions Ready,
	// Complete and Failed: Pending, Running, Complete or Failed (see MiniClusterPhase); it is
	// what the PHASE column shows. Its bursts are in burstSummary and bursts.
	// +optional
	Phase MiniClusterPhase `json:"phase,omitempty"`

	// burstSummary counts the bursts that name a member cluster and run brokers there (size
	// above 0), as "<ready>/<bursts>", for example "1/2"; bursts at size 0, whose ranks are
	// reserved and run nowhere, are counted apart: "1/2 (+1 reserved)", or "0/0 (+2 reserved)"
	// when none runs. It is what the BURSTS column shows.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	BurstSummary string `json:"burstSummary,omitempty"`

	// bursts report the state of each burst that names a member cluster.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Bursts []BurstStatus `json:"bursts,omitempty"`

	// flux is the Flux instance as its rank 0 sees it, on a root with bursts: the fluxfed hub
	// asks it by running flux commands in the lead broker's container.
	// +optional
	Flux *FluxStatus `json:"flux,omitempty"`

	// pushed is the hub's index of what it created, or is about to create, on members for
	// this root: each entry is written before the object's first create (then without a uid),
	// so that the hub, restarted at any moment, knows where to look. It is not a proof of
	// ownership: the hub changes or deletes an object only when the object carries a proof
	// that the hub made (annotation fluxfed.io/proof); an entry that names anything else is
	// ignored and dropped.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	Pushed []PushedObject `json:"pushed,omitempty"`
}

// PushedObject is an object the hub created, or is about to create, on a member cluster for
// a root.
type PushedObject struct {
	// cluster is the MemberCluster the object is on.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster"`

	// kind is MiniCluster (a child) or Secret (the child's CURVE Secret).
	// +required
	// +kubebuilder:validation:Enum=MiniCluster;Secret
	Kind string `json:"kind"`

	// namespace of the object on the member.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`

	// name of the object.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// uid the member's API server gave the object; empty until the hub has seen it created.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid,omitempty"`
}

// LeadBrokerStatus is the endpoint at which the bursts reach the root's lead broker.
type LeadBrokerStatus struct {
	// address advertised to the bursts: an IPv4 address or a DNS name.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Address string `json:"address,omitempty"`

	// port advertised to the bursts.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// endpoint is address and port as one "<address>:<port>", as `kubectl get -o wide` shows it.
	// +optional
	// +kubebuilder:validation:MaxLength=260
	Endpoint string `json:"endpoint,omitempty"`
}

// FluxStatus is what a root's Flux instance says of itself.
type FluxStatus struct {
	// state is the broker state of rank 0: quorum while it waits for its own first brokers,
	// run once it works.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	State string `json:"state,omitempty"`

	// size is the number of ranks of the instance, the bursts' reserved ranks included.
	// +optional
	Size int32 `json:"size,omitempty"`

	// online is the number of ranks whose broker has joined.
	// +optional
	Online int32 `json:"online,omitempty"`

	// pendingJobs is the number of jobs that wait for resources.
	// +optional
	PendingJobs int32 `json:"pendingJobs,omitempty"`

	// pendingNodes is the largest number of nodes one of the waiting jobs asked for.
	// +optional
	PendingNodes int32 `json:"pendingNodes,omitempty"`

	// message says why the instance could not be asked, when it could not; its other fields
	// are then those last seen.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message,omitempty"`
}

// BurstStatus is the observed state of one burst on its member cluster.
type BurstStatus struct {
	// name of the burst, as in spec.flux.bursting.clusters.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// cluster is the member cluster the burst was created on.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster,omitempty"`

	// namespace of the child MiniCluster on the member cluster.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// size is the number of the burst's brokers that should run now.
	// +optional
	Size int32 `json:"size,omitempty"`

	// maxSize is the number of ranks the instance reserves for the burst.
	// +optional
	MaxSize int32 `json:"maxSize,omitempty"`

	// phase summarises the burst's state.
	// +optional
	Phase BurstPhase `json:"phase,omitempty"`

	// ready is the number of the burst's broker pods that are running and ready.
	// +optional
	Ready int32 `json:"ready,omitempty"`

	// online, draining and drained count the burst's ranks as the root's Flux instance sees
	// them: joined, drained while jobs still run there, and drained with none running.
	// +optional
	Online int32 `json:"online,omitempty"`
	// +optional
	Draining int32 `json:"draining,omitempty"`
	// +optional
	Drained int32 `json:"drained,omitempty"`

	// message explains the phase, for example why the member cannot be reached.
	// +optional
	// +kubebuilder:validation:MaxLength=32768
	Message string `json:"message,omitempty"`
}

// MiniClusterPhase says in one word where a MiniCluster's own brokers are. The member
// reconciler computes it from the conditions it sets, the first that applies winning.
//
// +kubebuilder:validation:Enum=Pending;Running;Complete;Failed
type MiniClusterPhase string

const (
	// MiniClusterFailed means Failed is True: the MiniCluster cannot make progress without a
	// change (its Job failed, or an object could not be applied); the condition says why.
	MiniClusterFailed MiniClusterPhase = "Failed"
	// MiniClusterComplete means Complete is True: the lead broker's work is done.
	MiniClusterComplete MiniClusterPhase = "Complete"
	// MiniClusterRunning means Ready is True: every one of spec.size broker pods runs and is
	// ready.
	MiniClusterRunning MiniClusterPhase = "Running"
	// MiniClusterPending means none of the above yet: the Job is being created, some broker
	// pods are not ready, or the MiniCluster waits (Ready's reason and message say for what).
	MiniClusterPending MiniClusterPhase = "Pending"
)

// BurstPhase summarises the state of a burst on its member cluster.
//
// +kubebuilder:validation:Enum=Pending;Applied;Ready;Joined;NotJoining;Failed;Unreachable;Reserved
type BurstPhase string

const (
	// BurstPending means the child MiniCluster has not been created yet, for example while the
	// lead broker's address is unknown.
	BurstPending BurstPhase = "Pending"
	// BurstApplied means the child MiniCluster exists on the member but its brokers are not all
	// ready.
	BurstApplied BurstPhase = "Applied"
	// BurstReady means all of the burst's broker pods are running and ready; whether their
	// brokers joined is not known (yet) from the root's Flux instance.
	BurstReady BurstPhase = "Ready"
	// BurstJoined means the root's Flux instance sees every running broker of the burst online.
	BurstJoined BurstPhase = "Joined"
	// BurstNotJoining means the burst's pods run but the root's Flux instance has not seen its
	// brokers join for a while: the lead broker's endpoint may not be reachable from the
	// member, or the brokers may not hold the instance's certificate.
	BurstNotJoining BurstPhase = "NotJoining"
	// BurstFailed means the burst cannot make progress: the member rejected the child, or the
	// child MiniCluster failed.
	BurstFailed BurstPhase = "Failed"
	// BurstUnreachable means the hub cannot reach the member cluster (or it is not registered).
	BurstUnreachable BurstPhase = "Unreachable"
	// BurstReserved means the burst's size is 0: its ranks are reserved in the hostlist and no
	// broker of it runs, so nothing of it is on the member.
	BurstReserved BurstPhase = "Reserved"
)
