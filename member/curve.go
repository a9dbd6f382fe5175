package member

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/internal/apply"
	"github.com/fluxfed/fluxfed/internal/report"
	"github.com/fluxfed/fluxfed/member/render"
	"github.com/fluxfed/fluxfed/member/render/curve"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// ensureCurveSecret makes sure the MiniCluster's CURVE Secret exists. The keypair is generated
// once and never regenerated while the Secret exists: every broker of the instance must present
// the same certificate. With spec.flux.curveCert the given certificate is stored instead, after
// checking it is one a broker accepts. The Secret is created, not applied, so that its data is
// never sent again; AlreadyExists means another reconcile won the race, which is as good as
// success.
//
// A root whose Secret was deleted gets a new one, and the user is told that the brokers already
// running hold the old certificate. A child the hub pushed (it carries origin labels) never gets
// a certificate of its own: its brokers must present the root's, which the hub pushes as the
// child's Secret. Until that Secret is there, the child waits.
func (r *Reconciler) ensureCurveSecret(ctx context.Context, mc *fluxv1alpha2.MiniCluster, obs *observation) error {
	key := client.ObjectKey{Namespace: mc.Namespace, Name: names.CurveSecretName(mc)}
	child := pushedByHub(mc)
	secret := &corev1.Secret{}
	err := r.client.Get(ctx, key, secret)
	if apierrors.IsNotFound(err) && child {
		// The cache misses a Secret whose labels were stripped. A root learns of it when its
		// create is refused; a child creates nothing, so it asks the API server.
		err = r.apiReader.Get(ctx, key, secret)
	}
	switch {
	case err == nil:
		return r.keepCurveSecret(ctx, mc, secret)
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading the CURVE Secret: %w", err)
	case child:
		return &waitError{reason: fluxv1alpha2.ReasonCurveSecretPending, message: fmt.Sprintf(
			"waiting for the hub to push Secret %s with the root's CURVE certificate", key.Name)}
	}
	return r.createCurveSecret(ctx, mc, obs)
}

// createCurveSecret creates the root's CURVE Secret. A create that finds the Secret there falls
// back on keepCurveSecret.
func (r *Reconciler) createCurveSecret(ctx context.Context, mc *fluxv1alpha2.MiniCluster, obs *observation) error {
	var cert *curve.Certificate
	var err error
	generated := mc.Spec.Flux.CurveCert == ""
	if !generated {
		if cert, err = curve.Parse([]byte(mc.Spec.Flux.CurveCert)); err != nil {
			return &invalidSpecError{err: fmt.Errorf("spec.flux.curveCert: %w", err)}
		}
	} else if cert, err = curve.Generate(r.entropy, curve.KeygenMetadata(mc.Name, "", r.clock())...); err != nil {
		return fmt.Errorf("generating the CURVE certificate: %w", err)
	}

	secret := render.CurveSecret(mc, curve.File(cert))
	if err := ctrl.SetControllerReference(mc, secret, r.client.Scheme()); err != nil {
		return fmt.Errorf("owning the CURVE Secret: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("Creating the CURVE certificate Secret", "secret", klog.KObj(secret))
	err = r.client.Create(ctx, secret)
	switch {
	case err == nil:
		// The broker Job is applied after the Secret: when it exists, its brokers started with
		// a Secret that is gone.
		if generated && obs.job != nil {
			obs.events = append(obs.events, curveSecretRegenerated(mc))
		}
		return nil
	case !apierrors.IsAlreadyExists(err):
		return fmt.Errorf("creating the CURVE Secret: %w", err)
	}
	// The cache holds only Secrets with the MiniCluster label, so a Secret it did not show may
	// be ours (created by a reconcile the cache has not caught up with, or stripped of its
	// labels) or someone else's. Only the API server can tell.
	existing := &corev1.Secret{}
	if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(secret), existing); err != nil {
		return fmt.Errorf("reading the CURVE Secret: %w", err)
	}
	return r.keepCurveSecret(ctx, mc, existing)
}

// keepCurveSecret checks that the existing Secret is mc's and puts back the label that the
// manager's cache selects on and that maps the Secret to mc, when someone removed it. Nothing
// else of it is ever changed: its data is immutable.
func (r *Reconciler) keepCurveSecret(ctx context.Context, mc *fluxv1alpha2.MiniCluster, secret *corev1.Secret) error {
	if !curveSecretBelongs(mc, secret) {
		if wait := leftover(mc, secret, "Secret "+secret.Namespace+"/"+secret.Name); wait != nil {
			return wait
		}
		return &apply.Refusal{Reason: fluxv1alpha2.ReasonConflict, Object: "Secret " + secret.Namespace + "/" + secret.Name,
			Message: "exists and does not belong to this MiniCluster; fluxfed does not change or delete it: delete it, or rename the MiniCluster"}
	}
	want := names.SelectorLabels(mc)
	if labels.SelectorFromSet(want).Matches(labels.Set(secret.Labels)) {
		return nil
	}
	patch := client.MergeFrom(secret.DeepCopy())
	if secret.Labels == nil {
		secret.Labels = map[string]string{}
	}
	for k, v := range want {
		secret.Labels[k] = v
	}
	ctrl.LoggerFrom(ctx).Info("Restoring the labels of the CURVE certificate Secret", "secret", klog.KObj(secret))
	if err := r.client.Patch(ctx, secret, patch, client.FieldOwner(fluxv1alpha2.FieldOwnerMember)); err != nil {
		return fmt.Errorf("restoring the labels of the CURVE Secret: %w", err)
	}
	return nil
}

// curveSecretRegenerated is the event that tells the user the brokers now hold two certificates.
func curveSecretRegenerated(mc *fluxv1alpha2.MiniCluster) report.Event {
	return report.Event{Type: corev1.EventTypeWarning, Reason: fluxv1alpha2.EventCurveSecretRegenerated, Action: "CreateCurveSecret",
		Note: fmt.Sprintf("Secret %s was deleted, and a new CURVE certificate was generated. Brokers started before hold the old "+
			"certificate and will not join brokers that start with the new one: delete the MiniCluster's pods "+
			"(kubectl delete pods -n %s -l %s=%s) so that all of them start with the new one, or re-create the MiniCluster",
			names.CurveSecretName(mc), mc.Namespace, fluxv1alpha2.LabelMiniCluster, mc.Name)}
}

// pushedByHub reports whether mc is a child the hub pushed: it carries a complete origin.
func pushedByHub(mc *fluxv1alpha2.MiniCluster) bool {
	_, ok := fluxv1alpha2.OriginOf(mc)
	return ok
}

// curveSecretBelongs reports whether secret is mc's CURVE Secret: mc controls it. The member
// reconciler creates a root's Secret with that reference, and the hub pushes a child's with it.
// Labels prove nothing (anyone who may write a Secret may write them), so a Secret that carries
// the child's origin labels and no such reference is someone else's.
func curveSecretBelongs(mc *fluxv1alpha2.MiniCluster, secret *corev1.Secret) bool {
	owner := metav1.GetControllerOf(secret)
	return owner != nil && owner.UID == mc.UID
}
