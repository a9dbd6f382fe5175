package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	"sigs.k8s.io/multicluster-runtime/providers/kubeconfig"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/bursting"
	"github.com/fluxfed/fluxfed/hub/members"
	"github.com/fluxfed/fluxfed/member/render"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// refusedError is a child object the hub will not touch: a namesake that is not its own.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

// classify returns the condition reason of an error met on a member: the member answered and
// refused (ApplyFailed), or it did not answer (MemberUnreachable).
func classify(err error) string {
	var refused *refusedError
	if errors.As(err, &refused) {
		return fluxv1alpha2.ReasonApplyFailed
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code > 0 && status.Status().Code < 500 &&
		!apierrors.IsTimeout(err) && !apierrors.IsTooManyRequests(err) {
		return fluxv1alpha2.ReasonApplyFailed
	}
	return fluxv1alpha2.ReasonMemberUnreachable
}

// member returns the engaged cluster of a member, or why there is none: the condition reason
// and an error for the user.
func (r *Reconciler) member(ctx context.Context, name string) (cluster.Cluster, string, error) {
	cl, err := r.mgr.GetCluster(ctx, multicluster.ClusterName(name))
	if err == nil {
		return cl, "", nil
	}
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: r.opts.MembersNamespace, Name: name}
	switch err := r.client.Get(ctx, key, secret); {
	case apierrors.IsNotFound(err):
		return nil, fluxv1alpha2.ReasonMemberNotFound, fmt.Errorf("no kubeconfig Secret %s registers member %s", key, name)
	case err != nil:
		return nil, fluxv1alpha2.ReasonMemberUnreachable, fmt.Errorf("reading the kubeconfig Secret %s: %w", key, err)
	}
	if secret.Labels[kubeconfig.DefaultKubeconfigSecretLabel] != "true" {
		return nil, fluxv1alpha2.ReasonMemberNotFound, fmt.Errorf("secret %s is not labelled %s=true, so it registers no member",
			key, kubeconfig.DefaultKubeconfigSecretLabel)
	}
	if _, err := members.Check(secret.Data[kubeconfig.DefaultKubeconfigSecretKey]); err != nil {
		return nil, fluxv1alpha2.ReasonKubeconfigRefused, err
	}
	return nil, fluxv1alpha2.ReasonMemberUnreachable, fmt.Errorf("member %s is registered but not connected: its API server has not answered yet", name)
}

// pushChild applies one child and its CURVE Secret to its member and returns what was observed.
func (r *Reconciler) pushChild(ctx context.Context, root *fluxv1alpha2.MiniCluster, child bursting.Child, cert []byte) BurstObservation {
	o := BurstObservation{Name: child.Burst, Cluster: child.Cluster, Namespace: child.Namespace, Size: child.MiniCluster.Spec.Size}
	cl, reason, err := r.member(ctx, child.Cluster)
	if err != nil {
		o.Err, o.ErrReason = err, reason
		return o
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.MemberTimeout)
	defer cancel()
	fail := func(err error) BurstObservation {
		o.Err, o.ErrReason = err, classify(err)
		return o
	}
	if err := r.ensureNamespace(ctx, cl, child.Cluster, child.Namespace); err != nil {
		return fail(err)
	}
	applied, err := r.applyChild(ctx, cl, root, child)
	if err != nil {
		if apierrors.IsNotFound(err) {
			r.namespaces.Delete(child.Cluster + "/" + child.Namespace)
		}
		return fail(err)
	}
	if err := r.applyChildSecret(ctx, cl, applied, cert); err != nil {
		return fail(err)
	}
	o.Child = applied
	return o
}

// ensureNamespace creates the child's namespace on the member unless it is known to exist.
func (r *Reconciler) ensureNamespace(ctx context.Context, cl cluster.Cluster, member, namespace string) error {
	if r.opts.SkipNamespaces {
		return nil
	}
	key := member + "/" + namespace
	if v, ok := r.namespaces.Load(key); ok && v == cl {
		return nil
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: map[string]string{fluxv1alpha2.LabelOriginHub: r.opts.Name}}}
	if err := cl.GetClient().Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", namespace, err)
	}
	r.namespaces.Store(key, cl)
	return nil
}

