package member

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/member/render"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// Options configure the MiniCluster reconciler.
type Options struct {
	// Entropy is the source of new CURVE keypairs; crypto/rand when nil.
	Entropy io.Reader
	// Clock stamps condition transitions; time.Now when nil.
	Clock func() time.Time
	// MaxConcurrentReconciles is how many MiniClusters are reconciled at once;
	// DefaultConcurrency when 0.
	MaxConcurrentReconciles int
}

// Defaults for the manager: a reconcile of a new MiniCluster is about six requests, so the
// client needs room above client-go's 5 QPS (and controller-runtime's 20) to bring up a hundred
// MiniClusters in about a second; an unchanged MiniCluster costs none.
const (
	DefaultConcurrency = 16
	DefaultAPIQPS      = 200
	DefaultAPIBurst    = 400
)

// Reconciler turns MiniClusters into their Flux instance on this cluster.
type Reconciler struct {
	client client.Client
	// apiReader reads from the API server, past the label-filtered cache.
	apiReader client.Reader
	recorder  events.EventRecorder
	entropy   io.Reader
	clock     func() time.Time
	// statusWrittenAt maps a MiniCluster's key to the resourceVersion it had when its status was
	// last written. A reconcile that starts from that same version reads a cache that has not
	// seen the write yet; it must not write the same status again.
	statusWrittenAt sync.Map
}

