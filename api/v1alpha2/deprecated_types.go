package v1alpha2

// MiniClusterVolume is an entry of the deprecated spec.volumes: a volume declared once for the
// whole MiniCluster and mounted by the containers that name it in their own volumes. Older
// Flux Operator releases backed each entry with a PersistentVolume and a claim they created;
// fluxfed creates neither and mounts the entry's host directory directly when its storage class
// is hostpath (the default). See docs/compatibility.md.
type MiniClusterVolume struct {
	// path is the directory on the node that holds the volume's data.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:Pattern=`^(/([^/.\p{Cc}\p{Cf}\p{Zl}\p{Zp}][^/\p{Cc}\p{Cf}\p{Zl}\p{Zp}]*|[.]([^/.\p{Cc}\p{Cf}\p{Zl}\p{Zp}][^/\p{Cc}\p{Cf}\p{Zl}\p{Zp}]*)?|[.][.][^/\p{Cc}\p{Cf}\p{Zl}\p{Zp}]+)?)+$`
	Path string `json:"path,omitempty"`

	// storageClass of the volume; hostpath (the default) is the only one fluxfed mounts.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	StorageClass string `json:"storageClass,omitempty"`

	// class is the oldest name of storageClass.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Class string `json:"class,omitempty"`

	// pvcClass was the storage class of the claim the Flux Operator created. No effect.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PVCClass string `json:"PVCclass,omitempty"`

	// capacity was the size of the PersistentVolume and claim the Flux Operator created. No
	// effect: a host directory has no size.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Capacity string `json:"capacity,omitempty"`

	// delete asked the Flux Operator to delete its PersistentVolume on cleanup. No effect.
	// +optional
	Delete *bool `json:"delete,omitempty"`

	// labels were put on the PersistentVolume the Flux Operator created. No effect.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// annotations were put on the claim the Flux Operator created. No effect.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// claimAnnotations were put on the claim the Flux Operator created. No effect.
	// +optional
	ClaimAnnotations map[string]string `json:"claimAnnotations,omitempty"`

	// attributes were the CSI volume attributes of a volume with a driver.
	// +optional
	Attributes map[string]string `json:"attributes,omitempty"`

	// volumeHandle was the CSI volume handle of a volume with a driver.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	VolumeHandle string `json:"volumeHandle,omitempty"`

	// driver was the CSI driver of a volume that is not hostpath.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Driver string `json:"driver,omitempty"`

	// secret named the Secret a CSI driver read its credentials from.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Secret string `json:"secret,omitempty"`

	// secretNamespace was the namespace of secret.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	SecretNamespace string `json:"secretNamespace,omitempty"`
}

// StorageClassHostPath is the storage class of a spec.volumes entry that is a directory of the
// node, the default.
const StorageClassHostPath = "hostpath"

// EffectiveStorageClass returns the entry's storage class: storageClass, else its older name
// class, else hostpath.
func (v MiniClusterVolume) EffectiveStorageClass() string {
	switch {
	case v.StorageClass != "":
		return v.StorageClass
	case v.Class != "":
		return v.Class
	}
	return StorageClassHostPath
}
