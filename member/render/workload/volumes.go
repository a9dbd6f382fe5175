package workload

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// shmPath is where a memory-backed emptyDir is mounted, whatever its path says: the Flux
// Operator documents it so, because its use is to give MPI a larger /dev/shm than the
// runtime's 64M default.
const shmPath = "/dev/shm"

// containerVolumes returns the volumes a container mounts: volumes and existingVolumes, which
// are the same thing under two names.
func containerVolumes(c *fluxv1alpha2.Container) map[string]fluxv1alpha2.ContainerVolume {
	all := make(map[string]fluxv1alpha2.ContainerVolume, len(c.Volumes)+len(c.ExistingVolumes))
	for name, v := range c.ExistingVolumes {
		all[name] = v
	}
	for name, v := range c.Volumes {
		all[name] = v
	}
	return all
}

func isMemory(v fluxv1alpha2.ContainerVolume) bool {
	return v.EmptyDir && strings.EqualFold(v.EmptyDirMedium, string(corev1.StorageMediumMemory))
}

// hasSource reports whether a container volume names where its data comes from.
func hasSource(v fluxv1alpha2.ContainerVolume) bool {
	return v.ClaimName != "" || v.SecretName != "" || v.ConfigMapName != "" || v.HostPath != "" ||
		v.EmptyDir || v.CSIDriver != ""
}

// fromSpecVolumes gives a container volume without a source the meaning it had in older
// manifests: the entry of the deprecated spec.volumes of the same name, of which fluxfed mounts
// the hostpath kind, the entry's directory of the node. It reports whether it did; a volume with
// a source of its own, or without an entry, is returned as it is.
func fromSpecVolumes(name string, v fluxv1alpha2.ContainerVolume, specVolumes map[string]fluxv1alpha2.MiniClusterVolume) (fluxv1alpha2.ContainerVolume, bool, error) {
	entry, ok := specVolumes[name]
	if hasSource(v) || !ok {
		return v, false, nil
	}
	if class := entry.EffectiveStorageClass(); class != fluxv1alpha2.StorageClassHostPath {
		return v, false, fmt.Errorf("names spec.volumes[%s], of storage class %q: fluxfed mounts only hostpath entries of the deprecated spec.volumes and creates no PersistentVolume; create a claim and set claimName here", name, class)
	}
	if entry.Path == "" {
		return v, false, fmt.Errorf("names spec.volumes[%s], which has no path: set it to the directory of the node to mount", name)
	}
	v.HostPath = entry.Path
	return v, true, nil
}

// collectVolumes returns the pod volumes of a list of containers, sorted by name. A name
// used by several containers must describe the same volume (its mount point may differ).
// specVolumes is the deprecated spec.volumes, which a volume without a source may name.
func collectVolumes(containers []fluxv1alpha2.Container, field string, specVolumes map[string]fluxv1alpha2.MiniClusterVolume) ([]*corev1ac.VolumeApplyConfiguration, error) {
	defs := map[string]fluxv1alpha2.ContainerVolume{}
	where := map[string]string{}
	legacy := map[string]bool{}
	for i := range containers {
		for name, v := range containerVolumes(&containers[i]) {
			at := fmt.Sprintf("%s[%d].volumes[%s]", field, i, name)
			if slices.Contains(reservedVolumes, name) {
				return nil, fmt.Errorf("%s: the volume name %q is reserved by fluxfed", at, name)
			}
			v, fromSpec, err := fromSpecVolumes(name, v, specVolumes)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", at, err)
			}
			if fromSpec {
				legacy[name] = true
			}
			if err := checkVolume(v); err != nil {
				return nil, fmt.Errorf("%s: %w", at, err)
			}
			source := v
			source.Path, source.ReadOnly = "", false
			if prev, seen := defs[name]; seen {
				if !reflect.DeepEqual(prev, source) {
					return nil, fmt.Errorf("%s: describes a different volume than %s", at, where[name])
				}
				continue
			}
			defs[name] = source
			where[name] = at
		}
	}
	var vols []*corev1ac.VolumeApplyConfiguration
	for _, name := range sortedKeys(defs) {
		vol, err := volume(name, defs[name])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where[name], err)
		}
		if legacy[name] && vol.HostPath != nil {
			// The PersistentVolume the Flux Operator made of such an entry left the hostPath
			// type unset: no check that the directory exists.
			vol.HostPath.Type = nil
		}
		vols = append(vols, vol)
	}
	return vols, nil
}

