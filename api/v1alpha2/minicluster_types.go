package v1alpha2

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MiniCluster is a Flux instance running in Kubernetes: an indexed Job whose pods each run one
// Flux broker, joined through a headless Service. Rank 0 (pod index 0) is the lead broker; it
// runs the command of the Flux container, or waits for users when the cluster is interactive.
//
// A MiniCluster can reserve room for brokers in other places (spec.flux.bursting). With fluxfed
// running as a hub, entries of spec.flux.bursting.clusters that name a member cluster are
// created there as child MiniClusters whose brokers join this one.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=mc
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.size,statuspath=.status.size,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.spec.size`,description="Number of broker pods requested"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.ready`,description="Broker pods running and ready"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`,description="Where the MiniCluster's own brokers are: Pending, Running, Complete or Failed"
// +kubebuilder:printcolumn:name="Bursts",type=string,JSONPath=`.status.burstSummary`,description="Bursts ready of the bursts that run brokers on a member cluster, and those at size 0 apart"
// +kubebuilder:printcolumn:name="Lead-Broker",type=string,JSONPath=`.status.leadBroker.endpoint`,priority=1,description="Where the bursts reach the lead broker"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z0-9](-*[a-z0-9])*$')",message="metadata.name must be a DNS label (lowercase letters, digits and '-', starting and ending with a letter or digit, no dots) because it prefixes every pod hostname",fieldPath=".metadata"
// +kubebuilder:validation:XValidation:rule="[self.spec].all(spec, size(self.metadata.name) + 1 + size(string((has(spec.maxSize) && spec.maxSize > spec.size ? spec.maxSize : spec.size) - 1)) <= 63)",message="metadata.name is too long for spec.size and spec.maxSize: every pod hostname '<name>-<index>' must fit in 63 characters",fieldPath=".metadata"
// +kubebuilder:validation:XValidation:rule="!self.spec.?flux.?bursting.?clusters.hasValue() || has(self.spec.flux.bursting.leadBroker) || self.spec.flux.bursting.clusters.all(c, c.name != self.metadata.name)",message="spec.flux.bursting.clusters[].name must differ from metadata.name: burst hostnames would collide with this MiniCluster's own",fieldPath=".spec.flux.bursting.clusters"
type MiniCluster struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata. The name must be a DNS label: pods are named
	// and hostnamed '<name>-<index>'.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec describes the MiniCluster the user asks for.
	// +required
	Spec MiniClusterSpec `json:"spec"`

	// status is what the controllers observed; it is written by fluxfed only.
	// +optional
	Status MiniClusterStatus `json:"status,omitzero"`
}

// MiniClusterList is a list of MiniClusters.
//
// +kubebuilder:object:root=true
type MiniClusterList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitzero"`

	// items are the MiniClusters in the list.
	Items []MiniCluster `json:"items"`
}