// applyChild applies the child MiniCluster unless the member's cache holds it already, and
// returns it as stored.
func (r *Reconciler) applyChild(ctx context.Context, cl cluster.Cluster, root *fluxv1alpha2.MiniCluster, child bursting.Child) (*fluxv1alpha2.MiniCluster, error) {
	u, err := toUnstructured(child.MiniCluster)
	if err != nil {
		return nil, err
	}
	if err := render.StampAppliedHash(u); err != nil {
		return nil, err
	}
	current := &fluxv1alpha2.MiniCluster{}
	switch err := cl.GetClient().Get(ctx, client.ObjectKeyFromObject(u), current); {
	case err == nil:
		hub, namespace, name, _, ok := OriginOf(current)
		if !ok || hub != r.opts.Name || namespace != root.Namespace || name != root.Name {
			return nil, &refusedError{fmt.Sprintf("MiniCluster %s/%s on member %s was not pushed for this root (origin: %s); rename the burst or set its namespace",
				u.GetNamespace(), u.GetName(), child.Cluster, describeOrigin(current))}
		}
		if render.UpToDate(current, u) {
			return current, nil
		}
	case apierrors.IsNotFound(err):
		// The cache holds only this hub's objects: a namesake of someone else's is refused by
		// the apply below (no force over another manager's fields would make it ours).
	default:
		return nil, fmt.Errorf("reading the child: %w", err)
	}
	if err := cl.GetClient().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fluxv1alpha2.FieldOwnerHub), client.ForceOwnership); err != nil {
		return nil, fmt.Errorf("applying the child MiniCluster: %w", err)
	}
	applied := &fluxv1alpha2.MiniCluster{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, applied); err != nil {
		return nil, fmt.Errorf("decoding the child MiniCluster: %w", err)
	}
	return applied, nil
}

// describeOrigin says where an object on a member came from, for messages.
func describeOrigin(obj metav1.Object) string {
	hub, namespace, name, _, ok := OriginOf(obj)
	if !ok {
		return "not pushed by a hub"
	}
	return fmt.Sprintf("hub %s, root %s/%s", hub, namespace, name)
}

// applyChildSecret applies the child's CURVE Secret: the root's certificate, byte for byte,
// owned by the child so that the member deletes it with the child.
func (r *Reconciler) applyChildSecret(ctx context.Context, cl cluster.Cluster, child *fluxv1alpha2.MiniCluster, cert []byte) error {
	secret := render.CurveSecret(child, cert)
	secret.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}
	for _, k := range []string{fluxv1alpha2.LabelOriginHub, fluxv1alpha2.LabelOriginNamespace, fluxv1alpha2.LabelOriginName} {
		secret.Labels[k] = child.Labels[k]
	}
	secret.Annotations = map[string]string{fluxv1alpha2.AnnotationOriginUID: child.Annotations[fluxv1alpha2.AnnotationOriginUID]}
	secret.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: fluxv1alpha2.GroupVersion.String(), Kind: "MiniCluster", Name: child.Name, UID: child.UID, Controller: ptr.To(true),
	}}
	u, err := toUnstructured(secret)
	if err != nil {
		return err
	}
	if err := render.StampAppliedHash(u); err != nil {
		return err
	}

	current := &corev1.Secret{}
	switch err := cl.GetClient().Get(ctx, client.ObjectKeyFromObject(u), current); {
	case err == nil:
		if hub, _, _, _, ok := OriginOf(current); !ok || hub != r.opts.Name {
			return &refusedError{fmt.Sprintf("secret %s/%s on member exists and is not this hub's", current.Namespace, current.Name)}
		}
		if render.UpToDate(current, u) {
			return nil
		}
		if !bytes.Equal(current.Data[names.KeyCurveCert], cert) {
			// The data of the Secret is immutable: one of an earlier root (same name, deleted
			// and re-created) is replaced.
			if err := cl.GetClient().Delete(ctx, current, client.Preconditions{UID: &current.UID, ResourceVersion: &current.ResourceVersion}); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("replacing the CURVE Secret of an earlier root: %w", err)
			}
		}
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading the CURVE Secret: %w", err)
	}
	if err := cl.GetClient().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fluxv1alpha2.FieldOwnerHub), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying the CURVE Secret: %w", err)
	}
	return nil
}

