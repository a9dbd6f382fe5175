package membership

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hub/members"
)

// RemoveOptions say what Remove does; one field per flag of `fluxfed member remove`.
type RemoveOptions struct {
	// Name is the member's name on the hub. Required.
	Name string
	// Hub reaches the hub cluster. Required.
	Hub *rest.Config
	// Member reaches the member cluster as its administrator. Without it (only with Force),
	// the member is only removed from the hub, and the hub's identity stays on the member.
	Member *rest.Config
	// Namespace is where the hub reads member kubeconfigs; default fluxfed-system.
	Namespace string
	// Force removes the member even though children of a hub still exist there (they are
	// left running, and are listed), or its cluster ID is not the registered one.
	Force bool
	// KeepAccess leaves the hub's identity on the member (another hub may share it).
	KeepAccess bool
	// Out receives one line per step; nothing when nil.
	Out io.Writer
}

// Remove undoes Add: it refuses while child MiniClusters of any hub still exist on the member
// (ErrChildrenRemain) unless Force, then deletes the MemberCluster and its kubeconfig Secret on
// the hub, and the hub's identity on the member: the ServiceAccount (which revokes every token
// minted for it), the ClusterRoles and bindings of deploy/member-access*, and every
// RoleBinding that lends a namespace to it. Namespaces, and fluxfed itself, stay on the member.
func Remove(ctx context.Context, o RemoveOptions) error {
	if o.Name == "" || o.Hub == nil {
		return errors.New("the member's name and the hub's configuration are needed")
	}
	if o.Member == nil && !o.Force {
		return errors.New("without the member's configuration, only --force removes it, from the hub only")
	}
	if o.Namespace == "" {
		o.Namespace = members.DefaultNamespace
	}
	p := printer{out: o.Out, name: o.Name}
	hubClient, err := newClient(o.Hub)
	if err != nil {
		return fmt.Errorf("the hub: %w", err)
	}
	mc := &fedv1alpha1.MemberCluster{}
	switch err := hubClient.Get(ctx, client.ObjectKey{Name: o.Name}, mc); {
	case apierrors.IsNotFound(err):
		mc = nil
		p.say("no MemberCluster %s on the hub", o.Name)
	case err != nil:
		return fmt.Errorf("reading MemberCluster %s on the hub: %w", o.Name, err)
	}

	var memberClient client.Client
	if o.Member != nil {
		if memberClient, err = newClient(o.Member); err != nil {
			return fmt.Errorf("the member: %w", err)
		}
		cs, err := kubernetes.NewForConfig(o.Member)
		if err != nil {
			return err
		}
		id, err := clusterID(ctx, cs)
		if err != nil {
			return fmt.Errorf("reading the member's cluster ID: %w", err)
		}
		if mc != nil && mc.Status.ClusterID != "" && mc.Status.ClusterID != id {
			if !o.Force {
				return fmt.Errorf("member %s is cluster %s on the hub, but the member's configuration reaches cluster %s: give the right context, or --force", o.Name, mc.Status.ClusterID, id)
			}
			p.say("the member's configuration reaches cluster %s, not %s as registered: going on (--force)", id, mc.Status.ClusterID)
		}
		children, err := Children(ctx, memberClient)
		if err != nil {
			return err
		}
		if len(children) > 0 {
			if !o.Force {
				return fmt.Errorf("%w: %s; delete their roots on the hub first, or --force to leave them running", ErrChildrenRemain, summarize(children))
			}
			p.say("leaving %s running (--force)", summarize(children))
		}
	}

	// The hub first: it stops using the member before its identity goes.
	if mc != nil {
		secretName := mc.Spec.KubeconfigSecretRef.Name
		if err := client.IgnoreNotFound(hubClient.Delete(ctx, mc)); err != nil {
			return fmt.Errorf("deleting MemberCluster %s on the hub: %w", o.Name, err)
		}
		shared, err := sharedSecret(ctx, hubClient, o.Name, secretName)
		if err != nil {
			return err
		}
		if shared != "" {
			p.say("deleted MemberCluster %s on the hub; kept Secret %s/%s, which member %s uses too", o.Name, o.Namespace, secretName, shared)
		} else {
			secret := &corev1.Secret{}
			secret.Name, secret.Namespace = secretName, o.Namespace
			if err := client.IgnoreNotFound(hubClient.Delete(ctx, secret)); err != nil {
				return fmt.Errorf("deleting Secret %s/%s on the hub: %w", o.Namespace, secretName, err)
			}
			p.say("deleted MemberCluster %s and Secret %s/%s on the hub", o.Name, o.Namespace, secretName)
		}
	}

	if memberClient == nil {
		p.say("the member was not reached: the hub's identity stays there")
		return nil
	}
	if o.KeepAccess {
		p.say("kept the hub's identity on the member")
		return nil
	}
	chart, err := findChartIdentity(ctx, memberClient)
	if err != nil {
		return err
	}
	deleted, err := removeAccess(ctx, memberClient)
	if err != nil {
		return err
	}
	switch {
	case len(deleted) > 0:
		p.say("removed access (%s)", strings.Join(deleted, ", "))
	case chart == nil:
		p.say("nothing of the hub's access was left on the member")
	}
	if chart != nil {
		p.say("kept the hub's identity that %s installed on the member: helm uninstall removes it with fluxfed, or helm upgrade can drop memberAccess", chart)
	}
	return nil
}