// MiniClusterSpec describes the pods of a MiniCluster, the Flux instance they form and how it
// may burst beyond them.
//
// +kubebuilder:validation:XValidation:rule="!has(self.maxSize) || self.maxSize == 0 || self.maxSize >= self.size",message="spec.size must not exceed spec.maxSize: the MiniCluster cannot grow beyond maxSize (leave maxSize unset or 0 to follow size)",fieldPath=".maxSize"
// +kubebuilder:validation:XValidation:rule="!has(self.minSize) || self.minSize <= self.size",message="spec.minSize must not be larger than spec.size",fieldPath=".minSize"
// +kubebuilder:validation:XValidation:rule="(has(self.maxSize) && self.maxSize > self.size ? self.maxSize : self.size) == (has(oldSelf.maxSize) && oldSelf.maxSize > oldSelf.size ? oldSelf.maxSize : oldSelf.size)",message="the number of ranks of the Flux instance (spec.maxSize, or spec.size when maxSize is unset) is fixed when the MiniCluster is created, because a running broker never learns a new hostlist: scale spec.size within spec.maxSize, or delete and re-create the MiniCluster with the maxSize it may grow to",fieldPath=".size",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="(has(self.flux) && has(self.flux.bursting) && has(self.flux.bursting.clusters) ? self.flux.bursting.clusters.map(b, b.name) : []) == (has(oldSelf.flux) && has(oldSelf.flux.bursting) && has(oldSelf.flux.bursting.clusters) ? oldSelf.flux.bursting.clusters.map(b, b.name) : []) && (has(self.flux) && has(self.flux.bursting) && has(self.flux.bursting.clusters) ? self.flux.bursting.clusters.map(b, has(b.maxSize) ? b.maxSize : b.size) : []) == (has(oldSelf.flux) && has(oldSelf.flux.bursting) && has(oldSelf.flux.bursting.clusters) ? oldSelf.flux.bursting.clusters.map(b, has(b.maxSize) ? b.maxSize : b.size) : [])",message="the bursts' names, order and reserved ranks (maxSize, or size without it) are fixed when the MiniCluster is created, because they are ranks of the hostlist that a running broker never learns anew: a burst's size may change within its maxSize, and its cluster and namespace may change; to add, remove or re-reserve bursts, delete and re-create the MiniCluster (entries without a cluster reserve ranks to fill later)",fieldPath=".flux.bursting.clusters",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule=`(has(self.flux) && has(self.flux.bursting) && has(self.flux.bursting.hostlist) ? self.flux.bursting.hostlist : "") == (has(oldSelf.flux) && has(oldSelf.flux.bursting) && has(oldSelf.flux.bursting.hostlist) ? oldSelf.flux.bursting.hostlist : "")`,message="spec.flux.bursting.hostlist is fixed when the MiniCluster is created, because a running broker never learns a new hostlist: delete and re-create the MiniCluster to change it",fieldPath=".flux.bursting.hostlist",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="(has(self.flux) && has(self.flux.bursting) && has(self.flux.bursting.leadBroker) ? [self.flux.bursting.leadBroker.name] : []) == (has(oldSelf.flux) && has(oldSelf.flux.bursting) && has(oldSelf.flux.bursting.leadBroker) ? [oldSelf.flux.bursting.leadBroker.name] : []) && (has(self.flux) && has(self.flux.bursting) && has(self.flux.bursting.leadBroker) ? [self.flux.bursting.leadBroker.size] : []) == (has(oldSelf.flux) && has(oldSelf.flux.bursting) && has(oldSelf.flux.bursting.leadBroker) ? [oldSelf.flux.bursting.leadBroker.size] : [])",message="spec.flux.bursting.leadBroker's name and size are fixed when the MiniCluster is created, because they are ranks of the hostlist (its address and port may change): delete and re-create the MiniCluster to change them",fieldPath=".flux.bursting.leadBroker",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="self.containers.size() <= 1 || (has(self.oversubscribe) && self.oversubscribe) || self.containers.filter(c, has(c.runFlux) && c.runFlux).size() <= 1",message="spec.containers: at most one container may set runFlux: true",fieldPath=".containers"
type MiniClusterSpec struct {
	// containers run in every pod of the MiniCluster. Exactly one of them runs Flux: the only
	// container when there is one, otherwise the one with runFlux: true. Every other container
	// needs a name.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.size() <= 1 || self.exists(c, has(c.runFlux) && c.runFlux)",message="spec.containers: with more than one container, one of them must set runFlux: true (a single container runs Flux without it)"
	// +kubebuilder:validation:XValidation:rule="self.size() <= 1 || self.all(c, (has(c.runFlux) && c.runFlux) || has(c.name))",message="spec.containers: every container that does not run Flux needs a name"
	// +kubebuilder:validation:XValidation:rule="self.all(c, !has(c.commands) || !has(c.commands.script) || c.commands.script == '' || !has(c.command) || c.command == '' || !(self.size() == 1 || (has(c.runFlux) && c.runFlux)))",message="spec.containers: the container that runs Flux cannot set both command and commands.script; choose one"
	// +kubebuilder:validation:XValidation:rule="self.size() <= 1 || self.all(c, !has(c.name) || self.exists_one(d, has(d.name) && d.name == c.name))",message="spec.containers: container names must be unique"
	Containers []Container `json:"containers"`

	// services are extra containers run in a pod of their own, '<name>-services', next to the
	// MiniCluster's pods and reachable through the same headless Service (a registry or a web
	// server, for example). Every service needs a name.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(s, has(s.name))",message="spec.services: every service container needs a name"
	// +kubebuilder:validation:XValidation:rule="self.size() <= 1 || self.all(s, !has(s.name) || self.exists_one(d, has(d.name) && d.name == s.name))",message="spec.services: service container names must be unique"
	Services []Container `json:"services,omitempty"`

	// resourceClaims are dynamic resource claims added to every pod; containers reference them
	// by name in resources.claims.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	ResourceClaims []corev1.PodResourceClaim `json:"resourceClaims,omitempty"`

	// network configures the headless Service that gives every pod a stable DNS name.
	// +optional
	// +kubebuilder:default={}
	Network Network `json:"network,omitzero"`

	// jobLabels are added to the labels of the indexed Job.
	// +optional
	JobLabels map[string]string `json:"jobLabels,omitempty"`

	// interactive starts the lead broker without a command and keeps it running, so users can
	// exec into the pod and use the Flux instance. Stopping the instance (flux shutdown) ends
	// the MiniCluster cleanly.
	// +optional
	// +kubebuilder:default=false
	Interactive bool `json:"interactive,omitempty"`

	// flux holds the settings of the Flux instance shared by every broker.
	// +optional
	// +kubebuilder:default={}
	Flux FluxSpec `json:"flux,omitzero"`

	// logging controls what the pods' entrypoint scripts print.
	// +optional
	Logging Logging `json:"logging,omitzero"`

	// archive names a file to restore the Flux instance's state from when it starts and to
	// save it to when it stops.
	// +optional
	Archive Archive `json:"archive,omitzero"`

	// shareProcessNamespace lets the containers of a pod see each other's processes.
	// +optional
	ShareProcessNamespace bool `json:"shareProcessNamespace,omitempty"`

	// cleanup deletes the MiniCluster's pods once the lead broker has finished.
	// +optional
	// +kubebuilder:default=false
	Cleanup bool `json:"cleanup,omitempty"`

	// size is the number of broker pods to run. The lead broker starts its work once this many
	// brokers (or minSize, when set) have joined. It can be changed later, also through the scale
	// subresource, between 1 and maxSize; without maxSize it is fixed, as the number of ranks of
	// the Flux instance is.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	Size int32 `json:"size,omitempty"`

	// maxSize is the largest size the MiniCluster may be scaled to. Flux is told about this
	// many brokers up front, so it must be at least size. 0 or unset means size. The number of
	// ranks it gives (maxSize, or size when unset) is fixed once the MiniCluster exists: a
	// running broker never learns a new hostlist.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxSize int32 `json:"maxSize,omitempty"`

	// minSize is the number of brokers that must be online before the lead broker starts its
	// work. It must not exceed size; 0 or unset means size.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinSize int32 `json:"minSize,omitempty"`

	// backoffLimit is the number of pod failures the indexed Job tolerates before it fails.
	// +optional
	// +kubebuilder:validation:Minimum=0
	BackoffLimit int32 `json:"backoffLimit,omitempty"`

	// tasks is the number of tasks for the command of the Flux container. When tasks is larger
	// than size the command runs with '-N <size> -n <tasks>'; set it to 0 to pass only
	// '-N <size>'.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	Tasks *int32 `json:"tasks,omitempty"`

	// deadlineSeconds limits how long the indexed Job may run, in seconds (the default is about
	// one year). Time spent suspended does not count.
	// +optional
	// +kubebuilder:default=31500000
	// +kubebuilder:validation:Minimum=1
	DeadlineSeconds int64 `json:"deadlineSeconds,omitempty"`

	// pod holds settings applied to every pod of the MiniCluster.
	// +optional
	Pod MiniClusterPod `json:"pod,omitzero"`

	// volumes declares volumes once for the whole MiniCluster, by name; a container mounts one
	// by naming it in its own volumes with only path (and readOnly). An entry of storage class
	// hostpath (the default) is the directory path of the node.
	//
	// Deprecated: declare the volume where it is mounted, in spec.containers[].volumes, with
	// hostPath (or claimName, ...). Accepted, with a warning, for older manifests.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 63 && k.matches('^[a-z0-9](-*[a-z0-9])*$'))",message="volumes: every volume name must be a DNS label (lowercase letters, digits and '-', at most 63 characters)"
	Volumes map[string]MiniClusterVolume `json:"volumes,omitempty"`

	// oversubscribe let several containers set runFlux. fluxfed runs one broker per pod, in the
	// first of them; the others run their command next to it, with Flux's environment.
	//
	// Deprecated: set runFlux on one container. Accepted, with a warning, for older manifests.
	// +optional
	Oversubscribe bool `json:"oversubscribe,omitempty"`
}

