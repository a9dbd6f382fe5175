package v1alpha2

import (
	corev1 "k8s.io/api/core/v1"
)

// FluxSpec holds the settings of the Flux instance that apply to every broker of a MiniCluster.
type FluxSpec struct {
	// container is the init container that provides Flux (the "flux view") to the application
	// container, and writes the brokers' configuration.
	// +optional
	// +kubebuilder:default={}
	Container FluxView `json:"container,omitzero"`

	// arch selects the build of the small helper binaries used by the entrypoint scripts; set
	// it to "arm" for ARM nodes.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Arch string `json:"arch,omitempty"`

	// submitCommand replaces 'flux submit' when the command of the Flux container is submitted,
	// for example 'flux mini submit' for an old Flux.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	SubmitCommand string `json:"submitCommand,omitempty"`

	// wrap is passed to 'flux start --wrap=' as is: a comma-separated command that wraps the
	// broker, for example "strace,-e,network,-tt".
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Wrap string `json:"wrap,omitempty"`

	// connectTimeout is the brokers' ZeroMQ connect timeout (tbon.connect_timeout), a Flux
	// duration such as "5s" or "500ms". An empty string leaves the attribute unset.
	// +optional
	// +kubebuilder:default="5s"
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h|d)?)?$`
	ConnectTimeout *string `json:"connectTimeout,omitempty"`

	// optionFlags are default job options for the Flux container's command, given as on the
	// command line, for example "-ompi=openmpi@5".
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	OptionFlags string `json:"optionFlags,omitempty"`

	// minimalService gives only the lead broker a DNS name in the headless Service, which is
	// all the other brokers need. Pods other than index 0 then cannot be reached by hostname.
	// +optional
	MinimalService bool `json:"minimalService,omitempty"`

	// disableSocket leaves the broker's local socket path to Flux instead of setting it.
	// +optional
	DisableSocket bool `json:"disableSocket,omitempty"`

	// topology is the tree the brokers form (tbon.topo), for example "kary:2" or "binomial".
	// Empty means fluxfed's tree: flat under rank 0 for this MiniCluster's own brokers and, for
	// each burst, its first broker under rank 0 and the rest under that first broker. A topology
	// that would give a burst broker a parent it cannot reach is refused (condition Failed).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Topology string `json:"topology,omitempty"`

	// noWaitSocket starts the command without first waiting for the broker's socket to appear.
	// +optional
	NoWaitSocket bool `json:"noWaitSocket,omitempty"`

	// completeWorkers lets a worker broker (index > 0) that exits end its pod successfully
	// instead of being restarted. Useful to drain and remove nodes when scaling down.
	// +optional
	CompleteWorkers bool `json:"completeWorkers,omitempty"`

	// logLevel is the brokers' log level, from 0 (emergencies only) to 7 (debug).
	// +optional
	// +kubebuilder:default=6
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=7
	LogLevel *int32 `json:"logLevel,omitempty"`

	// curveCert is an existing CURVE certificate for the brokers, in the format 'flux keygen'
	// writes. Prefer leaving it unset: fluxfed then generates one and keeps it in a Secret, and
	// shares it with the bursts itself. A certificate given here is stored in the MiniCluster
	// in clear text.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	CurveCert string `json:"curveCert,omitempty"`

	// scheduler configures the Fluxion scheduler.
	// +optional
	// +kubebuilder:default={}
	Scheduler Scheduler `json:"scheduler,omitzero"`

	// mungeSecret names a Secret holding a MUNGE key, mounted at /etc/munge/munge.key.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	MungeSecret string `json:"mungeSecret,omitempty"`

	// bursting reserves room in this Flux instance for brokers outside the MiniCluster, or,
	// with leadBroker, makes this MiniCluster join another one's instance.
	// +optional
	Bursting Bursting `json:"bursting,omitzero"`

	// brokerConfig replaces the generated broker configuration (broker.toml) entirely. It is
	// meant for experiments: the hosts, ports and certificate path must then match what the
	// MiniCluster runs.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	BrokerConfig string `json:"brokerConfig,omitempty"`

	// environment sets variables for the Flux processes started from the flux view. The names
	// are shell variable names; the prefix fluxfed_ is reserved for the entrypoint scripts.
	// +optional
	// +kubebuilder:validation:MaxProperties=256
	// +kubebuilder:validation:XValidation:rule=`self.all(k, k.matches('^[A-Za-z_][A-Za-z0-9_]*$') && !k.startsWith('fluxfed_'))`,message="environment: every name must be a shell variable name (letters, digits and _, not starting with a digit) and must not start with fluxfed_, which the entrypoint scripts reserve"
	Environment map[string]string `json:"environment,omitempty"`
}

// FluxView describes the init container that copies a build of Flux (a "view") into a volume
// shared with the application container, so the application image does not need Flux.
type FluxView struct {
	// disable expects the application container to bring its own Flux. The init container is
	// still run, to write the configuration files.
	// +optional
	// +kubebuilder:default=false
	Disable bool `json:"disable,omitempty"`

	// name of the init container.
	// +optional
	// +kubebuilder:default="flux-view"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name,omitempty"`

	// image providing the flux view. It should match the operating system of the application
	// container; the converged-computing/flux-view-rocky and flux-view-ubuntu images come in
	// several tags (tag-9, tag-8, tag-noble, tag-jammy, tag-focal, and arm- variants).
	// +optional
	// +kubebuilder:default="ghcr.io/converged-computing/flux-view-rocky:tag-9"
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

	// workingDir is the working directory of the init container.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule=`self.startsWith('/') && !self.matches('[\\p{Cc}\\p{Cf}\\p{Zl}\\p{Zp}]|/[.][.](/|$)')`,message="workingDir must be an absolute path (starting with /) of printable characters: no control characters such as newline, tab or NUL, no invisible formatting characters such as bidirectional overrides, and no .. elements"
	WorkingDir string `json:"workingDir,omitempty"`

	// pythonPath is the PYTHONPATH under which Flux's Python bindings are found in the view,
	// for example /mnt/flux/view/lib/python3.11. Set it when the view's Python differs from the
	// image's default.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule=`self.startsWith('/') && !self.matches('[\\p{Cc}\\p{Cf}\\p{Zl}\\p{Zp}]|/[.][.](/|:|$)|:([^/]|$)')`,message="pythonPath must be absolute paths (each starting with /) separated by :, of printable characters: no control characters such as newline, tab or NUL, no invisible formatting characters such as bidirectional overrides, and no .. elements"
	PythonPath string `json:"pythonPath,omitempty"`

	// mountPath is where the view is mounted in the application container; its bin directory
	// is added to PATH. An absolute path other than /, without commas or white space: Flux
	// splits broker options at commas, and its rc1 loads the crontabs of the broker's cron
	// directory, which lies under mountPath, with a shell command that does not quote their
	// paths.
	// +optional
	// +kubebuilder:default="/mnt/flux"
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule=`self.startsWith('/') && !self.matches('[\\p{Cc}\\p{Cf}\\p{Z},]|/[.][.](/|$)') && self.matches('[^/]')`,message="mountPath must be an absolute path (starting with /) of printable characters other than white space: no spaces of any kind (no-break and ideographic spaces included), no control characters such as newline, tab or NUL, no invisible formatting characters such as bidirectional overrides, no .. elements and no commas (Flux splits broker options at commas, and its startup scripts split the path at white space); / alone is not allowed"
	MountPath string `json:"mountPath,omitempty"`

	// resources of the init container. Give cpu and memory requests equal to the limits, here
	// and on every container, for pods of the Guaranteed QoS class.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitzero"`

	// securityContext of the init container.
	// +optional
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`
}

// Scheduler configures the Fluxion scheduler of the instance.
type Scheduler struct {
	// simple uses sched-simple instead of Fluxion. It does not schedule GPUs.
	// +optional
	Simple bool `json:"simple,omitempty"`

	// queuePolicy is Fluxion's queue policy (sched-fluxion-qmanager queue-policy).
	// +optional
	// +kubebuilder:default=fcfs
	QueuePolicy QueuePolicy `json:"queuePolicy,omitempty"`
}

// QueuePolicy is a Fluxion queue policy.
//
// +kubebuilder:validation:Enum=fcfs;easy;hybrid;conservative
type QueuePolicy string

const (
	// QueuePolicyFCFS runs jobs strictly in submission order.
	QueuePolicyFCFS QueuePolicy = "fcfs"
	// QueuePolicyEasy backfills jobs that do not delay the first job in the queue.
	QueuePolicyEasy QueuePolicy = "easy"
	// QueuePolicyHybrid backfills while protecting a configurable number of queued jobs.
	QueuePolicyHybrid QueuePolicy = "hybrid"
	// QueuePolicyConservative backfills only jobs that delay no queued job.
	QueuePolicyConservative QueuePolicy = "conservative"
)
