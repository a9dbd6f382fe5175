// Package v1alpha1 holds the fluxfed.io/v1alpha1 API of the fluxfed hub: MemberCluster, a member
// cluster registered with the hub, with its health and identity.
//
// Like the MiniCluster API, it depends on apimachinery only, and its defaults and validation live
// in the schema as markers.
//
// +kubebuilder:object:generate=true
// +groupName=fluxfed.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of fluxfed's own kinds.
const GroupName = "fluxfed.io"

var (
	// GroupVersion is the group and version of the kinds in this package.
	GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds MemberCluster and MemberClusterList to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &MemberCluster{}, &MemberClusterList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
