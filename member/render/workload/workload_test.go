package workload

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
)

var update = flag.Bool("update", false, "rewrite golden files")

// golden compares obj, as YAML, with testdata/<dir>/<file>; -update rewrites the file. A nil
// obj means the file must not exist.
func golden(t *testing.T, dir, file string, obj any) {
	t.Helper()
	path := filepath.Join("testdata", dir, file)
	if obj == nil {
		if *update {
			require.NoError(t, os.RemoveAll(path))
		}
		require.NoFileExists(t, path)
		return
	}
	got, err := yaml.Marshal(obj)
	require.NoError(t, err)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "%s differs from its golden file; rerun with -update if the change is intended", path)
}

// TestGolden renders the Job, the headless Service and the services Job of every fixture and
// compares them with testdata/<case>/*.yaml.
func TestGolden(t *testing.T) {
	for _, c := range v1alpha2test.RenderCases() {
		t.Run(c.Name, func(t *testing.T) {
			job, err := Job(c.MiniCluster)
			require.NoError(t, err)
			golden(t, c.Name, "job.yaml", job)
			golden(t, c.Name, "headless-service.yaml", HeadlessService(c.MiniCluster))
			services, err := Services(c.MiniCluster)
			require.NoError(t, err)
			if services == nil {
				golden(t, c.Name, "services-job.yaml", nil)
			} else {
				golden(t, c.Name, "services-job.yaml", services)
			}
		})
	}
}

// ptrTo returns a pointer to v.
func ptrTo[T any](v T) *T { return &v }

// typedJob converts the apply configuration back to a batch/v1 Job, to inspect it.
func typedJob(t *testing.T, mc *fluxv1alpha2.MiniCluster) *batchv1.Job {
	t.Helper()
	ac, err := Job(mc)
	require.NoError(t, err)
	data, err := json.Marshal(ac)
	require.NoError(t, err)
	job := &batchv1.Job{}
	require.NoError(t, json.Unmarshal(data, job))
	return job
}

func typedServices(t *testing.T, mc *fluxv1alpha2.MiniCluster) *batchv1.Job {
	t.Helper()
	ac, err := Services(mc)
	require.NoError(t, err)
	require.NotNil(t, ac)
	data, err := json.Marshal(ac)
	require.NoError(t, err)
	job := &batchv1.Job{}
	require.NoError(t, json.Unmarshal(data, job))
	return job
}

func containerNamed(t *testing.T, cs []corev1.Container, name string) corev1.Container {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q in %v", name, cs)
	return corev1.Container{}
}

// TestScalingChangesOnlyCompletionsAndParallelism is the unit-level half of the scaling
// contract (TestApply checks it against an API server): two sizes differ only in
// spec.completions and spec.parallelism.
func TestScalingChangesOnlyCompletionsAndParallelism(t *testing.T) {
	for _, name := range []string{"root-size-4-tasks", "max-size", "burst-child", "services"} {
		t.Run(name, func(t *testing.T) {
			small := v1alpha2test.RenderCaseNamed(t, name)
			large := small.DeepCopy()
			small.Spec.Size = 1
			large.Spec.Size = 5
			a, b := typedJob(t, small), typedJob(t, large)
			require.Equal(t, int32(1), *a.Spec.Completions)
			require.Equal(t, int32(1), *a.Spec.Parallelism)
			require.Equal(t, int32(5), *b.Spec.Completions)
			require.Equal(t, int32(5), *b.Spec.Parallelism)
			b.Spec.Completions, b.Spec.Parallelism = a.Spec.Completions, a.Spec.Parallelism
			require.Empty(t, cmp.Diff(a, b))
		})
	}
}

