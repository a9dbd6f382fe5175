package v1alpha1

import (
	"strings"

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
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,description="Why the member is, or is not, ready"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Fluxfed",type=string,JSONPath=`.status.conditions[?(@.type=="FluxfedInstalled")].reason`,priority=1,description="Whether fluxfed runs on the member, as far as the hub can tell"
// +kubebuilder:printcolumn:name="Credentials",type=string,JSONPath=`.status.conditions[?(@.type=="CredentialsValid")].reason`,priority=1,description="Whether the kubeconfig's credentials last another day"
// +kubebuilder:printcolumn:name="Cluster-ID",type=string,JSONPath=`.status.clusterID`,priority=1,description="UID of the member's kube-system namespace"
// +kubebuilder:printcolumn:name="Heartbeat",type=date,JSONPath=`.status.lastHeartbeatTime`,priority=1,description="When the member last answered, as recorded once a minute: under a minute and a health interval old while it answers"
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

// MemberClusterSpec says how the hub reaches a member cluster, and what the member's owner lets
// it do there.
type MemberClusterSpec struct {
	// kubeconfigSecretRef names the Secret, in the namespace where the hub runs (fluxfed-system
	// unless the hub's --members-namespace says otherwise), that holds the kubeconfig the hub
	// uses on the member. The kubeconfig must carry its credentials inline: the hub refuses exec
	// plugins, auth providers, credential files and insecure TLS, and says why in the Ready
	// condition.
	// +required
	KubeconfigSecretRef KubeconfigSecretRef `json:"kubeconfigSecretRef"`

	// namespaces says which namespaces of the member roots may burst into, and whether the hub
	// may create them. By default a root bursts only into the namespace of its own namespace's
	// name, which must exist. kube-system, kube-public, kube-node-lease, every other kube-
	// namespace and fluxfed-system are never used, whatever this says.
	// +optional
	// +kubebuilder:default={}
	Namespaces MemberNamespaces `json:"namespaces,omitzero"`

	// podSecurity is the Pod Security Standard that the pods of every child pushed to the member
	// must meet. By default, baseline.
	// +optional
	// +kubebuilder:default={}
	PodSecurity MemberPodSecurity `json:"podSecurity,omitzero"`
}

// MemberNamespaces says which namespaces of a member roots may burst into.
//
// +kubebuilder:validation:XValidation:rule="has(self.allow) && self.allow == 'Listed' ? has(self.names) && size(self.names) > 0 : !has(self.names) || size(self.names) == 0",message="names lists the namespaces when allow is Listed, and only then",fieldPath=".names"
type MemberNamespaces struct {
	// allow says which namespaces a burst may use:
	// Mirror (the default): only the namespace with the name of the root's namespace on the
	// hub, so that each team's roots land in the namespace of the same name on every member;
	// Listed: only the namespaces in names, for every root of the hub, whatever its namespace;
	// Any: every namespace but the reserved ones, for a member lent to the hub's users as a whole.
	// +optional
	// +kubebuilder:default=Mirror
	Allow NamespaceAllow `json:"allow,omitempty"`

	// names are the namespaces roots may burst into when allow is Listed. Every root of the hub
	// may use every one of them. kube-system, kube-public, kube-node-lease, every other kube-
	// namespace and fluxfed-system cannot be listed.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	Names []MemberNamespaceName `json:"names,omitempty"`

	// create lets the hub create a burst's namespace on the member when it does not exist, with
	// the Pod Security Admission enforce label of podSecurity.level. When false (the default),
	// a burst into a missing namespace fails until the member's owner creates it.
	// +optional
	// +kubebuilder:default=false
	Create bool `json:"create,omitempty"`
}

// NamespaceAllow says which namespaces of a member roots may burst into.
//
// +kubebuilder:validation:Enum=Mirror;Listed;Any
type NamespaceAllow string

const (
	// NamespaceAllowMirror allows only the namespace with the name of the root's own namespace.
	NamespaceAllowMirror NamespaceAllow = "Mirror"
	// NamespaceAllowListed allows only the namespaces of spec.namespaces.names.
	NamespaceAllowListed NamespaceAllow = "Listed"
	// NamespaceAllowAny allows every namespace but the reserved ones (kube- namespaces and
	// fluxfed-system).
	NamespaceAllowAny NamespaceAllow = "Any"
)

// MemberNamespaceName is the name of a namespace of a member cluster that roots may burst into:
// a DNS label, neither a kube- namespace nor fluxfed-system.
//
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
// +kubebuilder:validation:XValidation:rule="!self.startsWith('kube-') && self != 'fluxfed-system'",message="kube- namespaces (kube-system, kube-public, kube-node-lease, ...) and fluxfed-system are never burst into"
type MemberNamespaceName string

// MemberPodSecurity is the Pod Security Standard the pods pushed to a member must meet.
type MemberPodSecurity struct {
	// level is the Pod Security Standards level (https://kubernetes.io/docs/concepts/security/pod-security-standards/)
	// that the pods of every child pushed to the member must meet, checked by the hub before it
	// pushes: privileged (anything), baseline (the default: no privileged containers, host
	// namespaces, hostPath volumes, added capabilities beyond the default set, ...) or
	// restricted (baseline, and the pods run as non-root with no privilege escalation, every
	// capability dropped and the RuntimeDefault seccomp profile). Namespaces the hub creates
	// carry the Pod Security Admission enforce label of this level, so the member enforces it
	// too.
	// +optional
	// +kubebuilder:default=baseline
	Level PodSecurityLevel `json:"level,omitempty"`
}

// PodSecurityLevel is a level of the Pod Security Standards.
//
// +kubebuilder:validation:Enum=privileged;baseline;restricted
type PodSecurityLevel string

const (
	// PodSecurityPrivileged allows any pod.
	PodSecurityPrivileged PodSecurityLevel = "privileged"
	// PodSecurityBaseline refuses pods with known privilege escalations.
	PodSecurityBaseline PodSecurityLevel = "baseline"
	// PodSecurityRestricted also requires the pod hardening best practices.
	PodSecurityRestricted PodSecurityLevel = "restricted"
)

// FluxfedNamespace is the namespace fluxfed runs in, on the hub and on the members
// (deploy/manager); a burst never uses it.
const FluxfedNamespace = "fluxfed-system"

// ReservedNamespacePrefix starts the names of the namespaces Kubernetes keeps for itself:
// kube-system, kube-public, kube-node-lease and any it adds.
const ReservedNamespacePrefix = "kube-"

// IsReservedNamespace reports whether a burst may never use the member namespace name, whatever
// its MemberCluster says: a kube- namespace (the API server's own) or fluxfed's. It compares
// exactly: a name with capitals is no namespace name at all, and is refused as such.
func IsReservedNamespace(name string) bool {
	return strings.HasPrefix(name, ReservedNamespacePrefix) || name == FluxfedNamespace
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
	// with the kubeconfig and may use it; FluxfedInstalled, NamespacesAvailable and
	// CredentialsValid say what the member lacks, if anything.
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
	// the hub checks every few seconds but records an unchanged member once a minute, so on a
	// member that answers it is less than a minute and one health interval old.
	// +optional
	LastHeartbeatTime *metav1.Time `json:"lastHeartbeatTime,omitempty"`

	// watchedNamespaces are the member namespaces whose MiniClusters and Secrets the hub
	// watches: those its roots burst into, as the member's policy allows, where the hub's
	// identity on the member may list and watch them. Unset with spec.namespaces.allow Any: the
	// hub then watches every namespace.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=63
	WatchedNamespaces []string `json:"watchedNamespaces,omitempty"`

	// deniedNamespaces are member namespaces roots burst into, as the member's policy allows,
	// where the hub's identity on the member may not list or watch MiniClusters and Secrets:
	// the member's owner has not bound ClusterRole fluxfed-hub-burst there (docs/bursting.md).
	// The hub pushes nothing there, and asks again every minute.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=63
	DeniedNamespaces []string `json:"deniedNamespaces,omitempty"`

	// orphans are objects the hub created on the member for roots that are gone, and could not
	// delete with them because the member did not answer then: where the orphan sweep looks
	// first. The sweep deletes such an object only if it carries a proof that this hub made it
	// (annotation fluxfed.io/proof) for a root that no longer exists; an entry that names
	// anything else is dropped, and the object left alone.
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

	// uid the member's API server gave the object; empty when the hub had recorded its
	// intent to create it and never saw it created.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid,omitempty"`
}

// Condition types of a MemberCluster.
const (
	// ConditionReady is True when the hub reaches the member and may use it.
	ConditionReady = "Ready"
	// ConditionFluxfedInstalled is True when the member serves the MiniCluster API
	// (CustomResourceDefinition miniclusters.flux-framework.org), so that the hub can push
	// children there, and no child shows that fluxfed's manager there is not running. It is
	// False when the CRD is missing (and Ready is then False too, reason FluxfedMissing), or
	// when a child the hub pushed was never reconciled by the member's manager.
	ConditionFluxfedInstalled = "FluxfedInstalled"
	// ConditionNamespacesAvailable is True when every namespace of the member that roots burst
	// into, and every namespace of spec.namespaces.names, can be used by the hub: it exists and
	// is lent to the hub (or the hub may create it, spec.namespaces.create). False names the
	// namespaces that cannot.
	ConditionNamespacesAvailable = "NamespacesAvailable"
	// ConditionCredentialsValid is True while the kubeconfig's credentials are valid for more
	// than a day, as far as the hub can read their expiry (the exp claim of a bearer token, read
	// without verifying it, or the end of a client certificate's validity). False warns that they expire within a day, or have expired; a
	// Warning event is recorded when they enter that window.
	ConditionCredentialsValid = "CredentialsValid"
)

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
	// ReasonCredentialsRefused (Ready=False): the member did not accept the kubeconfig's
	// credentials (401 Unauthorized): they expired, were revoked, or are not the member's. The
	// message says when a token expired, and how to mint a new one.
	ReasonCredentialsRefused = "CredentialsRefused"
	// ReasonAccessDenied (Ready=False): the member accepted the kubeconfig's credentials but
	// its RBAC forbids what the health check reads (403).
	ReasonAccessDenied = "AccessDenied"
	// ReasonKubeconfigNotFound (Ready=False): the Secret, or its key, does not exist.
	ReasonKubeconfigNotFound = "KubeconfigNotFound"
	// ReasonKubeconfigRefused (Ready=False): the kubeconfig asks for something the hub does not
	// run (an exec plugin, credential files, insecure TLS, ...); the message says what.
	ReasonKubeconfigRefused = "KubeconfigRefused"
	// ReasonDuplicateCluster (Ready=False): the kubeconfig leads to a cluster that another
	// MemberCluster, registered first, already names; this one is never used.
	ReasonDuplicateCluster = "DuplicateCluster"
	// ReasonFluxfedMissing (Ready=False, and FluxfedInstalled=False): the member answers but
	// does not serve the MiniCluster API: fluxfed is not installed there, and no burst can be
	// pushed there until it is.
	ReasonFluxfedMissing = "FluxfedMissing"
)

