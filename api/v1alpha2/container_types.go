package v1alpha2

import (
	corev1 "k8s.io/api/core/v1"
)

// Container is a container of the MiniCluster's pods (or of its services pod). The container
// that runs Flux gets Flux from the flux view and runs a broker; the others run their command
// next to it and can reach the broker through the shared volume.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.launcher) && self.launcher && has(self.batch) && self.batch)",message="launcher and batch cannot both be true; choose one"
// +kubebuilder:validation:XValidation:rule="!has(self.volumes) || !has(self.existingVolumes) || self.existingVolumes.all(k, !(k in self.volumes))",message="a volume name must not appear in both volumes and existingVolumes"
type Container struct {
	// name of the container. Required for every container except the one that runs Flux, which
	// is named after the MiniCluster when unset.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name,omitempty"`

	// image of the container. It does not need Flux unless spec.flux.container.disable is set,
	// but its operating system should match the flux view. If the image's user is not root, it
	// needs sudo.
	// +optional
	// +kubebuilder:default="ghcr.io/rse-ops/accounting:app-latest"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image,omitempty"`

	// imagePullSecret names an existing Secret used to pull the image.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ImagePullSecret string `json:"imagePullSecret,omitempty"`

	// pullAlways pulls the image on every pod start (imagePullPolicy Always).
	// +optional
	// +kubebuilder:default=false
	PullAlways bool `json:"pullAlways,omitempty"`

	// imagePullPolicy sets the pull policy directly; it takes precedence over pullAlways.
	// +optional
	ImagePullPolicy PullPolicy `json:"imagePullPolicy,omitempty"`

	// workingDir is the directory the command runs in.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule=`self.startsWith('/') && !self.matches('[\\p{Cc}\\p{Cf}\\p{Zl}\\p{Zp}]|/[.][.](/|$)')`,message="workingDir must be an absolute path (starting with /) of printable characters: no control characters such as newline, tab or NUL, no invisible formatting characters such as bidirectional overrides, and no .. elements"
	WorkingDir string `json:"workingDir,omitempty"`

	// command to run. In the container that runs Flux, the lead broker submits it to the
	// instance and the MiniCluster ends when it completes; without a command (or with
	// spec.interactive) the instance keeps running. In other containers it is the container's
	// entrypoint.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	Command string `json:"command,omitempty"`

	// commands are extra shell snippets run at fixed points of the entrypoint script.
	// +optional
	Commands Commands `json:"commands,omitzero"`

	// launcher runs the command directly under 'flux start' instead of submitting it, for tools
	// that submit their own Flux jobs (workflow managers such as Snakemake or Nextflow).
	// +optional
	Launcher bool `json:"launcher,omitempty"`

	// batch writes the lines of the command to a script and submits it with 'flux batch', each
	// line as its own job. Output goes to logs.
	// +optional
	Batch bool `json:"batch,omitempty"`

	// batchRaw submits the batch script as written, without wrapping each line in 'flux
	// submit', for scripts that call Flux themselves.
	// +optional
	BatchRaw bool `json:"batchRaw,omitempty"`

	// logs is the directory where batch jobs write their output (default /tmp/fluxout). Use a
	// shared volume so every pod can write to it.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule=`self.startsWith('/') && !self.matches('[\\p{Cc}\\p{Cf}\\p{Zl}\\p{Zp}]|/[.][.](/|$)')`,message="logs must be an absolute path (starting with /) of printable characters: no control characters such as newline, tab or NUL, no invisible formatting characters such as bidirectional overrides, and no .. elements"
	Logs string `json:"logs,omitempty"`

	// runFlux marks the container that runs Flux. Needed only when there is more than one
	// container; at most one container may set it (unless the deprecated spec.oversubscribe is
	// set, when the first that does runs Flux).
	// +optional
	RunFlux bool `json:"runFlux,omitempty"`

	// noWrapEntrypoint runs the command of a container that does not run Flux as is, without
	// the wrapper script that waits for Flux and sets up its environment.
	// +optional
	NoWrapEntrypoint bool `json:"noWrapEntrypoint,omitempty"`

	// ports the container listens on, each exposed as a container port of the same number.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=65535
	Ports []int32 `json:"ports,omitempty"`

	// environment variables of the container, by name.
	// +optional
	Environment map[string]string `json:"environment,omitempty"`

	// secrets adds environment variables, by variable name, whose values come from keys of
	// existing Secrets.
	// +optional
	Secrets map[string]SecretKey `json:"secrets,omitempty"`

	// volumes mounts existing volumes into the container, by volume name. The volumes
	// (claims, Secrets, ConfigMaps) must exist; a name used by several containers must describe
	// the same volume. Names must be DNS labels.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 63 && k.matches('^[a-z0-9](-*[a-z0-9])*$'))",message="volumes: every volume name must be a DNS label (lowercase letters, digits and '-', at most 63 characters)"
	Volumes map[string]ContainerVolume `json:"volumes,omitempty"`

	// existingVolumes is the former name of volumes, still used by older manifests. Its
	// entries are treated exactly like those of volumes; a name must not appear in both.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 63 && k.matches('^[a-z0-9](-*[a-z0-9])*$'))",message="existingVolumes: every volume name must be a DNS label (lowercase letters, digits and '-', at most 63 characters)"
	ExistingVolumes map[string]ContainerVolume `json:"existingVolumes,omitempty"`

	// lifeCycle adds commands run right after the container starts and before it stops.
	// +optional
	LifeCycle LifeCycle `json:"lifeCycle,omitzero"`

	// resources are the container's resource requests and limits. Extended resources, such as
	// GPUs (nvidia.com/gpu) or network devices (vpc.amazonaws.com/efa), are requested here too.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitzero"`

	// securityContext of the container.
	// +optional
	SecurityContext *ContainerSecurityContext `json:"securityContext,omitempty"`

	// cores is the number of cores of each node as Flux describes it, for a MiniCluster that
	// bursts (see docs/bursting.md, "Each burst's hardware"); it takes precedence over the cpu of
	// resources there. A MiniCluster that does not burst accepts it for compatibility with older
	// manifests, and it has no effect: Flux reads each node's cores from the node.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Cores int32 `json:"cores,omitempty"`

	// fluxUser is accepted for compatibility with older manifests and has no effect.
	// +optional
	FluxUser *FluxUser `json:"fluxUser,omitempty"`

	// preCommand is the older form of commands.pre: a snippet run early in the entrypoint
	// script, before commands.pre.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	PreCommand string `json:"preCommand,omitempty"`

	// diagnostics is accepted for compatibility with older manifests and has no effect.
	// +optional
	Diagnostics bool `json:"diagnostics,omitempty"`
}