func TestJob(t *testing.T) {
	tests := []struct {
		name  string
		fix   string
		check func(t *testing.T, job *batchv1.Job)
	}{
		{
			name: "indexed, named and labelled after the MiniCluster",
			fix:  "root-size-4-tasks",
			check: func(t *testing.T, job *batchv1.Job) {
				require.Equal(t, "lammps", job.Name)
				require.Equal(t, "hpc", job.Namespace)
				require.Equal(t, batchv1.IndexedCompletion, *job.Spec.CompletionMode)
				require.Equal(t, int32(4), *job.Spec.Completions)
				require.Equal(t, int32(100), *job.Spec.BackoffLimit)
				require.Equal(t, int64(31500000), *job.Spec.ActiveDeadlineSeconds)
				require.Equal(t, "flux-service", job.Spec.Template.Spec.Subdomain)
				require.Equal(t, map[string]string{fluxv1alpha2.LabelMiniCluster: "lammps"}, job.Spec.Template.Labels)
				require.Equal(t, corev1.RestartPolicyNever, job.Spec.Template.Spec.RestartPolicy)
				require.False(t, *job.Spec.Template.Spec.AutomountServiceAccountToken)
			},
		},
		{
			name: "unnamed flux container is named after the MiniCluster and is kubectl's default",
			fix:  "root-size-1",
			check: func(t *testing.T, job *batchv1.Job) {
				require.Equal(t, "hello", job.Spec.Template.Spec.Containers[0].Name)
				require.Equal(t, "hello", job.Spec.Template.Annotations[annotationDefaultContainer])
				require.Equal(t, []string{"/bin/bash", "/fluxfed/entrypoint/container-hello.sh"}, job.Spec.Template.Spec.Containers[0].Command)
			},
		},
		{
			name: "flux view init container mounts the config, the curve secret and the view",
			fix:  "root-size-1",
			check: func(t *testing.T, job *batchv1.Job) {
				spec := job.Spec.Template.Spec
				require.Len(t, spec.InitContainers, 1)
				ic := spec.InitContainers[0]
				require.Equal(t, "flux-view", ic.Name)
				require.Equal(t, "ghcr.io/converged-computing/flux-view-rocky:tag-9", ic.Image)
				require.Equal(t, []string{"/bin/sh", "/fluxfed/entrypoint/provision.sh"}, ic.Command)
				require.Equal(t, []corev1.VolumeMount{
					{Name: VolumeView, MountPath: "/mnt/flux"},
					{Name: VolumeConfig, MountPath: "/fluxfed/config", ReadOnly: true},
					{Name: VolumeCurve, MountPath: "/fluxfed/curve", ReadOnly: true},
					{Name: VolumeEntrypoint, MountPath: "/fluxfed/entrypoint", ReadOnly: true},
				}, ic.VolumeMounts)
				var curve, entry *corev1.Volume
				for i := range spec.Volumes {
					switch spec.Volumes[i].Name {
					case VolumeCurve:
						curve = &spec.Volumes[i]
					case VolumeEntrypoint:
						entry = &spec.Volumes[i]
					}
				}
				require.Equal(t, "hello-curve", curve.Secret.SecretName)
				require.Equal(t, int32(0o400), *curve.Secret.DefaultMode)
				require.Equal(t, "hello-entrypoint", entry.ConfigMap.Name)
				require.Equal(t, int32(0o555), *entry.ConfigMap.DefaultMode)
				for _, m := range spec.Containers[0].VolumeMounts {
					require.NotEqual(t, VolumeCurve, m.Name, "only the init container sees the Secret")
				}
			},
		},
		{
			name: "imagePullPolicy wins over pullAlways; pull secrets from every container and the view",
			fix:  "pod-options",
			check: func(t *testing.T, job *batchv1.Job) {
				spec := job.Spec.Template.Spec
				require.Equal(t, corev1.PullNever, spec.Containers[0].ImagePullPolicy)
				require.Equal(t, corev1.PullAlways, spec.InitContainers[0].ImagePullPolicy)
				require.Equal(t, []corev1.LocalObjectReference{{Name: "app-pull"}, {Name: "view-pull"}}, spec.ImagePullSecrets)
			},
		},
		{
			name: "pod options",
			fix:  "pod-options",
			check: func(t *testing.T, job *batchv1.Job) {
				spec := job.Spec.Template.Spec
				require.Equal(t, "placed-net", spec.Subdomain)
				require.Equal(t, corev1.RestartPolicyNever, spec.RestartPolicy)
				require.Equal(t, "flux-runner", spec.ServiceAccountName)
				require.True(t, *spec.AutomountServiceAccountToken)
				require.Equal(t, "nvidia", *spec.RuntimeClassName)
				require.Equal(t, "fluence", spec.SchedulerName)
				require.True(t, spec.HostIPC)
				require.True(t, *spec.ShareProcessNamespace)
				require.Equal(t, corev1.DNSClusterFirst, spec.DNSPolicy)
				require.Equal(t, int64(1000), *spec.SecurityContext.FSGroup)
				require.Nil(t, spec.Overhead, "pod.resources has no effect: admission rejects overhead without a RuntimeClass")
				require.Equal(t, []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptrTo("gpu-template")}}, spec.ResourceClaims)
				require.Equal(t, []corev1.Toleration{
					{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
					{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "hpc"},
				}, spec.Tolerations)
				require.Equal(t, map[string]string{fluxv1alpha2.LabelMiniCluster: "placed", "team": "hpc"}, job.Spec.Template.Labels,
					"the selector label cannot be overridden")
				require.Equal(t, "research", job.Spec.Template.Annotations["example.com/cost-center"])
				require.Equal(t, map[string]string{fluxv1alpha2.LabelMiniCluster: "placed", "app.kubernetes.io/part-of": "placement-demo"}, job.Labels)
				require.Equal(t, int32(3), *job.Spec.BackoffLimit)
				require.Equal(t, int64(3600), *job.Spec.ActiveDeadlineSeconds)
			},
		},
		{
			name: "container: env, secrets, ports, lifecycle, security context, resources",
			fix:  "pod-options",
			check: func(t *testing.T, job *batchv1.Job) {
				c := job.Spec.Template.Spec.Containers[0]
				require.Equal(t, []corev1.EnvVar{
					{Name: "A", Value: "1"},
					{Name: "B", Value: "2"},
					{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "app-credentials"}, Key: "token",
					}}},
				}, c.Env)
				require.Equal(t, []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}, {ContainerPort: 8443, Protocol: corev1.ProtocolTCP}}, c.Ports)
				require.Equal(t, []string{"/bin/sh", "-c", "echo started > /tmp/started"}, c.Lifecycle.PostStart.Exec.Command)
				require.Equal(t, []string{"/bin/sh", "-c", "flux shutdown --quiet"}, c.Lifecycle.PreStop.Exec.Command)
				require.True(t, *c.SecurityContext.Privileged)
				require.Equal(t, []corev1.Capability{"NET_ADMIN", "SYS_PTRACE"}, c.SecurityContext.Capabilities.Add)
				require.Equal(t, "1", c.Resources.Limits.Name("nvidia.com/gpu", "").String())
				require.Equal(t, []corev1.ResourceClaim{{Name: "gpu"}}, c.Resources.Claims)
				require.Equal(t, []corev1.VolumeMount{
					{Name: VolumeView, MountPath: "/mnt/flux"},
					{Name: VolumeEntrypoint, MountPath: "/fluxfed/entrypoint", ReadOnly: true},
					{Name: VolumeMunge, MountPath: "/etc/munge", ReadOnly: true},
				}, c.VolumeMounts)
			},
		},
		{
			name: "one broker per node, in one zone, and the node affinity of the spec",
			fix:  "pod-options",
			check: func(t *testing.T, job *batchv1.Job) {
				a := job.Spec.Template.Spec.Affinity
				selector := map[string]string{fluxv1alpha2.LabelMiniCluster: "placed", batchv1.JobNameLabel: "placed"}
				anti := a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
				require.Len(t, anti, 1)
				require.Equal(t, corev1.LabelHostname, anti[0].PodAffinityTerm.TopologyKey)
				require.Equal(t, selector, anti[0].PodAffinityTerm.LabelSelector.MatchLabels)
				zone := a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution
				require.Equal(t, corev1.LabelTopologyZone, zone[0].PodAffinityTerm.TopologyKey)
				require.Equal(t, []corev1.NodeSelectorRequirement{{
					Key: "node.kubernetes.io/instance-type", Operator: corev1.NodeSelectorOpIn,
					Values: []string{"c2d-standard-112", "c2d-standard-56"},
				}}, a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions)
			},
		},
		{
			name: "volumes and existingVolumes, memory at /dev/shm",
			fix:  "volumes",
			check: func(t *testing.T, job *batchv1.Job) {
				c := job.Spec.Template.Spec.Containers[0]
				mounts := map[string]corev1.VolumeMount{}
				for _, m := range c.VolumeMounts {
					mounts[m.Name] = m
				}
				require.Equal(t, "/dev/shm", mounts["shm"].MountPath)
				require.Equal(t, "/bucket", mounts["fuse"].MountPath, "existingVolumes are mounted like volumes")
				require.True(t, mounts["app-credentials"].ReadOnly)
				vols := map[string]corev1.Volume{}
				for _, v := range job.Spec.Template.Spec.Volumes {
					vols[v.Name] = v
				}
				require.Equal(t, corev1.StorageMediumMemory, vols["shm"].EmptyDir.Medium)
				require.Equal(t, "1Gi", vols["shm"].EmptyDir.SizeLimit.String())
				require.Equal(t, corev1.StorageMediumDefault, vols["scratch"].EmptyDir.Medium)
				require.Equal(t, "shared-data", vols["shared-data"].PersistentVolumeClaim.ClaimName)
				require.Equal(t, []corev1.KeyToPath{{Key: "settings.ini", Path: "settings.ini"}}, vols["app-config"].ConfigMap.Items)
				require.Equal(t, "app-credentials", vols["app-credentials"].Secret.SecretName)
				require.Equal(t, "/var/tmp/flux-data", vols["host-data"].HostPath.Path)
				require.Equal(t, "gcsfuse.csi.storage.gke.io", vols["fuse"].CSI.Driver)
				require.Equal(t, map[string]string{"bucketName": "flux-data"}, vols["fuse"].CSI.VolumeAttributes)
			},
		},
		{
			name: "sidecars: wrapped, noWrapEntrypoint, image entrypoint",
			fix:  "services",
			check: func(t *testing.T, job *batchv1.Job) {
				cs := job.Spec.Template.Spec.Containers
				require.Equal(t, []string{"/bin/bash", "/fluxfed/entrypoint/container-client.sh"}, containerNamed(t, cs, "client").Command)
				require.Equal(t, []string{"/bin/bash", "/fluxfed/entrypoint/container-monitor.sh"}, containerNamed(t, cs, "monitor").Command)
				require.Equal(t, []string{"/bin/sh", "-c", "sleep infinity"}, containerNamed(t, cs, "raw").Command)
				require.Nil(t, containerNamed(t, cs, "registry").Command)
				require.Equal(t, "client", job.Spec.Template.Annotations[annotationDefaultContainer])
			},
		},
		{
			name: "disableAffinity keeps the node affinity",
			fix:  "pod-options",
			check: func(t *testing.T, _ *batchv1.Job) {
				mc := v1alpha2test.RenderCaseNamed(t, "pod-options")
				mc.Spec.Network.DisableAffinity = true
				a := typedJob(t, mc).Spec.Template.Spec.Affinity
				require.Nil(t, a.PodAffinity)
				require.Nil(t, a.PodAntiAffinity)
				require.NotNil(t, a.NodeAffinity)
				mc.Spec.Pod.NodeAffinity = nil
				require.Nil(t, typedJob(t, mc).Spec.Template.Spec.Affinity)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, typedJob(t, v1alpha2test.RenderCaseNamed(t, tt.fix)))
		})
	}
}

