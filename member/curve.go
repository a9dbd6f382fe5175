package member

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/member/apply"
	"github.com/fluxfed/fluxfed/member/render"
	"github.com/fluxfed/fluxfed/member/render/curve"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// ensureCurveSecret makes sure the MiniCluster's CURVE Secret exists. The keypair is generated
// once and never regenerated: every broker of the instance must keep the same certificate. With
// spec.flux.curveCert the given certificate is stored instead, after checking it is one a broker
// accepts. The Secret is created, not applied; AlreadyExists means another reconcile won the race,
// which is as good as success.
//
// A child the hub pushed (it carries origin labels) never gets a certificate of its own: its
// brokers must present the root's, which the hub pushes as the child's Secret. Until that Secret
// is there, the child waits.
func (r *Reconciler) ensureCurveSecret(ctx context.Context, mc *fluxv1alpha2.MiniCluster) error {
	key := client.ObjectKey{Namespace: mc.Namespace, Name: names.CurveSecretName(mc)}
	existing := &corev1.Secret{}
	switch err := r.client.Get(ctx, key, existing); {
	case err == nil:
		return checkCurveSecret(mc, existing)
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading the CURVE Secret: %w", err)
	}
	if pushedByHub(mc) {
		return &waitError{reason: fluxv1alpha2.ReasonCurveSecretPending, message: fmt.Sprintf(
			"waiting for the hub to push Secret %s with the root's CURVE certificate", key.Name)}
	}

	var cert *curve.Certificate
	var err error
	if mc.Spec.Flux.CurveCert != "" {
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
		return nil
	case !apierrors.IsAlreadyExists(err):
		return fmt.Errorf("creating the CURVE Secret: %w", err)
	}
	// The cache holds only Secrets with the MiniCluster label, so a Secret it did not show may
	// be ours (created by a reconcile the cache has not caught up with) or someone else's.
	// Only the API server can tell.
	if err := r.apiReader.Get(ctx, key, existing); err != nil {
		return fmt.Errorf("reading the CURVE Secret: %w", err)
	}
	return checkCurveSecret(mc, existing)
}

// checkCurveSecret refuses a Secret of the name that is not mc's: fluxfed never takes it.
func checkCurveSecret(mc *fluxv1alpha2.MiniCluster, secret *corev1.Secret) error {
	if !curveSecretBelongs(mc, secret) {
		return &apply.Refusal{Reason: fluxv1alpha2.ReasonConflict, Object: "Secret " + secret.Namespace + "/" + secret.Name,
			Message: "exists and does not belong to this MiniCluster; fluxfed does not change or delete it: delete it, or rename the MiniCluster"}
	}
	return nil
}

// pushedByHub reports whether mc is a child the hub pushed: it carries a complete origin.
func pushedByHub(mc *fluxv1alpha2.MiniCluster) bool {
	_, ok := fluxv1alpha2.OriginOf(mc)
	return ok
}

// curveSecretBelongs reports whether secret is mc's CURVE Secret: mc controls it, or, for a child
// the hub pushed, the hub pushed it for the same root (the same origin, root UID included).
func curveSecretBelongs(mc *fluxv1alpha2.MiniCluster, secret *corev1.Secret) bool {
	if owner := metav1.GetControllerOf(secret); owner != nil {
		return owner.UID == mc.UID
	}
	origin, ok := fluxv1alpha2.OriginOf(mc)
	return ok && origin.Marks(secret)
}