// PullPolicy is a Kubernetes image pull policy.
//
// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
type PullPolicy string

const (
	// PullAlways pulls the image every time a pod starts.
	PullAlways PullPolicy = "Always"
	// PullIfNotPresent pulls the image only when the node does not have it.
	PullIfNotPresent PullPolicy = "IfNotPresent"
	// PullNever never pulls; the image must be on the node.
	PullNever PullPolicy = "Never"
)

// Commands are shell snippets inserted into a container's entrypoint script.
type Commands struct {
	// init runs first, before anything else; a place to adjust PATH, PYTHONPATH or
	// LD_LIBRARY_PATH.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	Init string `json:"init,omitempty"`

	// pre runs on every broker after the Flux environment is set up, before the broker starts.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	Pre string `json:"pre,omitempty"`

	// brokerPre runs after pre on the lead broker (index 0) only.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	BrokerPre string `json:"brokerPre,omitempty"`

	// workerPre runs after pre on the other brokers only.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	WorkerPre string `json:"workerPre,omitempty"`

	// servicePre runs first in the entrypoint of a container that does not run Flux.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	ServicePre string `json:"servicePre,omitempty"`

	// post runs when the broker has exited, at the end of the entrypoint.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	Post string `json:"post,omitempty"`

	// prefix is put in front of the flux start, flux broker and flux submit commands, for a
	// wrapper that must run them (a storage driver, for example).
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Prefix string `json:"prefix,omitempty"`

	// script is a custom job script: it is written to a file, made executable and submitted
	// instead of command. The container that runs Flux cannot have both.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	Script string `json:"script,omitempty"`

	// runFluxAsRoot is accepted for compatibility with older manifests and has no effect.
	// +optional
	// +kubebuilder:default=false
	RunFluxAsRoot bool `json:"runFluxAsRoot,omitempty"`
}