func TestHostPID(t *testing.T) {
	mc := v1alpha2test.RenderCaseNamed(t, "root-size-1")
	mc.Spec.Pod.HostPID = true
	require.True(t, typedJob(t, mc).Spec.Template.Spec.HostPID)
}

func TestHeadlessService(t *testing.T) {
	tests := []struct {
		name         string
		fix          string
		wantName     string
		wantSelector map[string]string
	}{
		{name: "all pods", fix: "root-size-4-tasks", wantName: "flux-service", wantSelector: map[string]string{fluxv1alpha2.LabelMiniCluster: "lammps"}},
		{name: "custom name", fix: "pod-options", wantName: "placed-net", wantSelector: map[string]string{fluxv1alpha2.LabelMiniCluster: "placed"}},
		{
			name: "minimalService selects the lead broker only", fix: "minimal-service", wantName: "flux-service",
			wantSelector: map[string]string{fluxv1alpha2.LabelMiniCluster: "minimal", batchv1.JobCompletionIndexAnnotation: "0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := HeadlessService(v1alpha2test.RenderCaseNamed(t, tt.fix))
			require.Equal(t, tt.wantName, *svc.Name)
			require.Equal(t, "hpc", *svc.Namespace)
			require.Equal(t, corev1.ClusterIPNone, *svc.Spec.ClusterIP)
			require.True(t, *svc.Spec.PublishNotReadyAddresses)
			require.Equal(t, tt.wantSelector, svc.Spec.Selector)
			require.Len(t, svc.Spec.Ports, 1)
			require.Equal(t, int32(8050), *svc.Spec.Ports[0].Port)
			require.Equal(t, BrokerPortName, *svc.Spec.Ports[0].Name)
		})
	}
}