// checkVolume rejects what the schema admits but no pod can mount: a volume with no source or
// several, and a mount without a path.
func checkVolume(v fluxv1alpha2.ContainerVolume) error {
	var sources []string
	for _, s := range []struct {
		set  bool
		name string
	}{
		{v.ClaimName != "", "claimName"},
		{v.SecretName != "", "secretName"},
		{v.ConfigMapName != "", "configMapName"},
		{v.HostPath != "", "hostPath"},
		{v.EmptyDir, "emptyDir"},
		{v.CSIDriver != "", "csiDriver"},
	} {
		if s.set {
			sources = append(sources, s.name)
		}
	}
	switch {
	case len(sources) == 0:
		return fmt.Errorf("sets no source: set one of claimName, secretName, configMapName, hostPath, emptyDir or csiDriver")
	case len(sources) > 1:
		return fmt.Errorf("sets several sources (%s): set one", strings.Join(sources, ", "))
	case v.Path == "" && !isMemory(v):
		return fmt.Errorf("needs path, the mount point in the container")
	}
	return nil
}

func volume(name string, v fluxv1alpha2.ContainerVolume) (*corev1ac.VolumeApplyConfiguration, error) {
	vol := corev1ac.Volume().WithName(name)
	switch {
	case v.ClaimName != "":
		vol.WithPersistentVolumeClaim(corev1ac.PersistentVolumeClaimVolumeSource().WithClaimName(v.ClaimName))
	case v.SecretName != "":
		vol.WithSecret(corev1ac.SecretVolumeSource().WithSecretName(v.SecretName))
	case v.ConfigMapName != "":
		cm := corev1ac.ConfigMapVolumeSource().WithName(v.ConfigMapName)
		for _, key := range sortedKeys(v.Items) {
			cm.WithItems(corev1ac.KeyToPath().WithKey(key).WithPath(v.Items[key]))
		}
		vol.WithConfigMap(cm)
	case v.HostPath != "":
		// The directory must exist on the node, as with the Flux Operator.
		vol.WithHostPath(corev1ac.HostPathVolumeSource().WithPath(v.HostPath).WithType(corev1.HostPathDirectory))
	case v.EmptyDir:
		ed := corev1ac.EmptyDirVolumeSource()
		if isMemory(v) {
			ed.WithMedium(corev1.StorageMediumMemory)
		}
		if v.EmptyDirSizeLimit != "" {
			q, err := resource.ParseQuantity(v.EmptyDirSizeLimit)
			if err != nil {
				return nil, fmt.Errorf("emptyDirSizeLimit %q: %w", v.EmptyDirSizeLimit, err)
			}
			ed.WithSizeLimit(q)
		}
		vol.WithEmptyDir(ed)
	case v.CSIDriver != "":
		csi := corev1ac.CSIVolumeSource().WithDriver(v.CSIDriver)
		if len(v.CSIDriverAttributes) > 0 {
			csi.WithVolumeAttributes(v.CSIDriverAttributes)
		}
		vol.WithCSI(csi)
	}
	return vol, nil
}

// volumeMounts returns the mounts of a container's volumes, sorted by name.
func volumeMounts(c *fluxv1alpha2.Container) []*corev1ac.VolumeMountApplyConfiguration {
	vols := containerVolumes(c)
	var mounts []*corev1ac.VolumeMountApplyConfiguration
	for _, name := range sortedKeys(vols) {
		v := vols[name]
		path := v.Path
		if isMemory(v) {
			path = shmPath
		}
		m := corev1ac.VolumeMount().WithName(name).WithMountPath(path)
		if v.ReadOnly {
			m.WithReadOnly(true)
		}
		mounts = append(mounts, m)
	}
	return mounts
}

func labelSelector(labels map[string]string) *metav1ac.LabelSelectorApplyConfiguration {
	return metav1ac.LabelSelector().WithMatchLabels(labels)
}