// Reasons of the FluxfedInstalled condition of a MemberCluster.
const (
	// ReasonFluxfedAnswering (FluxfedInstalled=True): the member serves the MiniCluster API and
	// its manager has reconciled the children the hub pushed there.
	ReasonFluxfedAnswering = "ManagerAnswering"
	// ReasonCRDInstalled (FluxfedInstalled=True): the member serves the MiniCluster API; whether
	// its manager runs shows only once the hub pushed a child there, since the hub may not read
	// the member's Deployments.
	ReasonCRDInstalled = "CRDInstalled"
	// ReasonManagerNotAnswering (FluxfedInstalled=False): a child the hub pushed to the member
	// has not been reconciled by the member's fluxfed manager within a few minutes: it is not
	// installed, not running, or stuck.
	ReasonManagerNotAnswering = "ManagerNotAnswering"
	// ReasonNotChecked (Unknown): the hub has not checked this yet, or cannot now (the member
	// does not answer, or refuses the hub's credentials).
	ReasonNotChecked = "NotChecked"
)

// Reasons of the NamespacesAvailable condition of a MemberCluster.
const (
	// ReasonNamespacesAvailable (NamespacesAvailable=True): every namespace roots use exists
	// and is lent to the hub, or the hub may create it.
	ReasonNamespacesAvailable = "NamespacesAvailable"
	// ReasonNamespaceMissing (NamespacesAvailable=False): a namespace does not exist on the
	// member and the hub may not create it (spec.namespaces.create is false).
	ReasonNamespaceMissing = "NamespaceMissing"
	// ReasonNamespaceNotLent (NamespacesAvailable=False): the hub's identity on the member may
	// not use a namespace: it does not exist, or the member's owner has not bound ClusterRole
	// fluxfed-hub-burst there. The hub may not read namespaces on the member, so it cannot tell
	// which; the message says so.
	ReasonNamespaceNotLent = "NamespaceNotLent"
)

// Reasons of the CredentialsValid condition of a MemberCluster.
const (
	// ReasonExpiresLater (CredentialsValid=True): the kubeconfig's token or client certificate
	// expires in more than a day; the message says when.
	ReasonExpiresLater = "ExpiresLater"
	// ReasonNoExpiry (CredentialsValid=True): the kubeconfig's credentials carry no expiry the
	// hub can read (a token that is not a JWT or has no exp claim, or no credentials at all).
	ReasonNoExpiry = "NoExpiry"
	// ReasonExpiresSoon (CredentialsValid=False): the kubeconfig's credentials expire within a
	// day; the message says when and how to mint new ones.
	ReasonExpiresSoon = "ExpiresSoon"
	// ReasonExpired (CredentialsValid=False): the kubeconfig's credentials have expired.
	ReasonExpired = "Expired"
)
