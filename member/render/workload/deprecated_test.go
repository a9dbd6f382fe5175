package workload

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
)

// TestSpecVolumesMountTheirHostDirectory checks the meaning the deprecated spec.volumes keeps: a
// container volume with only a mount point names an entry, and the pod mounts the entry's
// directory of the node there, read-only where the container asks, in every container that names
// it; the services pod too.
//
//nolint:staticcheck // sets the deprecated spec.volumes on purpose
func TestSpecVolumesMountTheirHostDirectory(t *testing.T) {
	mc := v1alpha2test.RenderCaseNamed(t, "root-size-1")
	mc.Spec.Volumes = map[string]fluxv1alpha2.MiniClusterVolume{
		"data":    {StorageClass: "hostpath", Path: "/tmp/workflow", Capacity: "5Gi", Labels: map[string]string{"type": "local"}},
		"results": {Class: "hostpath", Path: "/var/results"},
		"unused":  {Path: "/srv/unused"},
	}
	mc.Spec.Containers[0].RunFlux = true
	mc.Spec.Containers[0].Volumes = map[string]fluxv1alpha2.ContainerVolume{
		"data":    {Path: "/workflow"},
		"results": {Path: "/results", ReadOnly: true},
	}
	mc.Spec.Containers = append(mc.Spec.Containers, fluxv1alpha2.Container{
		Name: "helper", Image: "busybox", Command: "ls /in",
		Volumes: map[string]fluxv1alpha2.ContainerVolume{"data": {Path: "/in", ReadOnly: true}},
	})
	mc.Spec.Services = []fluxv1alpha2.Container{{
		Name: "web", Image: "nginx",
		Volumes: map[string]fluxv1alpha2.ContainerVolume{"data": {Path: "/usr/share/nginx/html"}},
	}}

	job := typedJob(t, mc)
	spec := job.Spec.Template.Spec
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	require.Equal(t, &corev1.HostPathVolumeSource{Path: "/tmp/workflow"}, vols["data"].HostPath,
		"the entry's directory, with no type check, as the hostpath PersistentVolume had")
	require.Equal(t, &corev1.HostPathVolumeSource{Path: "/var/results"}, vols["results"].HostPath, "class is storageClass's older name")
	require.NotContains(t, vols, "unused", "an entry no container names is not mounted")

	flux := spec.Containers[0]
	require.Contains(t, flux.VolumeMounts, corev1.VolumeMount{Name: "data", MountPath: "/workflow"})
	require.Contains(t, flux.VolumeMounts, corev1.VolumeMount{Name: "results", MountPath: "/results", ReadOnly: true})
	require.Contains(t, containerNamed(t, spec.Containers, "helper").VolumeMounts,
		corev1.VolumeMount{Name: "data", MountPath: "/in", ReadOnly: true})

	services := typedServices(t, mc).Spec.Template.Spec
	require.Contains(t, services.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/workflow"}}})
	require.Contains(t, services.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "data", MountPath: "/usr/share/nginx/html"})
}

// TestSpecVolumesYieldToTheContainersOwnSource checks that a container volume with a source of
// its own is mounted as it says, whatever spec.volumes holds under that name.
//
//nolint:staticcheck // sets the deprecated spec.volumes on purpose
func TestSpecVolumesYieldToTheContainersOwnSource(t *testing.T) {
	mc := v1alpha2test.RenderCaseNamed(t, "root-size-1")
	mc.Spec.Volumes = map[string]fluxv1alpha2.MiniClusterVolume{"data": {Path: "/tmp/workflow"}}
	mc.Spec.Containers[0].Volumes = map[string]fluxv1alpha2.ContainerVolume{"data": {Path: "/data", ClaimName: "data"}}
	for _, v := range typedJob(t, mc).Spec.Template.Spec.Volumes {
		if v.Name == "data" {
			require.Nil(t, v.HostPath)
			require.Equal(t, "data", v.PersistentVolumeClaim.ClaimName)
			return
		}
	}
	t.Fatal("no volume data")
}

//nolint:staticcheck // sets the deprecated spec.volumes on purpose
func TestSpecVolumesErrors(t *testing.T) {
	for _, tt := range []struct {
		name    string
		entry   fluxv1alpha2.MiniClusterVolume
		wantErr string
	}{
		{"not hostpath", fluxv1alpha2.MiniClusterVolume{StorageClass: "csi-gcs", Path: "/x", Driver: "gcs.csi.ofek.dev"},
			`spec.containers[0].volumes[data]: names spec.volumes[data], of storage class "csi-gcs": fluxfed mounts only hostpath entries`},
		{"no path", fluxv1alpha2.MiniClusterVolume{}, "names spec.volumes[data], which has no path"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mc := v1alpha2test.RenderCaseNamed(t, "root-size-1")
			mc.Spec.Volumes = map[string]fluxv1alpha2.MiniClusterVolume{"data": tt.entry}
			mc.Spec.Containers[0].Volumes = map[string]fluxv1alpha2.ContainerVolume{"data": {Path: "/data"}}
			_, err := Job(mc)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

// TestOversubscribeRunsFluxInTheFirstRunFluxContainer checks the deprecated spec.oversubscribe:
// with several containers that set runFlux, the first runs the broker and the others run their
// command wrapped, next to it, as containers that do not run Flux do.
//
//nolint:staticcheck // sets the deprecated spec.oversubscribe on purpose
func TestOversubscribeRunsFluxInTheFirstRunFluxContainer(t *testing.T) {
	mc := v1alpha2test.RenderCaseNamed(t, "root-size-1")
	mc.Spec.Oversubscribe = true
	mc.Spec.Containers[0].Name = "queue"
	mc.Spec.Containers[0].RunFlux = true
	mc.Spec.Containers = append(mc.Spec.Containers,
		fluxv1alpha2.Container{Name: "lammps", Image: "lammps", Command: "run_interactive_cluster", RunFlux: true},
		fluxv1alpha2.Container{Name: "ior", Image: "ior", Command: "run_interactive_cluster", RunFlux: true},
	)
	require.Equal(t, &mc.Spec.Containers[0], mc.FluxContainer())
	cs := typedJob(t, mc).Spec.Template.Spec.Containers
	require.Len(t, cs, 3)
	require.Equal(t, []string{"/bin/bash", "/fluxfed/entrypoint/container-lammps.sh"}, containerNamed(t, cs, "lammps").Command)
	require.Equal(t, []string{"/bin/bash", "/fluxfed/entrypoint/container-ior.sh"}, containerNamed(t, cs, "ior").Command)
	require.NotEqual(t, containerNamed(t, cs, "lammps").Command, containerNamed(t, cs, "queue").Command)
}