// Network configures how the MiniCluster's pods find each other.
type Network struct {
	// headlessName is the name of the headless Service that gives pod i the DNS name
	// '<minicluster>-<i>.<headlessName>.<namespace>.svc.cluster.local'. When unset, the Service
	// is named after the MiniCluster, so that MiniClusters in one namespace do not share it (as
	// the Flux Operator does).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	HeadlessName string `json:"headlessName,omitempty"`

	// disableAffinity removes the affinity rules that ask the scheduler to put the MiniCluster's
	// broker pods on separate nodes (and keep them in one zone), so several brokers may share a
	// node.
	// +optional
	DisableAffinity bool `json:"disableAffinity,omitempty"`
}

// Logging selects what the entrypoint scripts of the pods print. These settings concern the
// job's output, not fluxfed's own logs.
type Logging struct {
	// quiet prints only the output of the user's command: no progress messages.
	// +optional
	// +kubebuilder:default=false
	Quiet bool `json:"quiet,omitempty"`

	// strict runs the entrypoint scripts in bash strict mode, so that any failing step stops
	// the script with an error.
	// +optional
	// +kubebuilder:default=false
	Strict bool `json:"strict,omitempty"`

	// debug makes Flux more verbose about job submission.
	// +optional
	// +kubebuilder:default=false
	Debug bool `json:"debug,omitempty"`

	// zeromq turns on ZeroMQ debug logging in the brokers (tbon.zmqdebug), which shows
	// connection attempts between brokers.
	// +optional
	// +kubebuilder:default=false
	Zeromq bool `json:"zeromq,omitempty"`

	// timed prints wall-clock timings of the main Flux commands, prefixed with FLUXTIME. The
	// container running Flux must provide /usr/bin/time.
	// +optional
	// +kubebuilder:default=false
	Timed bool `json:"timed,omitempty"`
}

// Archive names the file that keeps a Flux instance's state between MiniClusters.
type Archive struct {
	// path of the archive file, typically on a persistent volume. When it exists at start the
	// state is loaded from it; when the lead broker stops the state is dumped to it.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule=`self.startsWith('/') && !self.matches('[\\p{Cc}\\p{Cf}\\p{Zl}\\p{Zp},]|/[.][.](/|$)')`,message="archive.path must be an absolute path (starting with /) of printable characters: no control characters such as newline, tab or NUL, no invisible formatting characters such as bidirectional overrides, no .. elements and no commas (Flux splits broker options at commas)"
	Path string `json:"path,omitempty"`
}
