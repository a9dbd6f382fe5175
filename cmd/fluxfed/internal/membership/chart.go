package membership

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Labels and annotations that say who installed an object.
const (
	// LabelManagedBy is the well-known label of the tool that manages an object. Add sets it to
	// ManagedByCLI on everything it creates, on the member and on the hub; Helm sets it to
	// ManagedByHelm on what the chart installs.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByCLI is LabelManagedBy on what `fluxfed member add` creates.
	ManagedByCLI = FieldManager
	// ManagedByHelm is LabelManagedBy on what Helm installs.
	ManagedByHelm = "Helm"
	// AnnotationHelmRelease names the Helm release that installed an object.
	AnnotationHelmRelease = "meta.helm.sh/release-name"
	// AnnotationHelmNamespace is the namespace of that release.
	AnnotationHelmNamespace = "meta.helm.sh/release-namespace"
	// AnnotationMember, on what Add creates on a member, is the name the member was registered
	// under on the hub.
	AnnotationMember = "fluxfed.io/member-name"
)

// chartIdentity is the hub's identity on a member as the chart's member mode installed it.
type chartIdentity struct {
	// release and namespace name the Helm release.
	release, namespace string
	// any is true when the chart lends every namespace (memberAccess.profile any).
	any bool
	// token is true when the chart made the token Secret that never expires (memberAccess.token).
	token bool
}

// installedByHelm reports whether Helm installed obj, and under which release.
func installedByHelm(obj metav1.Object) (string, bool) {
	release := obj.GetAnnotations()[AnnotationHelmRelease]
	return release, obj.GetLabels()[LabelManagedBy] == ManagedByHelm || release != ""
}

// findChartIdentity returns the identity the chart installed on the member, nil when the
// ServiceAccount is missing or not Helm's.
func findChartIdentity(ctx context.Context, c client.Client) (*chartIdentity, error) {
	sa := &corev1.ServiceAccount{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: AccessNamespace, Name: ServiceAccount}, sa); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading ServiceAccount %s/%s on the member: %w", AccessNamespace, ServiceAccount, err)
	}
	release, helm := installedByHelm(sa)
	if !helm {
		return nil, nil
	}
	id := &chartIdentity{release: release, namespace: sa.Annotations[AnnotationHelmNamespace]}
	if id.namespace == "" {
		id.namespace = AccessNamespace
	}
	err := c.Get(ctx, client.ObjectKey{Name: "fluxfed-hub-namespaces"}, &rbacv1.ClusterRoleBinding{})
	switch {
	case err == nil:
		id.any = true
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading ClusterRoleBinding fluxfed-hub-namespaces on the member: %w", err)
	}
	err = c.Get(ctx, client.ObjectKey{Namespace: AccessNamespace, Name: TokenSecret}, &corev1.Secret{})
	switch {
	case err == nil:
		id.token = true
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading Secret %s/%s on the member: %w", AccessNamespace, TokenSecret, err)
	}
	return id, nil
}

// String names the release as helm does.
func (id *chartIdentity) String() string {
	if id.release == "" {
		return "a Helm release"
	}
	return fmt.Sprintf("Helm release %s (namespace %s)", id.release, id.namespace)
}

// fits refuses options that ask for another identity than the chart's: one of the two must
// give way, and the message says how.
func (id *chartIdentity) fits(o Options) error {
	profile := "namespaces"
	if id.any {
		profile = "any"
	}
	switch {
	case o.Access == AccessAny && !id.any:
		return fmt.Errorf("the hub's identity on the member was installed by %s with memberAccess.profile %s, and --access any asks for every namespace: "+
			"either run helm upgrade with --set memberAccess.profile=any, or leave out --access any (and lend namespaces with --lend)", id, profile)
	case o.Access == AccessNamespaces && id.any:
		return fmt.Errorf("the hub's identity on the member was installed by %s with memberAccess.profile any, which lends every namespace: "+
			"pass --access any, or run helm upgrade with --set memberAccess.profile=namespaces", id)
	case o.NonExpiringToken && !id.token:
		return fmt.Errorf("--non-expiring-token uses Secret %s/%s, which %s, which installed the hub's identity on the member, did not create: "+
			"run helm upgrade with --set memberAccess.token=true, or leave out --non-expiring-token (a token that expires is minted)", AccessNamespace, TokenSecret, id)
	}
	return nil
}