func TestServices(t *testing.T) {
	t.Run("none", func(t *testing.T) {
		job, err := Services(v1alpha2test.RenderCaseNamed(t, "root-size-1"))
		require.NoError(t, err)
		require.Nil(t, job)
	})
	t.Run("one pod behind the headless service", func(t *testing.T) {
		job := typedServices(t, v1alpha2test.RenderCaseNamed(t, "services"))
		require.Equal(t, "web-demo-services", job.Name)
		require.Equal(t, batchv1.NonIndexedCompletion, *job.Spec.CompletionMode)
		require.Equal(t, int32(1), *job.Spec.Completions)
		require.Equal(t, int32(1), *job.Spec.Parallelism)
		spec := job.Spec.Template.Spec
		require.Equal(t, "web-demo-services", spec.Hostname)
		require.Equal(t, "flux-service", spec.Subdomain)
		require.Equal(t, map[string]string{fluxv1alpha2.LabelMiniCluster: "web-demo"}, job.Spec.Template.Labels)
		require.Empty(t, spec.InitContainers)
		require.Nil(t, containerNamed(t, spec.Containers, "nginx").Command)
		require.Empty(t, containerNamed(t, spec.Containers, "nginx").VolumeMounts)
		registry := containerNamed(t, spec.Containers, "registry")
		require.Equal(t, []string{"/bin/bash", "/fluxfed/entrypoint/service-registry.sh"}, registry.Command)
		require.Equal(t, []corev1.ContainerPort{{ContainerPort: 5000, Protocol: corev1.ProtocolTCP}}, registry.Ports)
		require.Equal(t, []corev1.Volume{{Name: VolumeEntrypoint, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "web-demo-entrypoint"}, DefaultMode: ptrTo[int32](0o555),
		}}}}, spec.Volumes)
	})
	t.Run("pod options apply, broker affinity does not", func(t *testing.T) {
		mc := v1alpha2test.RenderCaseNamed(t, "pod-options")
		mc.Spec.Services = []fluxv1alpha2.Container{{Name: "web", Image: "nginx", ImagePullSecret: "web-pull"}}
		job := typedServices(t, mc)
		spec := job.Spec.Template.Spec
		require.Equal(t, "flux-runner", spec.ServiceAccountName)
		require.Equal(t, corev1.RestartPolicyNever, spec.RestartPolicy)
		require.Len(t, spec.Tolerations, 2)
		require.Nil(t, spec.Affinity.PodAntiAffinity)
		require.NotNil(t, spec.Affinity.NodeAffinity)
		require.Equal(t, []corev1.LocalObjectReference{{Name: "web-pull"}}, spec.ImagePullSecrets)
		require.Equal(t, "placed-net", spec.Subdomain)
	})
	t.Run("name too long for a hostname", func(t *testing.T) {
		mc := v1alpha2test.RenderCaseNamed(t, "services")
		mc.Name = "a-name-that-is-exactly-fifty-six-characters-long-abcdefg"
		_, err := Services(mc)
		require.ErrorContains(t, err, "not a DNS label")
	})
}

