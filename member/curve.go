package member

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
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
// is there, the child waits (a pending condition, not a failure).
func (r *Reconciler) ensureCurveSecret(ctx context.Context, mc *fluxv1alpha2.MiniCluster) (*failure, error) {
	key := client.ObjectKey{Namespace: mc.Namespace, Name: names.CurveSecretName(mc)}
	existing := &corev1.Secret{}
	switch err := r.client.Get(ctx, key, existing); {
	case err == nil:
		if !curveSecretBelongs(mc, existing) {
			return notOurs(key.Name), nil
		}
		return nil, nil
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading the curve Secret: %w", err)
	}
	if pushedByHub(mc) {
		return &failure{pending: true, reason: fluxv1alpha2.ReasonCurveSecretPending, message: fmt.Sprintf(
			"waiting for the hub to push Secret %s with the root's CURVE certificate", key.Name)}, nil
	}

	var cert *curve.Certificate
	var err error
	if mc.Spec.Flux.CurveCert != "" {
		if cert, err = curve.Parse([]byte(mc.Spec.Flux.CurveCert)); err != nil {
			return &failure{reason: fluxv1alpha2.ReasonInvalidSpec, message: "spec.flux.curveCert: " + err.Error()}, nil
		}
	} else if cert, err = curve.Generate(r.entropy, curve.KeygenMetadata(mc.Name, "", r.clock())...); err != nil {
		return nil, err
	}

	secret := render.CurveSecret(mc, curve.File(cert))
	if err := ctrl.SetControllerReference(mc, secret, r.client.Scheme()); err != nil {
		return nil, fmt.Errorf("owning the curve Secret: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("Creating the CURVE certificate Secret", "secret", key.Name)
	err = r.client.Create(ctx, secret)
	switch {
	case err == nil:
		return nil, nil
	case !apierrors.IsAlreadyExists(err):
		return nil, fmt.Errorf("creating the curve Secret: %w", err)
	}
	// The cache holds only Secrets with the MiniCluster label, so a Secret it did not show may
	// be ours (created by a reconcile the cache has not caught up with) or someone else's.
	// Only the API server can tell.
	if err := r.apiReader.Get(ctx, key, existing); err != nil {
		return nil, fmt.Errorf("reading the curve Secret: %w", err)
	}
	if !curveSecretBelongs(mc, existing) {
		return notOurs(key.Name), nil
	}
	return nil, nil
}

func notOurs(name string) *failure {
	return &failure{reason: fluxv1alpha2.ReasonApplyFailed, message: fmt.Sprintf(
		"Secret %s exists and does not belong to this MiniCluster; delete it or rename the MiniCluster", name)}
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