// childNameOf returns the name of the child an object on a member belongs to: the MiniCluster
// itself, or the one a Secret is labelled with.
func childNameOf(obj client.Object) string {
	if _, ok := obj.(*corev1.Secret); ok {
		return obj.GetLabels()[fluxv1alpha2.LabelMiniCluster]
	}
	return obj.GetName()
}

// deleteChildren deletes, on one member, the children of root and their Secrets for which
// remove is true, reading them through reader (the member's cache, or its API server when
// the cache may lag). Only objects root provably owns are deleted. It returns what it deleted.
func (r *Reconciler) deleteChildren(ctx context.Context, cl cluster.Cluster, root *fluxv1alpha2.MiniCluster, reader client.Reader, remove func(client.Object) bool) ([]string, error) {
	selector := client.MatchingLabels{
		fluxv1alpha2.LabelOriginHub:       r.opts.Name,
		fluxv1alpha2.LabelOriginNamespace: root.Namespace,
		fluxv1alpha2.LabelOriginName:      root.Name,
	}
	objects, err := listPushed(ctx, reader, selector)
	if err != nil {
		return nil, err
	}
	var deleted []string
	var errs []error
	for _, obj := range objects {
		if !Owns(r.opts.Name, root, obj) || !remove(obj) || obj.GetDeletionTimestamp() != nil {
			continue
		}
		if err := deleteExactly(ctx, cl.GetClient(), obj); err != nil {
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, fmt.Sprintf("%s %s/%s", kindOf(obj), obj.GetNamespace(), obj.GetName()))
	}
	return deleted, errors.Join(errs...)
}

// listPushed lists, through reader, the kinds the hub pushes to a member (child MiniClusters
// and their CURVE Secrets) that match selector.
func listPushed(ctx context.Context, reader client.Reader, selector client.MatchingLabels) ([]client.Object, error) {
	var children fluxv1alpha2.MiniClusterList
	if err := reader.List(ctx, &children, selector); err != nil {
		return nil, fmt.Errorf("listing the children: %w", err)
	}
	var secrets corev1.SecretList
	if err := reader.List(ctx, &secrets, selector); err != nil {
		return nil, fmt.Errorf("listing the CURVE Secrets: %w", err)
	}
	objects := make([]client.Object, 0, len(children.Items)+len(secrets.Items))
	for i := range children.Items {
		objects = append(objects, &children.Items[i])
	}
	for i := range secrets.Items {
		objects = append(objects, &secrets.Items[i])
	}
	return objects, nil
}

// deleteExactly deletes obj as it was read: a changed object (adopted by a re-created root, for
// example) is left alone. An object already gone counts as deleted.
func deleteExactly(ctx context.Context, c client.Client, obj client.Object) error {
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	err := c.Delete(ctx, obj, client.Preconditions{UID: &uid, ResourceVersion: &rv}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s %s/%s: %w", kindOf(obj), obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

func kindOf(obj client.Object) string {
	if _, ok := obj.(*corev1.Secret); ok {
		return "Secret"
	}
	return "MiniCluster"
}

// toUnstructured converts a typed object or apply configuration into the request of a
// server-side apply, without the fields a client never sends (status, creation timestamp).
func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", obj, err)
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(data, &u.Object); err != nil {
		return nil, fmt.Errorf("decoding %T: %w", obj, err)
	}
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

// metaApplyObject is an apply request for root that carries only its identity.
func metaApplyObject(root *fluxv1alpha2.MiniCluster) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(fluxv1alpha2.GroupVersion.WithKind("MiniCluster"))
	u.SetNamespace(root.Namespace)
	u.SetName(root.Name)
	return u
}
