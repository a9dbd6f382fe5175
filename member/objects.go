package member

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/internal/apply"
	"github.com/fluxfed/fluxfed/member/render"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// reconcileObjects renders the MiniCluster, makes sure its CURVE Secret exists and applies the
// other objects in order, configuration first and the Jobs that read it last. It stops at the
// first error (see errors.go for what each kind means); the observation holds what was seen
// until then, for the status.
//
// Applying is also how drift is corrected: the Owns and Secret watches bring the MiniCluster
// back when someone changes or deletes one of its objects, and the applier sends the object
// again when the one observed no longer holds what fluxfed owns in it.
func (r *Reconciler) reconcileObjects(ctx context.Context, mc *fluxv1alpha2.MiniCluster) (observation, error) {
	if obs, ok := r.settled.unchanged(ctx, r.client, mc); ok {
		return obs, nil
	}
	var obs observation
	job := &batchv1.Job{}
	switch err := r.client.Get(ctx, client.ObjectKey{Namespace: mc.Namespace, Name: names.JobName(mc)}, job); {
	case err == nil && metav1.IsControlledBy(job, mc):
		obs.job = job
	case err == nil:
		// Another's Job of the name (an earlier MiniCluster's, say): nothing of it is this
		// MiniCluster's status.
	case !apierrors.IsNotFound(err):
		return obs, fmt.Errorf("reading the broker Job: %w", err)
	}

	rendered, err := render.Render(mc)
	if err != nil {
		return obs, &invalidSpecError{err: err}
	}
	obs.hostlist = rendered.Layout.GlobalHostlist
	if err := r.ensureCurveSecret(ctx, mc, &obs); err != nil {
		return obs, err
	}
	objs := make([]settledObject, 0, len(rendered.Objects)+1)
	for _, o := range rendered.Objects {
		applied, err := r.applyObject(ctx, mc, o)
		if err != nil {
			r.settled.forget(client.ObjectKeyFromObject(mc))
			return obs, err
		}
		objs = append(objs, settledObject{gvk: o.Kind, obj: applied})
		// The services Job is a Job too; the status follows the brokers' Job only.
		if job, ok := applied.(*batchv1.Job); ok && job.Name == names.JobName(mc) {
			obs.job = job
		}
	}
	// The CURVE Secret as the cache holds it (the member's own, or a child's that the hub pushed,
	// both judged by ensureCurveSecret): one just created is not remembered until the cache has
	// it, and the next reconcile checks everything again.
	secret := &corev1.Secret{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: mc.Namespace, Name: names.CurveSecretName(mc)}, secret); err == nil {
		r.settled.remember(mc, obs.hostlist, append(objs, settledObject{gvk: corev1.SchemeGroupVersion.WithKind("Secret"), obj: secret}))
	} else {
		r.settled.forget(client.ObjectKeyFromObject(mc))
	}
	return obs, nil
}

// applyObject applies one rendered object, controlled by mc, and returns it as stored.
func (r *Reconciler) applyObject(ctx context.Context, mc *fluxv1alpha2.MiniCluster, o render.Object) (client.Object, error) {
	desired, err := desiredObject(mc, o)
	if err != nil {
		return nil, err
	}
	applied, err := r.applier.Apply(ctx, desired, apply.ControlledBy(mc))
	var refusal *apply.Refusal
	if !errors.As(err, &refusal) || refusal.Reason != fluxv1alpha2.ReasonConflict {
		return applied, err
	}
	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(o.Kind)
	switch gerr := r.apiReader.Get(ctx, client.ObjectKeyFromObject(desired), existing); {
	case apierrors.IsNotFound(gerr):
		// Gone since it was refused (the garbage collector took an earlier MiniCluster's).
		return nil, fmt.Errorf("%s was deleted while it was read; trying again", refusal.Object)
	case gerr != nil:
		return nil, fmt.Errorf("reading %s, which is in the way: %w", refusal.Object, gerr)
	}
	if wait := leftover(mc, existing, refusal.Object); wait != nil {
		return nil, wait
	}
	if o.Kind.Kind == "Service" {
		// The one name the user picks: say which field.
		return nil, &apply.Refusal{Reason: refusal.Reason, Object: refusal.Object, Err: refusal.Err, Message: "exists and is " +
			"not this MiniCluster's, and MiniClusters cannot share a headless Service: set spec.network.headlessName to a " +
			"name no other Service of the namespace has, or unset it to name the Service after the MiniCluster"}
	}
	return applied, err
}

// leftover returns the wait for obj, named what, when it is in the way of mc's object of its name
// and controlled by an earlier MiniCluster of mc's name: mc, of another UID, took that one's
// place, so it is gone and the garbage collector deletes what it controlled. nil when obj is
// someone else's.
func leftover(mc *fluxv1alpha2.MiniCluster, obj metav1.Object, what string) *waitError {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != "MiniCluster" || ref.Name != mc.Name || ref.UID == mc.UID {
		return nil
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != fluxv1alpha2.GroupName {
		return nil
	}
	return &waitError{reason: fluxv1alpha2.ReasonEarlierObjectsPending, message: fmt.Sprintf(
		"%s was left by an earlier MiniCluster of this name (uid %s), which is gone: the garbage collector deletes it, and this "+
			"MiniCluster's is created then", what, ref.UID)}
}

// desiredObject is the apply request for o: controlled by mc, so that deleting the MiniCluster
// deletes it and the applier knows it for ours, and labelled with mc's name, since the manager
// caches only objects with that label (CacheByObject).
func desiredObject(mc *fluxv1alpha2.MiniCluster, o render.Object) (*unstructured.Unstructured, error) {
	u, err := apply.Request(o.Apply)
	if err != nil {
		return nil, err
	}
	u.SetGroupVersionKind(o.Kind)
	u.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(mc, fluxv1alpha2.GroupVersion.WithKind("MiniCluster"))})
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range names.SelectorLabels(mc) {
		labels[k] = v
	}
	u.SetLabels(labels)
	return u, nil
}