// Children returns the child MiniClusters of any hub on a member (those with the origin-hub
// label), as "namespace/name (hub h)".
func Children(ctx context.Context, member client.Client) ([]string, error) {
	req, err := labels.NewRequirement(fluxv1alpha2.LabelOriginHub, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	var list fluxv1alpha2.MiniClusterList
	if err := member.List(ctx, &list, client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*req)}); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil // no MiniCluster CRD: nothing of fluxfed's runs there
		}
		return nil, fmt.Errorf("listing the children on the member: %w", err)
	}
	var out []string
	for _, mc := range list.Items {
		out = append(out, fmt.Sprintf("%s/%s (hub %s)", mc.Namespace, mc.Name, mc.Labels[fluxv1alpha2.LabelOriginHub]))
	}
	return out, nil
}

func summarize(children []string) string {
	const shown = 5
	s := fmt.Sprintf("%d child MiniCluster(s): %s", len(children), strings.Join(children[:min(len(children), shown)], ", "))
	if len(children) > shown {
		s += ", ..."
	}
	return s
}

// sharedSecret returns the name of another MemberCluster that uses Secret name, if any.
func sharedSecret(ctx context.Context, c client.Client, member, secret string) (string, error) {
	var list fedv1alpha1.MemberClusterList
	if err := c.List(ctx, &list); err != nil {
		return "", fmt.Errorf("listing the hub's members: %w", err)
	}
	for _, mc := range list.Items {
		if mc.Name != member && mc.Spec.KubeconfigSecretRef.Name == secret {
			return mc.Name, nil
		}
	}
	return "", nil
}

// removeAccess deletes from the member what any of deploy/member-access* installs but the
// namespace (fluxfed runs there), and the RoleBindings that lend namespaces to the hub's
// ServiceAccount. What Helm installed (the chart's member mode) is left to Helm. It returns what
// it deleted.
func removeAccess(ctx context.Context, c client.Client) ([]string, error) {
	var deleted []string
	var rbs rbacv1.RoleBindingList
	if err := c.List(ctx, &rbs); err != nil {
		return nil, fmt.Errorf("listing the RoleBindings of the member: %w", err)
	}
	for i := range rbs.Items {
		rb := &rbs.Items[i]
		if rb.RoleRef.Kind != "ClusterRole" || rb.RoleRef.Name != BurstRole || !bindsHub(rb.Subjects) {
			continue
		}
		if _, helm := installedByHelm(rb); helm {
			continue // Helm's chart lent it: helm removes it
		}
		if err := client.IgnoreNotFound(c.Delete(ctx, rb)); err != nil {
			return deleted, fmt.Errorf("deleting RoleBinding %s/%s on the member: %w", rb.Namespace, rb.Name, err)
		}
		deleted = append(deleted, "RoleBinding "+rb.Namespace+"/"+rb.Name)
	}
	// In the reverse order of their installation: the token Secret before its ServiceAccount
	// (whose deletion would take the Secret with it, unreported).
	objs, err := accessObjects([]string{"member-access-any", "member-access-token"})
	if err != nil {
		return deleted, err
	}
	slices.Reverse(objs)
	for _, obj := range objs {
		if obj.GetKind() == "Namespace" {
			continue // fluxfed runs there
		}
		target := &unstructured.Unstructured{}
		target.SetGroupVersionKind(obj.GroupVersionKind())
		target.SetNamespace(obj.GetNamespace())
		target.SetName(obj.GetName())
		err := c.Get(ctx, client.ObjectKeyFromObject(target), target)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return deleted, fmt.Errorf("reading %s on the member: %w", describe(obj), err)
		}
		if _, helm := installedByHelm(target); helm {
			continue // Helm's chart installed it: helm removes it
		}
		err = c.Delete(ctx, target)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return deleted, fmt.Errorf("deleting %s on the member: %w", describe(obj), err)
		default:
			deleted = append(deleted, describe(obj))
		}
	}
	return deleted, nil
}

func bindsHub(subjects []rbacv1.Subject) bool {
	for _, s := range subjects {
		if s.Kind == rbacv1.ServiceAccountKind && s.Namespace == AccessNamespace && s.Name == ServiceAccount {
			return true
		}
	}
	return false
}
