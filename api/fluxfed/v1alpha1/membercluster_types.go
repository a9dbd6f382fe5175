package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MemberCluster is a cluster registered with a fluxfed hub: a MiniCluster on the hub bursts onto
// it by naming it in spec.flux.bursting.clusters[].cluster. The hub reaches the member with the
// kubeconfig the spec names, checks on it every few seconds and reports here whether it answers,
// which cluster it is, and what the hub keeps there.
//
// The object's name is the member's name in bursts. It is cluster-scoped: a member is shared by
// every namespace of the hub.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=mcl
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the hub reaches the member and may use it"
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.kubernetesVersion`,description="Kubernetes version of the member"
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodes`,description="Nodes of the member"
// +kubebuilder:printcolumn:name="Children",type=integer,JSONPath=`.status.children`,description="Child MiniClusters the hub keeps on the member"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1,description="Why the member is, or is not, ready"
// +kubebuilder:printcolumn:name="Cluster-ID",type=string,JSONPath=`.status.clusterID`,priority=1,description="UID of the member's kube-system namespace"
// +kubebuilder:printcolumn:name="Heartbeat",type=date,JSONPath=`.status.lastHeartbeatTime`,priority=1,description="When the member last answered, as recorded"
type MemberCluster struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata. The name is the member's name in
	// spec.flux.bursting.clusters[].cluster of a MiniCluster.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec says how the hub reaches the member.
	// +required
	Spec MemberClusterSpec `json:"spec"`

	// status is what the hub observed of the member; it is written by the hub only.
	// +optional
	Status MemberClusterStatus `json:"status,omitzero"`
}

// MemberClusterList is a list of MemberClusters.
//
// +kubebuilder:object:root=true
type MemberClusterList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitzero"`

	// items are the MemberClusters in the list.
	Items []MemberCluster `json:"items"`
}

// MemberClusterSpec says how the hub reaches a member cluster.
type MemberClusterSpec struct {
	// kubeconfigSecretRef names the Secret, in the namespace where the hub runs (fluxfed-system
	// unless the hub's --members-namespace says otherwise), that holds the kubeconfig the hub
	// uses on the member. The kubeconfig must carry its credentials inline: the hub refuses exec
	// plugins, auth providers, credential files and insecure TLS, and says why in the Ready
	// condition.
	// +required
	KubeconfigSecretRef KubeconfigSecretRef `json:"kubeconfigSecretRef"`
}

// KubeconfigSecretRef names a key of a Secret in the hub's namespace.
type KubeconfigSecretRef struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Name string `json:"name"`

	// key of the Secret's data that holds the kubeconfig.
	// +optional
	// +kubebuilder:default=kubeconfig
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// MemberClusterStatus is what the hub observed of a member cluster.
type MemberClusterStatus struct {
	// observedGeneration is the metadata.generation of the spec this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions describe the member's state: Ready is True when the hub reaches the member
	// with the kubeconfig and may use it.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// clusterID identifies the member cluster: the UID of its kube-system namespace. Two
	// MemberClusters with the same clusterID are the same cluster; the hub uses only the first.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ClusterID string `json:"clusterID,omitempty"`

	// kubernetesVersion is the version the member's API server reports, e.g. v1.36.3.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`

	// nodes is the number of nodes of the member; unset when the hub may not list them.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Nodes *int32 `json:"nodes,omitempty"`

	// children is the number of child MiniClusters this hub keeps on the member.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Children int32 `json:"children"`

	// lastHeartbeatTime is when the member last answered the hub's health check, as recorded:
	// the hub checks every few seconds but records an unchanged member at most once a minute.
	// +optional
	LastHeartbeatTime *metav1.Time `json:"lastHeartbeatTime,omitempty"`

	// orphans are objects the hub created on the member for roots that are gone, and could not
	// delete with them because the member did not answer then. The hub deletes them, each only
	// if it still has the UID recorded here, once the member answers; an object that merely
	// carries the hub's labels is never taken for an orphan.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1024
	Orphans []OrphanObject `json:"orphans,omitempty"`
}

// OrphanObject is an object the hub created on a member for a root that is gone.
type OrphanObject struct {
	// kind is MiniCluster (a child) or Secret (a child's CURVE Secret).
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

	// uid the member's API server gave the object when the hub created it.
	// +required
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid"`
}

// ConditionReady is the condition type of a MemberCluster that is True when the hub reaches the
// member and may use it.
const ConditionReady = "Ready"

// Reasons of the Ready condition of a MemberCluster, in CamelCase as metav1.Condition requires.
const (
	// ReasonConnected (Ready=True): the member answers the hub's health check with the
	// kubeconfig's credentials.
	ReasonConnected = "Connected"
	// ReasonConnecting (Ready=Unknown): the hub has no health result for the member yet, for
	// example right after it started or after the kubeconfig changed.
	ReasonConnecting = "Connecting"
	// ReasonUnreachable (Ready=False): the member's API server did not answer the health check
	// in time, or answered with a server error; the message says what happened.
	ReasonUnreachable = "Unreachable"
	// ReasonAccessDenied (Ready=False): the member answered, but refused the kubeconfig's
	// credentials (401 or 403).
	ReasonAccessDenied = "AccessDenied"
	// ReasonKubeconfigNotFound (Ready=False): the Secret, or its key, does not exist.
	ReasonKubeconfigNotFound = "KubeconfigNotFound"
	// ReasonKubeconfigRefused (Ready=False): the kubeconfig asks for something the hub does not
	// run (an exec plugin, credential files, insecure TLS, ...); the message says what.
	ReasonKubeconfigRefused = "KubeconfigRefused"
	// ReasonDuplicateCluster (Ready=False): the kubeconfig leads to a cluster that another
	// MemberCluster, registered first, already names; this one is never used.
	ReasonDuplicateCluster = "DuplicateCluster"
)