// ContainerVolume mounts one existing volume into a container. Set one source: claimName,
// secretName, configMapName, hostPath, emptyDir or csiDriver.
//
// +kubebuilder:validation:XValidation:rule="(!has(self.claimName) && !has(self.hostPath)) || has(self.path)",message="a volume with claimName or hostPath also needs path, the mount point in the container"
type ContainerVolume struct {
	// path is where the volume is mounted in the container: an absolute path of printable
	// characters (no control or formatting characters), without .. elements.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:Pattern=`^(/([^/.\p{Cc}\p{Cf}\p{Zl}\p{Zp}][^/\p{Cc}\p{Cf}\p{Zl}\p{Zp}]*|[.]([^/.\p{Cc}\p{Cf}\p{Zl}\p{Zp}][^/\p{Cc}\p{Cf}\p{Zl}\p{Zp}]*)?|[.][.][^/\p{Cc}\p{Cf}\p{Zl}\p{Zp}]+)?)+$`
	Path string `json:"path,omitempty"`

	// readOnly mounts the volume read-only.
	// +optional
	// +kubebuilder:default=false
	ReadOnly bool `json:"readOnly,omitempty"`

	// claimName names an existing PersistentVolumeClaim.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ClaimName string `json:"claimName,omitempty"`

	// secretName names an existing Secret.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName,omitempty"`

	// configMapName names an existing ConfigMap. Set items to choose its keys.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ConfigMapName string `json:"configMapName,omitempty"`

	// items maps keys of the ConfigMap to file paths relative to path.
	// +optional
	Items map[string]string `json:"items,omitempty"`

	// hostPath is a directory of the node to mount: an absolute path of printable characters
	// (no control or formatting characters), without .. elements.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:Pattern=`^(/([^/.\p{Cc}\p{Cf}\p{Zl}\p{Zp}][^/\p{Cc}\p{Cf}\p{Zl}\p{Zp}]*|[.]([^/.\p{Cc}\p{Cf}\p{Zl}\p{Zp}][^/\p{Cc}\p{Cf}\p{Zl}\p{Zp}]*)?|[.][.][^/\p{Cc}\p{Cf}\p{Zl}\p{Zp}]+)?)+$`
	HostPath string `json:"hostPath,omitempty"`

	// emptyDir mounts a new empty directory.
	// +optional
	// +kubebuilder:default=false
	EmptyDir bool `json:"emptyDir,omitempty"`

	// emptyDirMedium is the medium of the empty directory; "memory" mounts a tmpfs at /dev/shm
	// that can use the node's shared memory.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	EmptyDirMedium string `json:"emptyDirMedium,omitempty"`

	// emptyDirSizeLimit caps the size of the empty directory, as a quantity such as "64Gi".
	// +optional
	// +kubebuilder:validation:MaxLength=64
	EmptyDirSizeLimit string `json:"emptyDirSizeLimit,omitempty"`

	// csiDriver names a CSI driver that provides an inline ephemeral volume.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	CSIDriver string `json:"csiDriver,omitempty"`

	// csiDriverAttributes are passed to the CSI driver.
	// +optional
	CSIDriverAttributes map[string]string `json:"csiDriverAttributes,omitempty"`
}

// SecretKey selects a key of an existing Secret for an environment variable.
type SecretKey struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key in the Secret whose value becomes the variable's value.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}

// LifeCycle holds commands for a container's lifecycle hooks.
type LifeCycle struct {
	// postStartExec is run in the container right after it starts.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	PostStartExec string `json:"postStartExec,omitempty"`

	// preStopExec is run in the container before it is stopped.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	PreStopExec string `json:"preStopExec,omitempty"`
}

// ContainerSecurityContext is a Kubernetes container security context, plus addCapabilities,
// the shorthand of older manifests.
type ContainerSecurityContext struct {
	corev1.SecurityContext `json:",inline"`

	// addCapabilities are Linux capabilities added to the container, such as SYS_PTRACE; the
	// same as capabilities.add.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=64
	AddCapabilities []string `json:"addCapabilities,omitempty"`
}

// FluxUser names the user Flux ran as in older versions of the Flux Operator.
type FluxUser struct {
	// name of the user.
	// +optional
	// +kubebuilder:default=flux
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name,omitempty"`

	// uid of the user.
	// +optional
	// +kubebuilder:default=1000
	// +kubebuilder:validation:Minimum=0
	UID int32 `json:"uid,omitempty"`
}
