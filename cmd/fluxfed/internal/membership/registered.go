package membership

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	"github.com/fluxfed/fluxfed/hub/members"
)

// This file is what Add reads and writes on the hub: whether the member is registered already
// (by name, cluster ID, Secret or server), and the MemberCluster it applies.

// clusterID is what the hub computes: the UID of the kube-system namespace.
func clusterID(ctx context.Context, cs kubernetes.Interface) (string, error) {
	ns, err := cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return string(ns.UID), nil
}

// refuseRegistered returns ErrAlreadyRegistered when a MemberCluster has the name, or has
// recorded the cluster ID, or another MemberCluster uses the Secret Add would write. A member
// the hub has not reached yet has no cluster ID recorded: it is refused too when its kubeconfig
// leads to the same server, the best that can be told without the hub's answer.
func refuseRegistered(ctx context.Context, hubClient client.Client, name, id, server, namespace string) error {
	var list fedv1alpha1.MemberClusterList
	if err := hubClient.List(ctx, &list); err != nil {
		return fmt.Errorf("listing the hub's members: %w", err)
	}
	for _, mc := range list.Items {
		switch {
		case mc.Name == name:
			return fmt.Errorf("member %s: %w on the hub (cluster ID %s)", name, ErrAlreadyRegistered, orUnknown(mc.Status.ClusterID))
		case mc.Status.ClusterID == id:
			return fmt.Errorf("cluster %s: %w on the hub as member %s", id, ErrAlreadyRegistered, mc.Name)
		case mc.Spec.KubeconfigSecretRef.Name == SecretName(name):
			return fmt.Errorf("member %s uses Secret %s/%s already: %w", mc.Name, namespace, SecretName(name), ErrAlreadyRegistered)
		case mc.Status.ClusterID == "" && serverOf(ctx, hubClient, namespace, mc) == server:
			return fmt.Errorf("member %s, whose cluster ID the hub has not read yet, has a kubeconfig for %s: %w", mc.Name, server, ErrAlreadyRegistered)
		}
	}
	return nil
}

// serverOf returns the server of the kubeconfig of mc, or "" when it cannot be read or the hub
// would refuse it.
func serverOf(ctx context.Context, hubClient client.Client, namespace string, mc fedv1alpha1.MemberCluster) string {
	secret := &corev1.Secret{}
	if err := hubClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: mc.Spec.KubeconfigSecretRef.Name}, secret); err != nil {
		return ""
	}
	key := mc.Spec.KubeconfigSecretRef.Key
	if key == "" {
		key = KubeconfigKey
	}
	cfg, err := members.Check(secret.Data[key])
	if err != nil {
		return ""
	}
	return cfg.Host
}

func orUnknown(s string) string {
	if s == "" {
		return "not known yet"
	}
	return s
}

// memberCluster is the MemberCluster Add applies.
func memberCluster(o Options) (*unstructured.Unstructured, error) {
	mc := &fedv1alpha1.MemberCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: fedv1alpha1.GroupVersion.String(), Kind: "MemberCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Labels: map[string]string{LabelManagedBy: ManagedByCLI}},
		Spec: fedv1alpha1.MemberClusterSpec{
			KubeconfigSecretRef: fedv1alpha1.KubeconfigSecretRef{Name: SecretName(o.Name), Key: KubeconfigKey},
			Namespaces:          fedv1alpha1.MemberNamespaces{Allow: o.Allow, Create: o.CreateNamespaces},
			PodSecurity:         fedv1alpha1.MemberPodSecurity{Level: o.PodSecurity},
		},
	}
	if o.Allow == fedv1alpha1.NamespaceAllowListed {
		for _, ns := range o.Lend {
			mc.Spec.Namespaces.Names = append(mc.Spec.Namespaces.Names, fedv1alpha1.MemberNamespaceName(ns))
		}
	}
	obj, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(mc)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: obj}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}
