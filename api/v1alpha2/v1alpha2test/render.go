package v1alpha2test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// RenderCase is one representative MiniCluster of the renderers' golden tests: package scripts
// and package workload both render every case, so that the two sets of golden files describe
// the same pods.
type RenderCase struct {
	// Name names the case; the golden files of the case are named after it.
	Name        string
	MiniCluster *fluxv1alpha2.MiniCluster
}

// Stored starts a MiniCluster named name as the API server stores it: in namespace hpc, with the
// schema's defaults applied (the flux view container, a connect timeout, log level 6, the fcfs
// queue policy, one task, headless Service flux-service) and one container
// (ghcr.io/rse-ops/accounting:app-latest, no command). As a typed client reads it, it has no
// TypeMeta.
func Stored(name string) *Builder {
	return &Builder{mc: fluxv1alpha2.MiniCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "hpc"},
		Spec: fluxv1alpha2.MiniClusterSpec{
			Size:            1,
			Tasks:           ptr.To[int32](1),
			DeadlineSeconds: 31500000,
			Network:         fluxv1alpha2.Network{HeadlessName: "flux-service"},
			Containers:      []fluxv1alpha2.Container{{Image: "ghcr.io/rse-ops/accounting:app-latest"}},
			Flux: fluxv1alpha2.FluxSpec{
				Container: fluxv1alpha2.FluxView{
					Name:      "flux-view",
					Image:     "ghcr.io/converged-computing/flux-view-rocky:tag-9",
					MountPath: "/mnt/flux",
				},
				ConnectTimeout: ptr.To("5s"),
				LogLevel:       ptr.To[int32](6),
				Scheduler:      fluxv1alpha2.Scheduler{QueuePolicy: fluxv1alpha2.QueuePolicyFCFS},
			},
		},
	}}
}

// stored is Stored(name) with change applied to its spec.
func stored(name string, change func(*fluxv1alpha2.MiniClusterSpec)) *fluxv1alpha2.MiniCluster {
	return Stored(name).Spec(change).Obj()
}

