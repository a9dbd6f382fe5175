package v1alpha2

import (
	corev1 "k8s.io/api/core/v1"
)

// MiniClusterPod holds settings applied to every pod of a MiniCluster.
type MiniClusterPod struct {
	// labels added to every pod.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// annotations added to every pod.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// restartPolicy of the pods. Pods of a Job cannot use Always. Unset, the broker pods use
	// Never, so that a failed job fails the MiniCluster at once (docs/minicluster.md), and the
	// services pod OnFailure.
	// +optional
	RestartPolicy RestartPolicy `json:"restartPolicy,omitempty"`

	// serviceAccountName is the ServiceAccount the pods run as.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// automountServiceAccountToken mounts the ServiceAccount's API token into the pods.
	// +optional
	AutomountServiceAccountToken bool `json:"automountServiceAccountToken,omitempty"`

	// runtimeClassName selects a RuntimeClass for the pods, for example "nvidia".
	// +optional
	// +kubebuilder:validation:MaxLength=253
	RuntimeClassName string `json:"runtimeClassName,omitempty"`

	// schedulerName selects the scheduler that places the pods, for example "fluence".
	// +optional
	// +kubebuilder:validation:MaxLength=253
	SchedulerName string `json:"schedulerName,omitempty"`

	// nodeSelector restricts the pods to nodes with all of these labels.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// nodeAffinity restricts the pods to nodes whose label, named by the key, has one of the
	// listed values.
	// +optional
	NodeAffinity map[string][]string `json:"nodeAffinity,omitempty"`

	// tolerations let the pods run on nodes with matching taints.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Tolerations []Toleration `json:"tolerations,omitempty"`

	// dnsPolicy of the pods; Kubernetes uses ClusterFirst when unset.
	// +optional
	DNSPolicy DNSPolicy `json:"dnsPolicy,omitempty"`

	// hostIPC puts the pods in the node's IPC namespace.
	// +optional
	HostIPC bool `json:"hostIPC,omitempty"`

	// hostPID puts the pods in the node's process namespace.
	// +optional
	HostPID bool `json:"hostPID,omitempty"`

	// resources are accounted to each pod on top of its containers' requests (the pod's
	// overhead), for example memory: 500M or cpu: 4.
	// +optional
	Resources corev1.ResourceList `json:"resources,omitempty"`

	// securityContext of the pods.
	// +optional
	SecurityContext *corev1.PodSecurityContext `json:"securityContext,omitempty"`
}

// Toleration lets a pod run on nodes with a matching taint.
type Toleration struct {
	// key of the taint; empty with operator Exists matches every taint.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key,omitempty"`

	// operator compares the taint's value: Equal (the default) or Exists.
	// +optional
	Operator TolerationOperator `json:"operator,omitempty"`

	// value the taint must have with operator Equal.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Value string `json:"value,omitempty"`

	// effect of the taints to tolerate; empty matches every effect.
	// +optional
	Effect TaintEffect `json:"effect,omitempty"`
}

// RestartPolicy is the restart policy of the MiniCluster's pods.
//
// +kubebuilder:validation:Enum=OnFailure;Never
type RestartPolicy string

const (
	// RestartOnFailure restarts a failed container in place.
	RestartOnFailure RestartPolicy = "OnFailure"
	// RestartNever replaces a failed pod with a new one, within the Job's backoff limit.
	RestartNever RestartPolicy = "Never"
)

// DNSPolicy is a Kubernetes pod DNS policy.
//
// +kubebuilder:validation:Enum=ClusterFirst;ClusterFirstWithHostNet;Default;None
type DNSPolicy string

const (
	// DNSClusterFirst resolves through the cluster DNS first.
	DNSClusterFirst DNSPolicy = "ClusterFirst"
	// DNSClusterFirstWithHostNet is ClusterFirst for pods on the host network.
	DNSClusterFirstWithHostNet DNSPolicy = "ClusterFirstWithHostNet"
	// DNSDefault uses the node's resolver configuration.
	DNSDefault DNSPolicy = "Default"
	// DNSNone leaves DNS configuration to the pod's dnsConfig.
	DNSNone DNSPolicy = "None"
)

// TolerationOperator is how a toleration compares a taint's value.
//
// +kubebuilder:validation:Enum=Exists;Equal
type TolerationOperator string

const (
	// TolerationOpExists matches a taint with the key, whatever its value.
	TolerationOpExists TolerationOperator = "Exists"
	// TolerationOpEqual matches a taint with the key and the value.
	TolerationOpEqual TolerationOperator = "Equal"
)

// TaintEffect is the effect of a node taint.
//
// +kubebuilder:validation:Enum=NoSchedule;PreferNoSchedule;NoExecute
type TaintEffect string

const (
	// TaintNoSchedule keeps pods that do not tolerate the taint off the node.
	TaintNoSchedule TaintEffect = "NoSchedule"
	// TaintPreferNoSchedule avoids the node for pods that do not tolerate the taint.
	TaintPreferNoSchedule TaintEffect = "PreferNoSchedule"
	// TaintNoExecute also evicts running pods that do not tolerate the taint.
	TaintNoExecute TaintEffect = "NoExecute"
)