// +kubebuilder:rbac:groups=flux-framework.org,resources=miniclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=flux-framework.org,resources=miniclusters/status,verbs=get;patch
// +kubebuilder:rbac:groups=flux-framework.org,resources=miniclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=services;configmaps,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=pods,verbs=deletecollection
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Setup registers the MiniCluster reconciler with the manager. The manager's cache must be
// limited to fluxfed's objects with CacheByObject, or it watches every Secret of the cluster.
func Setup(mgr ctrl.Manager, opts Options) error {
	r := &Reconciler{
		client:    mgr.GetClient(),
		apiReader: mgr.GetAPIReader(),
		recorder:  mgr.GetEventRecorder(fluxv1alpha2.FieldOwnerMember),
		entropy:   opts.Entropy,
		clock:     opts.Clock,
	}
	if r.entropy == nil {
		r.entropy = rand.Reader
	}
	if r.clock == nil {
		r.clock = time.Now
	}
	concurrency := opts.MaxConcurrentReconciles
	if concurrency == 0 {
		concurrency = DefaultConcurrency
	}
	return ctrl.NewControllerManagedBy(mgr).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		For(&fluxv1alpha2.MiniCluster{}).
		Owns(&batchv1.Job{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		// A child's CURVE Secret is pushed by the hub and owned by no one at first: Secrets are
		// mapped to their MiniCluster by label, which covers the Secrets the reconciler owns too.
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(secretToMiniCluster)).
		Named("minicluster").
		Complete(r)
}

// secretToMiniCluster maps a CURVE Secret to the MiniCluster its label names.
func secretToMiniCluster(_ context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[fluxv1alpha2.LabelMiniCluster]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
}

// CacheByObject limits the manager's cache of the kinds the reconciler owns to objects that carry
// the MiniCluster label, so fluxfed does not hold every Job, Service, ConfigMap and Secret of the
// cluster in memory (nor need the permission to list them all).
func CacheByObject() map[client.Object]cache.ByObject {
	selector := labels.NewSelector()
	req, err := labels.NewRequirement(fluxv1alpha2.LabelMiniCluster, "exists", nil)
	if err != nil {
		panic(err) // a constant key; covered by tests
	}
	byLabel := cache.ByObject{Label: selector.Add(*req)}
	return map[client.Object]cache.ByObject{
		&batchv1.Job{}:      byLabel,
		&corev1.Service{}:   byLabel,
		&corev1.ConfigMap{}: byLabel,
		&corev1.Secret{}:    byLabel,
	}
}

// Reconcile brings one MiniCluster's objects to the state its spec describes and reports it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	mc := &fluxv1alpha2.MiniCluster{}
	if err := r.client.Get(ctx, req.NamespacedName, mc); err != nil {
		if apierrors.IsNotFound(err) {
			r.statusWrittenAt.Delete(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !mc.DeletionTimestamp.IsZero() {
		// Everything the MiniCluster owns carries its owner reference: the garbage collector
		// deletes it. Nothing crosses a cluster boundary here, so there is no finalizer.
		return ctrl.Result{}, nil
	}
	obs, err := r.reconcileObjects(ctx, mc)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.cleanupPods(ctx, mc, obs); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.updateStatus(ctx, mc, obs)
}

// reconcileObjects renders the MiniCluster and applies what changed. A spec that cannot be
// rendered, or that the API server refuses, ends in obs.failure rather than an error: a retry
// cannot fix it, the next spec change will.
func (r *Reconciler) reconcileObjects(ctx context.Context, mc *fluxv1alpha2.MiniCluster) (observation, error) {
	var obs observation
	job := &batchv1.Job{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: mc.Namespace, Name: names.JobName(mc)}, job); err == nil {
		obs.job = job
	} else if !apierrors.IsNotFound(err) {
		return obs, fmt.Errorf("reading the Job: %w", err)
	}

	objects, hostlist, fail, err := r.render(ctx, mc)
	if err != nil || fail != nil {
		obs.failure = fail
		return obs, err
	}
	obs.hostlist = hostlist

	for _, d := range objects {
		applied, fail, err := r.apply(ctx, mc, d)
		if err != nil || fail != nil {
			obs.failure = fail
			return obs, err
		}
		// The services Job is a Job too; the status follows the brokers' Job only.
		if applied != nil && applied.GetKind() == "Job" && applied.GetName() == names.JobName(mc) {
			if obs.job, err = toJob(applied); err != nil {
				return obs, err
			}
		}
	}
	return obs, nil
}

// render builds every object the MiniCluster needs, in the order they are applied.
func (r *Reconciler) render(ctx context.Context, mc *fluxv1alpha2.MiniCluster) ([]desired, string, *failure, error) {
	rendered, err := render.Render(mc)
	if err != nil {
		return nil, "", &failure{reason: fluxv1alpha2.ReasonInvalidSpec, message: err.Error()}, nil
	}
	if fail, err := r.ensureCurveSecret(ctx, mc); err != nil || fail != nil {
		return nil, "", fail, err
	}
	out := make([]desired, 0, len(rendered.Objects))
	for _, o := range rendered.Objects {
		d, err := newDesired(mc, o.Apply, o.Kind)
		if err != nil {
			return nil, "", nil, err
		}
		out = append(out, d)
	}
	return out, rendered.Layout.GlobalHostlist, nil, nil
}

// apply server-side applies d unless the cached object already holds it. It returns the object
// as the API server stored it, or nil when nothing was sent.
func (r *Reconciler) apply(ctx context.Context, mc *fluxv1alpha2.MiniCluster, d desired) (*unstructured.Unstructured, *failure, error) {
	log := ctrl.LoggerFrom(ctx)
	// A typed object is read from the informer cache; an unstructured one would be a live GET.
	typed, err := r.client.Scheme().New(d.obj.GroupVersionKind())
	if err != nil {
		return nil, nil, fmt.Errorf("no type for %s: %w", d.obj.GroupVersionKind(), err)
	}
	current, ok := typed.(client.Object)
	if !ok {
		return nil, nil, fmt.Errorf("%s is not an object", d.obj.GroupVersionKind())
	}
	err = r.client.Get(ctx, client.ObjectKeyFromObject(d.obj), current)
	switch {
	case apierrors.IsNotFound(err):
		current = nil
	case err != nil:
		return nil, nil, fmt.Errorf("reading %s %s: %w", d.obj.GetKind(), d.obj.GetName(), err)
	}
	if current != nil {
		if owner := metav1.GetControllerOf(current); owner != nil && owner.UID != mc.UID {
			return nil, &failure{reason: fluxv1alpha2.ReasonApplyFailed, message: fmt.Sprintf(
				"%s %s already belongs to %s %s; give this MiniCluster its own name for it (for the headless Service: spec.network.headlessName)",
				d.obj.GetKind(), d.obj.GetName(), owner.Kind, owner.Name)}, nil
		}
		if d.upToDate(current) {
			return nil, nil, nil
		}
	}

	log.V(1).Info("Applying "+d.obj.GetKind(), "object", klog.KObj(d.obj))
	obj := d.obj.DeepCopy()
	err = r.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj),
		client.FieldOwner(fluxv1alpha2.FieldOwnerMember), client.ForceOwnership)
	switch {
	case err == nil:
		return obj, nil, nil
	case apierrors.IsInvalid(err) && strings.Contains(err.Error(), "immutable"):
		return nil, &failure{reason: fluxv1alpha2.ReasonImmutableFieldChanged, message: fmt.Sprintf(
			"the change cannot be applied to the running %s %s (%s); delete and re-create the MiniCluster to apply it",
			d.obj.GetKind(), d.obj.GetName(), apiMessage(err))}, nil
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return nil, &failure{reason: fluxv1alpha2.ReasonApplyFailed, message: fmt.Sprintf(
			"the API server refused %s %s: %s", d.obj.GetKind(), d.obj.GetName(), apiMessage(err))}, nil
	default:
		return nil, nil, fmt.Errorf("applying %s %s: %w", d.obj.GetKind(), d.obj.GetName(), err)
	}
}

func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	return err.Error()
}

func toJob(u *unstructured.Unstructured) (*batchv1.Job, error) {
	job := &batchv1.Job{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, job); err != nil {
		return nil, fmt.Errorf("reading the applied Job: %w", err)
	}
	return job, nil
}

// cleanupPods deletes the broker pods once the Job completed, when spec.cleanup asks for it. It
// runs on the reconcile that first sees the completion: the status written right after records
// Complete=True, so later reconciles do not repeat it.
func (r *Reconciler) cleanupPods(ctx context.Context, mc *fluxv1alpha2.MiniCluster, obs observation) error {
	if !mc.Spec.Cleanup || obs.job == nil || jobCondition(obs.job, batchv1.JobComplete) == nil {
		return nil
	}
	if c := findCondition(mc.Status.Conditions, fluxv1alpha2.ConditionComplete); c != nil && c.Status == metav1.ConditionTrue {
		return nil
	}
	ctrl.LoggerFrom(ctx).Info("Deleting the finished broker pods (spec.cleanup)")
	err := r.client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(mc.Namespace),
		client.MatchingLabels(names.SelectorLabels(mc)), client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil {
		return fmt.Errorf("deleting the finished pods: %w", err)
	}
	return nil
}
