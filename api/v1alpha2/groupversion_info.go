// Package v1alpha2 holds the flux-framework.org/v1alpha2 MiniCluster API served by fluxfed.
//
// The types are wire-compatible with the Flux Operator's MiniCluster of the same group and
// version: a manifest written for the Flux Operator is accepted unchanged. fluxfed adds a few
// optional fields for bursting across clusters (spec.flux.bursting.clusters[].cluster and
// .namespace, spec.flux.bursting.expose) and richer status. Defaults and validation live in the
// schema as markers, so the stored object shows what the controllers act on.
//
// The package depends on apimachinery, plus k8s.io/api/core/v1 for the few fields whose wire
// shape is a core/v1 type in the Flux Operator's API.
//
// +kubebuilder:object:generate=true
// +groupName=flux-framework.org
package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the MiniCluster kind.
const GroupName = "flux-framework.org"

var (
	// GroupVersion is the group and version of the MiniCluster kind in this package.
	GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha2"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds MiniCluster and MiniClusterList to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Kind returns the group-qualified kind for name, e.g. Kind("MiniCluster").
func Kind(name string) schema.GroupKind {
	return GroupVersion.WithKind(name).GroupKind()
}

// Resource returns the group-qualified resource for name, e.g. Resource("miniclusters").
func Resource(name string) schema.GroupResource {
	return GroupVersion.WithResource(name).GroupResource()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &MiniCluster{}, &MiniClusterList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
