// Package v1alpha2test holds the MiniClusters of every package's tests, one family of fixtures:
//
//   - builders: MiniCluster (a one-container MiniCluster as a user writes it), Stored (as the
//     API server stores it, defaults applied), Child (the burst child the hub pushes for a
//     root's burst) and Edit;
//   - named cases: RenderCases, the representative MiniClusters that the renderers' golden files
//     describe (package scripts and package workload); Federations, the roots and children that
//     brokerconf's broker.toml golden files are rendered from and e2e/fluxcheck checks;
//     InvalidCases, specs the API server refuses, with the field and message it gives (the API's
//     tests send them to a kube-apiserver, member/admit's check that Admit refuses them alike);
//     HostileSpecs, hostile values in fields that reach scripts, files and pods.
//
// It is imported by tests only.
package v1alpha2test

import "strings"

// OneContainer is the YAML of a spec's containers: one container running hostname.
const OneContainer = "containers:\n- image: rockylinux:9\n  command: hostname\n"

const (
	name61 = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	name62 = name61 + "b"
)

// InvalidCase is a MiniCluster the API server refuses as Invalid, and one cause it gives.
type InvalidCase struct {
	Name string
	// MetaName is metadata.name; ObjectName falls back to Name with dashes when it is empty.
	MetaName string
	// Spec is the YAML of the spec.
	Spec string
	// Field is the path the API server names; Message is part of what it says there.
	Field   string
	Message string
}

// ObjectName returns the case's metadata.name: MetaName, else Name with dashes for spaces.
func (c InvalidCase) ObjectName() string {
	if c.MetaName != "" {
		return c.MetaName
	}
	return strings.ReplaceAll(c.Name, " ", "-")
}