func TestJobErrors(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*fluxv1alpha2.MiniClusterSpec)
		wantErr string
	}{
		{name: "no flux container", mutate: func(s *fluxv1alpha2.MiniClusterSpec) {
			s.Containers = append(s.Containers, fluxv1alpha2.Container{Name: "b"})
		}, wantErr: "no container runs Flux"},
		{name: "shareProcessNamespace with hostPID", mutate: func(s *fluxv1alpha2.MiniClusterSpec) {
			s.ShareProcessNamespace = true
			s.Pod.HostPID = true
		}, wantErr: "cannot both be set"},
		{name: "reserved volume name", mutate: func(s *fluxv1alpha2.MiniClusterSpec) {
			s.Containers[0].Volumes = map[string]fluxv1alpha2.ContainerVolume{VolumeView: {EmptyDir: true, Path: "/x"}}
		}, wantErr: "reserved"},
		{name: "no source", mutate: func(s *fluxv1alpha2.MiniClusterSpec) {
			s.Containers[0].Volumes = map[string]fluxv1alpha2.ContainerVolume{"data": {Path: "/data"}}
		}, wantErr: "sets no source"},
		{name: "two sources", mutate: func(s *fluxv1alpha2.MiniClusterSpec) {
			s.Containers[0].Volumes = map[string]fluxv1alpha2.ContainerVolume{"data": {Path: "/data", ClaimName: "c", SecretName: "s"}}
		}, wantErr: "several sources (claimName, secretName)"},
		{name: "no path", mutate: func(s *fluxv1alpha2.MiniClusterSpec) {
			s.Containers[0].Volumes = map[string]fluxv1alpha2.ContainerVolume{"data": {SecretName: "s"}}
		}, wantErr: "needs path"},
		{name: "bad size limit", mutate: func(s *fluxv1alpha2.MiniClusterSpec) {
			s.Containers[0].Volumes = map[string]fluxv1alpha2.ContainerVolume{"data": {EmptyDir: true, Path: "/d", EmptyDirSizeLimit: "lots"}}
		}, wantErr: "emptyDirSizeLimit"},
		{name: "one name, two volumes", mutate: func(s *fluxv1alpha2.MiniClusterSpec) {
			s.Containers[0].RunFlux = true
			s.Containers[0].Volumes = map[string]fluxv1alpha2.ContainerVolume{"data": {ClaimName: "a", Path: "/data"}}
			s.Containers = append(s.Containers, fluxv1alpha2.Container{Name: "b", Volumes: map[string]fluxv1alpha2.ContainerVolume{
				"data": {ClaimName: "b", Path: "/data"},
			}})
		}, wantErr: "describes a different volume"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := v1alpha2test.RenderCaseNamed(t, "root-size-1")
			tt.mutate(&mc.Spec)
			_, err := Job(mc)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestSharedVolumeAcrossContainers(t *testing.T) {
	mc := v1alpha2test.RenderCaseNamed(t, "root-size-1")
	mc.Spec.Containers[0].RunFlux = true
	mc.Spec.Containers[0].Volumes = map[string]fluxv1alpha2.ContainerVolume{"data": {ClaimName: "data", Path: "/data"}}
	mc.Spec.Containers = append(mc.Spec.Containers, fluxv1alpha2.Container{
		Name: "b", Image: "busybox", ExistingVolumes: map[string]fluxv1alpha2.ContainerVolume{
			"data": {ClaimName: "data", Path: "/elsewhere", ReadOnly: true},
		},
	})
	job := typedJob(t, mc)
	n := 0
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Name == "data" {
			n++
		}
	}
	require.Equal(t, 1, n, "one pod volume for both containers")
	require.Contains(t, containerNamed(t, job.Spec.Template.Spec.Containers, "b").VolumeMounts,
		corev1.VolumeMount{Name: "data", MountPath: "/elsewhere", ReadOnly: true})
}