// RenderCases returns the representative MiniClusters: a root of one and of several pods, a
// burst child, and one case for each group of spec fields the renderers read.
func RenderCases() []RenderCase {
	return []RenderCase{
		{
			Name: "root-size-1",
			MiniCluster: stored("hello", func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Containers[0].Command = "echo hello world"
			}),
		},
		{
			Name: "root-size-4-tasks",
			MiniCluster: stored("lammps", func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Size = 4
				s.Tasks = ptr.To[int32](16)
				s.Flux.OptionFlags = "-ompi=openmpi@5 -o cpu-affinity=per-task"
				s.Flux.LogLevel = ptr.To[int32](7)
				s.Containers[0] = fluxv1alpha2.Container{
					Name:       "lammps",
					Image:      "ghcr.io/rse-ops/lammps-mpich:tag-latest",
					WorkingDir: "/opt/lammps/examples/reaxff/HNS",
					Command:    "lmp -v x 2 -v y 2 -v z 2 -in in.reaxc.hns -nocite",
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")},
						Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")},
					},
				}
			}),
		},
		{
			Name: "burst-child",
			MiniCluster: stored("burst-0", func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Size = 3
				s.Flux.Bursting = fluxv1alpha2.Bursting{
					LeadBroker: &fluxv1alpha2.LeadBroker{Address: "10.0.0.5", Name: "flux-sample", Size: 2, Port: 30093},
					Clusters:   []fluxv1alpha2.Burst{{Name: "burst-0", Size: 3}},
				}
				s.Containers[0].Name = "lammps"
				s.Containers[0].Image = "ghcr.io/rse-ops/lammps-mpich:tag-latest"
			}),
		},
		{
			Name: "max-size",
			MiniCluster: stored("elastic", func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Size = 2
				s.MaxSize = 6
				s.Flux.CompleteWorkers = true
				s.Containers[0].Command = "hostname"
			}),
		},
		{
			Name: "minimal-service",
			MiniCluster: stored("minimal", func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Size = 3
				s.Flux.MinimalService = true
				s.Containers[0].Command = "hostname"
			}),
		},
		{
			Name: "disable-view",
			MiniCluster: stored("own-flux", func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Size = 2
				s.Flux.Container.Disable = true
				s.Flux.Container.Image = "ubuntu:focal"
				s.Containers[0].Image = "ghcr.io/rse-ops/lammps:flux-sched-focal"
				s.Containers[0].Command = "lmp -in in.reaxc.hns"
			}),
		},
		{
			Name: "batch",
			MiniCluster: stored("batch", func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Size = 2
				s.Tasks = ptr.To[int32](0)
				s.Containers[0] = fluxv1alpha2.Container{
					Image:   "rockylinux:9",
					Batch:   true,
					Logs:    "/tmp/another-out",
					Command: "echo hello world 1\n\necho \"hello world 2\" > /dev/null\necho $HOSTNAME 3\n",
				}
			}),
		},
		{
			Name: "batch-raw",
			MiniCluster: stored("staging", func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Size = 2
				s.Containers[0] = fluxv1alpha2.Container{
					Image:    "ghcr.io/rse-ops/singularity:tag-mamba",
					Batch:    true,
					BatchRaw: true,
					Command: "flux filemap map -C /data mpi.sif\n" +
						"flux exec -x 0 -r all flux filemap get -C /data\n" +
						"flux submit -N 2 singularity exec /data/mpi.sif /opt/mpitest\n" +
						"flux queue idle\n",
				}
			}),
		},
		{
			Name: "interactive",
			MiniCluster: stored("interactive", func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Size = 2
				s.Interactive = true
				s.Containers[0].Name = "lammps"
				s.Containers[0].Command = "this is ignored: interactive runs no job"
			}),
		},
		{
			Name: "launcher",
			MiniCluster: stored("workflow", func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Size = 2
				s.Flux.Wrap = "strace,-e,network,-tt"
				s.Containers[0] = fluxv1alpha2.Container{
					Image:    "snakemake/snakemake:stable",
					Launcher: true,
					Command:  "snakemake --cores 1 --jobs 2 --executor flux",
					Commands: fluxv1alpha2.Commands{Prefix: "fusion --debug"},
				}
			}),
		},
		{
			Name: "services",
			MiniCluster: stored("web-demo", func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Size = 2
				s.Flux.NoWaitSocket = false
				s.Containers = []fluxv1alpha2.Container{
					{
						Name:    "client",
						Image:   "rockylinux:9",
						RunFlux: true,
						Command: "curl --silent --retry 12 http://web-demo-services.flux-service/",
					},
					{
						Name:     "monitor",
						Image:    "ghcr.io/converged-computing/flux-monitor:latest",
						Command:  `flux proxy "$fluxsocket" flux resource list`,
						Commands: fluxv1alpha2.Commands{ServicePre: "echo monitor starting", Post: "echo monitor done"},
						Ports:    []int32{9090},
					},
					{
						Name:             "raw",
						Image:            "busybox:1.36",
						Command:          "sleep infinity",
						NoWrapEntrypoint: true,
					},
					{Name: "registry", Image: "registry:2"},
				}
				s.Services = []fluxv1alpha2.Container{
					{Name: "nginx", Image: "nginx:1.27", Ports: []int32{80}},
					{
						Name:     "registry",
						Image:    "ghcr.io/oras-project/registry:latest",
						Command:  "registry serve /etc/docker/registry/config.yml",
						Commands: fluxv1alpha2.Commands{Init: "mkdir -p /var/lib/registry", ServicePre: "echo 'registry it is'"},
						Ports:    []int32{5000},
					},
				}
			}),
		},
		{
			Name: "volumes",
			MiniCluster: stored("volumes-demo", func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Size = 2
				s.Logging.Quiet = true
				s.Containers[0] = fluxv1alpha2.Container{
					Name:    "app",
					Image:   "rockylinux:9",
					Command: "df -h /scratch /dev/shm /host-data /data /etc/app /etc/app-credentials",
					Volumes: map[string]fluxv1alpha2.ContainerVolume{
						"scratch":         {EmptyDir: true, EmptyDirSizeLimit: "10Gi", Path: "/scratch"},
						"shm":             {EmptyDir: true, EmptyDirMedium: "memory", EmptyDirSizeLimit: "1Gi"},
						"host-data":       {HostPath: "/var/tmp/flux-data", Path: "/host-data"},
						"shared-data":     {ClaimName: "shared-data", Path: "/data"},
						"app-config":      {ConfigMapName: "app-config", Path: "/etc/app", Items: map[string]string{"settings.ini": "settings.ini"}},
						"app-credentials": {SecretName: "app-credentials", Path: "/etc/app-credentials", ReadOnly: true},
					},
					ExistingVolumes: map[string]fluxv1alpha2.ContainerVolume{
						"fuse": {CSIDriver: "gcsfuse.csi.storage.gke.io", CSIDriverAttributes: map[string]string{"bucketName": "flux-data"}, Path: "/bucket"},
					},
				}
			}),
		},
		{
			Name: "custom-commands",
			MiniCluster: stored("hooks", func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Size = 2
				s.Logging = fluxv1alpha2.Logging{Strict: true, Timed: true, Debug: true, Zeromq: true}
				s.Flux.SubmitCommand = "flux mini submit"
				s.Flux.ConnectTimeout = ptr.To("")
				s.Flux.Environment = map[string]string{
					"FI_EFA_USE_DEVICE_RDMA": "1",
					"GREETING":               `it's "quoted" $HOME ` + "`date`",
				}
				s.Containers[0] = fluxv1alpha2.Container{
					Image:      "ghcr.io/rse-ops/lammps-mpich:tag-latest",
					Command:    `echo "rank $FLUX_TASK_RANK" 'single' | tee -a /tmp/out.txt`,
					PreCommand: "asFlux=\"sudo -E\"\necho pre-command",
					Commands: fluxv1alpha2.Commands{
						Init:          "export LD_LIBRARY_PATH=/opt/conda/lib",
						Pre:           "echo 'pre with a quote: '\\''x'\\'''",
						BrokerPre:     "echo I am the lead broker",
						WorkerPre:     "echo I am a worker; sleep 5",
						Post:          "echo Finishing up",
						Prefix:        `env "LABEL=a b"`,
						RunFluxAsRoot: true,
					},
					FluxUser:    &fluxv1alpha2.FluxUser{Name: "fluxuser", UID: 1002},
					Cores:       4,
					Diagnostics: true,
					Environment: map[string]string{"APP_MODE": "test"},
				}
			}),
		},
		{
			Name: "job-script",
			MiniCluster: stored("scripted", func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Size = 2
				s.Tasks = ptr.To[int32](2)
				s.Containers[0].Commands.Script = "#!/bin/bash\necho \"This is rank \\${FLUX_TASK_RANK}\"\nFLUXFED_SCRIPT_EOF\necho done\n"
			}),
		},
		{
			Name: "archive",
			MiniCluster: stored("stateful", func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Size = 2
				s.Interactive = true
				s.Archive.Path = "/state/archive.tar.gz"
				s.Containers[0].Volumes = map[string]fluxv1alpha2.ContainerVolume{
					"state": {ClaimName: "flux-state", Path: "/state"},
				}
			}),
		},
		{
			Name: "pod-options",
			MiniCluster: stored("placed", func(s *fluxv1alpha2.MiniClusterSpec) {
				s.Size = 2
				s.Tasks = ptr.To[int32](4)
				s.JobLabels = map[string]string{"app.kubernetes.io/part-of": "placement-demo"}
				s.BackoffLimit = 3
				s.DeadlineSeconds = 3600
				s.ShareProcessNamespace = true
				s.Network.HeadlessName = "placed-net"
				s.Flux.DisableSocket = true
				s.Flux.MungeSecret = "munge-key"
				s.Flux.Container.PullAlways = true
				s.Flux.Container.ImagePullSecret = "view-pull"
				s.Flux.Container.PythonPath = "/mnt/flux/view/lib/python3.11/site-packages"
				s.Flux.Container.Resources = corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
				}
				s.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu-template")}}
				s.Pod = fluxv1alpha2.MiniClusterPod{
					Labels:                       map[string]string{"team": "hpc", fluxv1alpha2.LabelMiniCluster: "not-this"},
					Annotations:                  map[string]string{"example.com/cost-center": "research"},
					RestartPolicy:                fluxv1alpha2.RestartNever,
					ServiceAccountName:           "flux-runner",
					AutomountServiceAccountToken: true,
					RuntimeClassName:             "nvidia",
					SchedulerName:                "fluence",
					NodeSelector:                 map[string]string{"kubernetes.io/os": "linux"},
					NodeAffinity:                 map[string][]string{"node.kubernetes.io/instance-type": {"c2d-standard-112", "c2d-standard-56"}},
					Tolerations: []fluxv1alpha2.Toleration{
						{Key: "nvidia.com/gpu", Operator: fluxv1alpha2.TolerationOpExists, Effect: fluxv1alpha2.TaintNoSchedule},
						{Key: "dedicated", Operator: fluxv1alpha2.TolerationOpEqual, Value: "hpc"},
					},
					DNSPolicy:       fluxv1alpha2.DNSClusterFirst,
					HostIPC:         true,
					Resources:       corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("500M")},
					SecurityContext: &corev1.PodSecurityContext{FSGroup: ptr.To[int64](1000)},
				}
				s.Containers[0] = fluxv1alpha2.Container{
					Name:            "app",
					Image:           "rockylinux:9",
					Command:         "nproc",
					ImagePullSecret: "app-pull",
					PullAlways:      true,
					ImagePullPolicy: fluxv1alpha2.PullNever,
					Ports:           []int32{8080, 8443},
					Environment:     map[string]string{"B": "2", "A": "1"},
					Secrets:         map[string]fluxv1alpha2.SecretKey{"TOKEN": {Name: "app-credentials", Key: "token"}},
					LifeCycle:       fluxv1alpha2.LifeCycle{PostStartExec: "echo started > /tmp/started", PreStopExec: "flux shutdown --quiet"},
					SecurityContext: &fluxv1alpha2.ContainerSecurityContext{
						SecurityContext: corev1.SecurityContext{
							Privileged:   ptr.To(true),
							Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}},
						},
						AddCapabilities: []string{"SYS_PTRACE", "NET_ADMIN"},
					},
					Resources: corev1.ResourceRequirements{
						Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")},
						Claims: []corev1.ResourceClaim{{Name: "gpu"}},
					},
				}
			}),
		},
	}
}

// RenderCaseNamed returns the MiniCluster of the render case named name, a copy of its own; it
// fails t when there is no such case.
func RenderCaseNamed(t testing.TB, name string) *fluxv1alpha2.MiniCluster {
	t.Helper()
	for _, c := range RenderCases() {
		if c.Name == name {
			return c.MiniCluster
		}
	}
	t.Fatalf("no render case %q", name)
	return nil
}
