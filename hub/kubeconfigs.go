package hub

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/multicluster-runtime/providers/kubeconfig"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hub/members"
)

// kubeconfigCheck tells, on each member's kubeconfig Secret, whether the hub refuses it. The
// provider refuses such a kubeconfig too (members.CheckRESTConfig), but only in its log.
type kubeconfigCheck struct {
	client   client.Client
	recorder events.EventRecorder
	// reported holds, per Secret, the resourceVersion last reported and whether it was refused.
	reported sync.Map
}

type kubeconfigVerdict struct {
	resourceVersion string
	refused         bool
}

func setupKubeconfigCheck(mgr manager.Manager, namespace string) error {
	c := &kubeconfigCheck{client: mgr.GetClient(), recorder: mgr.GetEventRecorder(fluxv1alpha2.FieldOwnerHub)}
	return ctrl.NewControllerManagedBy(mgr).
		Named("member-kubeconfig").
		For(&corev1.Secret{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(obj client.Object) bool {
			return obj.GetNamespace() == namespace && obj.GetLabels()[kubeconfig.DefaultKubeconfigSecretLabel] == "true"
		}))).
		Complete(c)
}

func (c *kubeconfigCheck) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	secret := &corev1.Secret{}
	if err := c.client.Get(ctx, req.NamespacedName, secret); err != nil {
		if apierrors.IsNotFound(err) {
			c.reported.Delete(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	_, err := members.Check(secret.Data[kubeconfig.DefaultKubeconfigSecretKey])
	last, seen := c.reported.Load(req.NamespacedName)
	if seen && last.(kubeconfigVerdict).resourceVersion == secret.ResourceVersion {
		return ctrl.Result{}, nil
	}
	wasRefused := seen && last.(kubeconfigVerdict).refused
	switch {
	case err != nil:
		c.recorder.Eventf(secret, nil, corev1.EventTypeWarning, fluxv1alpha2.ReasonKubeconfigRefused, "CheckKubeconfig",
			"member %s is not used: %v", secret.Name, err)
	case wasRefused:
		c.recorder.Eventf(secret, nil, corev1.EventTypeNormal, "KubeconfigAccepted", "CheckKubeconfig",
			"member %s: the kubeconfig passes the hub's checks now", secret.Name)
	}
	c.reported.Store(req.NamespacedName, kubeconfigVerdict{resourceVersion: secret.ResourceVersion, refused: err != nil})
	return ctrl.Result{}, nil
}