// InvalidCases returns the invalid specs, grouped by the part of the spec they get wrong.
func InvalidCases() []InvalidCase {
	burst := func(entries string) string {
		return OneContainer + "flux:\n  bursting:\n    clusters:\n" + entries
	}
	return []InvalidCase{
		// Sizes.
		{Name: "size zero", Spec: "size: 0\n" + OneContainer, Field: "spec.size", Message: "spec.size in body should be greater than or equal to 1"},
		{Name: "size above maxSize", Spec: "size: 4\nmaxSize: 2\n" + OneContainer, Field: "spec.maxSize", Message: "spec.size must not exceed spec.maxSize"},
		{Name: "minSize above size", Spec: "size: 2\nminSize: 3\n" + OneContainer, Field: "spec.minSize", Message: "spec.minSize must not be larger than spec.size"},
		{Name: "negative tasks", Spec: "tasks: -1\n" + OneContainer, Field: "spec.tasks", Message: "greater than or equal to 0"},
		{Name: "zero deadline", Spec: "deadlineSeconds: 0\n" + OneContainer, Field: "spec.deadlineSeconds", Message: "greater than or equal to 1"},
		{Name: "size not an integer", Spec: "size: two\n" + OneContainer, Field: "spec.size", Message: `Invalid value: "string": spec.size in body must be of type integer: "string"`},
		{Name: "fractional size", Spec: "size: 2.5\n" + OneContainer, Field: "spec.size", Message: "must be of type int32"},
		{Name: "size beyond int32", Spec: "size: 3000000000\n" + OneContainer, Field: ".spec.size", Message: "should be less than or equal to 2147483647"},

		// Containers.
		{Name: "no containers", Spec: "containers: []\n", Field: "spec.containers", Message: "at least 1 items"},
		{Name: "containers missing", Spec: "size: 2\n", Field: "spec.containers", Message: "Required value"},
		{Name: "two flux containers", Spec: "containers:\n- {image: a, runFlux: true}\n- {image: b, name: b, runFlux: true}\n", Field: "spec.containers", Message: "at most one container may set runFlux: true"},
		{Name: "no flux container among two", Spec: "containers:\n- {image: a, name: a}\n- {image: b, name: b}\n", Field: "spec.containers", Message: "one of them must set runFlux: true"},
		{Name: "unnamed sidecar", Spec: "containers:\n- {image: a, runFlux: true}\n- {image: b}\n", Field: "spec.containers", Message: "every container that does not run Flux needs a name"},
		{Name: "command and script", Spec: "containers:\n- image: a\n  command: hostname\n  commands: {script: 'echo hi'}\n", Field: "spec.containers", Message: "cannot set both command and commands.script"},
		{Name: "command and script with runFlux", Spec: "containers:\n- image: a\n  runFlux: true\n  command: hostname\n  commands: {script: 'echo hi'}\n- {image: b, name: b}\n", Field: "spec.containers", Message: "cannot set both command and commands.script"},
		{Name: "duplicate container names", Spec: "containers:\n- {image: a, name: x, runFlux: true}\n- {image: b, name: x}\n", Field: "spec.containers", Message: "container names must be unique"},
		{Name: "container name not a DNS label", Spec: "containers:\n- {image: a, name: App}\n", Field: "spec.containers[0].name", Message: "should match"},
		{Name: "launcher and batch", Spec: "containers:\n- {image: a, launcher: true, batch: true}\n", Field: "spec.containers[0]", Message: "launcher and batch cannot both be true"},
		{Name: "claim without path", Spec: "containers:\n- image: a\n  volumes:\n    data: {claimName: data}\n", Field: "spec.containers[0].volumes[data]", Message: "also needs path"},
		{Name: "volume name not a DNS label", Spec: "containers:\n- image: a\n  volumes:\n    Data: {path: /data}\n", Field: "spec.containers[0].volumes", Message: "every volume name must be a DNS label"},
		{Name: "volume in volumes and existingVolumes", Spec: "containers:\n- image: a\n  volumes:\n    data: {path: /data}\n  existingVolumes:\n    data: {path: /data2}\n", Field: "spec.containers[0]", Message: "must not appear in both volumes and existingVolumes"},
		{Name: "unnamed service", Spec: OneContainer + "services:\n- {image: nginx}\n", Field: "spec.services", Message: "every service container needs a name"},
		{Name: "port zero", Spec: "containers:\n- {image: a, ports: [0]}\n", Field: "spec.containers[0].ports[0]", Message: "greater than or equal to 1"},
		{Name: "unknown pull policy", Spec: "containers:\n- {image: a, imagePullPolicy: Sometimes}\n", Field: "spec.containers[0].imagePullPolicy", Message: `supported values: "Always", "IfNotPresent", "Never"`},
		{Name: "bad cpu quantity", Spec: "containers:\n- image: a\n  resources: {limits: {cpu: lots}}\n", Field: "spec.containers[0].resources.limits.cpu", Message: "should match"},

		// Bursting.
		{Name: "duplicate burst names", Spec: burst("    - {name: b, size: 1}\n    - {name: b, size: 2}\n"), Field: "spec.flux.bursting.clusters[1]", Message: "Duplicate value"},
		{Name: "burst name not a DNS label", Spec: burst("    - {name: Burst_0, size: 1}\n"), Field: "spec.flux.bursting.clusters[0].name", Message: "should match"},
		{Name: "burst named like the root", MetaName: "same", Spec: burst("    - {name: same, size: 1}\n"), Field: "spec.flux.bursting.clusters", Message: "must differ from metadata.name"},
		{Name: "burst size zero without maxSize", Spec: burst("    - {name: b, size: 0}\n"), Field: "spec.flux.bursting.clusters[0].size", Message: "size 0 reserves no rank: set maxSize"},
		{Name: "burst size negative", Spec: burst("    - {name: b, size: -1, maxSize: 2}\n"), Field: "spec.flux.bursting.clusters[0].size", Message: "greater than or equal to 0"},
		{Name: "burst size above maxSize", Spec: burst("    - {name: b, size: 3, maxSize: 2}\n"), Field: "spec.flux.bursting.clusters[0].size", Message: "size must not exceed maxSize"},
		{Name: "burst maxSize zero", Spec: burst("    - {name: b, size: 1, maxSize: 0}\n"), Field: "spec.flux.bursting.clusters[0].maxSize", Message: "greater than or equal to 1"},
		{Name: "burst hostnames too long for maxSize", Spec: burst("    - {name: " + name62 + ", size: 1, maxSize: 11}\n"), Field: "spec.flux.bursting.clusters[0].name", Message: "every burst hostname '<name>-<index>' must fit in 63 characters"},
		{Name: "burst without size", Spec: burst("    - {name: b}\n"), Field: "spec.flux.bursting.clusters[0].size", Message: "Required value"},
		{Name: "burst without name", Spec: burst("    - {size: 2}\n"), Field: "spec.flux.bursting.clusters[0].name", Message: "Required value"},
		{Name: "burst hostnames too long", Spec: burst("    - {name: " + name62 + ", size: 11}\n"), Field: "spec.flux.bursting.clusters[0].name", Message: "every burst hostname '<name>-<index>' must fit in 63 characters"},
		{Name: "cluster not a DNS name", Spec: burst("    - {name: b, size: 1, cluster: Gke_West}\n"), Field: "spec.flux.bursting.clusters[0].cluster", Message: "should match"},
		{Name: "namespace not a DNS label", Spec: burst("    - {name: b, size: 1, cluster: w, namespace: a.b}\n"), Field: "spec.flux.bursting.clusters[0].namespace", Message: "should match"},
		{Name: "burst resources without cores", Spec: burst("    - {name: b, size: 1, resources: {gpus: 2}}\n"), Field: "spec.flux.bursting.clusters[0].resources.cores", Message: "Required value"},
		{Name: "burst resources zero cores", Spec: burst("    - {name: b, size: 1, resources: {cores: 0}}\n"), Field: "spec.flux.bursting.clusters[0].resources.cores", Message: "greater than or equal to 1"},
		{Name: "burst resources too many cores", Spec: burst("    - {name: b, size: 1, resources: {cores: 65537}}\n"), Field: "spec.flux.bursting.clusters[0].resources.cores", Message: "less than or equal to 65536"},
		{Name: "burst resources negative gpus", Spec: burst("    - {name: b, size: 1, resources: {cores: 4, gpus: -1}}\n"), Field: "spec.flux.bursting.clusters[0].resources.gpus", Message: "greater than or equal to 0"},
		{Name: "burst resources too many gpus", Spec: burst("    - {name: b, size: 1, resources: {cores: 4, gpus: 1025}}\n"), Field: "spec.flux.bursting.clusters[0].resources.gpus", Message: "less than or equal to 1024"},
		{Name: "burst resources cores as a quantity", Spec: burst("    - {name: b, size: 1, resources: {cores: 500m}}\n"), Field: "spec.flux.bursting.clusters[0].resources.cores", Message: "must be of type integer"},
		{Name: "hostlist and clusters", Spec: OneContainer + "flux:\n  bursting:\n    hostlist: 'x-[0-3]'\n    clusters:\n    - {name: b, size: 1}\n", Field: "spec.flux.bursting", Message: "set either hostlist or clusters, not both"},
		{Name: "cluster on a burst child", Spec: OneContainer + "flux:\n  bursting:\n    leadBroker: {name: root, address: 1.2.3.4, size: 2}\n    clusters:\n    - {name: cluster-on-a-burst-child, size: 1, cluster: west}\n", Field: "spec.flux.bursting.clusters", Message: "a burst child does not burst further"},
		{Name: "lead broker port zero", Spec: OneContainer + "flux:\n  bursting:\n    leadBroker: {name: root, address: 1.2.3.4, size: 2, port: 0}\n", Field: "spec.flux.bursting.leadBroker.port", Message: "greater than or equal to 1"},
		{Name: "lead broker port too high", Spec: OneContainer + "flux:\n  bursting:\n    leadBroker: {name: root, address: 1.2.3.4, size: 2, port: 70000}\n", Field: "spec.flux.bursting.leadBroker.port", Message: "less than or equal to 65535"},
		{Name: "lead broker without address", Spec: OneContainer + "flux:\n  bursting:\n    leadBroker: {name: root, size: 2}\n", Field: "spec.flux.bursting.leadBroker.address", Message: "Required value"},
		{Name: "lead broker IPv6 address", Spec: OneContainer + "flux:\n  bursting:\n    leadBroker: {name: root, size: 2, address: 'fd00::1'}\n", Field: "spec.flux.bursting.leadBroker.address", Message: "should match"},
		{Name: "lead broker hostnames too long", Spec: OneContainer + "flux:\n  bursting:\n    leadBroker: {name: " + name62 + ", address: 1.2.3.4, size: 11}\n", Field: "spec.flux.bursting.leadBroker.name", Message: "leadBroker.name is too long for its size"},
		{Name: "expose type ClusterIP", Spec: OneContainer + "flux:\n  bursting:\n    expose: {type: ClusterIP}\n", Field: "spec.flux.bursting.expose.type", Message: `supported values: "NodePort", "LoadBalancer"`},
		{Name: "expose nodePort too high", Spec: OneContainer + "flux:\n  bursting:\n    expose: {nodePort: 70000}\n", Field: "spec.flux.bursting.expose.nodePort", Message: "less than or equal to 65535"},
		{Name: "expose IPv6 address", Spec: OneContainer + "flux:\n  bursting:\n    expose: {address: 'fd00::1'}\n", Field: "spec.flux.bursting.expose.address", Message: "should match"},

		// Names: every pod hostname '<name>-<index>' must be a DNS label.
		{Name: "root hostnames too long for maxSize", MetaName: name61, Spec: "size: 2\nmaxSize: 100\n" + OneContainer, Field: "metadata", Message: "every pod hostname '<name>-<index>' must fit in 63 characters"},
		{Name: "root hostnames too long for size", MetaName: name61, Spec: "size: 11\n" + OneContainer, Field: "metadata", Message: "every pod hostname '<name>-<index>' must fit in 63 characters"},
		{Name: "root name with a dot", MetaName: "a.b", Spec: OneContainer, Field: "metadata", Message: "metadata.name must be a DNS label"},
		{Name: "root name in capitals", MetaName: "Hello", Spec: OneContainer, Field: "metadata.name", Message: "a lowercase RFC 1123 subdomain"},

		// Flux settings.
		{Name: "unknown queue policy", Spec: OneContainer + "flux:\n  scheduler: {queuePolicy: lifo}\n", Field: "spec.flux.scheduler.queuePolicy", Message: `supported values: "fcfs", "easy", "hybrid", "conservative"`},
		{Name: "log level above 7", Spec: OneContainer + "flux:\n  logLevel: 8\n", Field: "spec.flux.logLevel", Message: "less than or equal to 7"},
		{Name: "connect timeout not a duration", Spec: OneContainer + "flux:\n  connectTimeout: soon\n", Field: "spec.flux.connectTimeout", Message: "should match"},
		{Name: "relative flux mount path", Spec: OneContainer + "flux:\n  container: {mountPath: mnt/flux}\n", Field: "spec.flux.container.mountPath", Message: "mountPath must be an absolute path"},
		{Name: "headless name not a DNS label", Spec: OneContainer + "network: {headlessName: Flux_Service}\n", Field: "spec.network.headlessName", Message: "should match"},

		// Pod settings.
		{Name: "restart policy Always", Spec: OneContainer + "pod: {restartPolicy: Always}\n", Field: "spec.pod.restartPolicy", Message: `supported values: "OnFailure", "Never"`},
		{Name: "unknown toleration effect", Spec: OneContainer + "pod:\n  tolerations: [{key: a, effect: Sometimes}]\n", Field: "spec.pod.tolerations[0].effect", Message: "Unsupported value"},
	}
}
