package member

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/internal/apply"
	"github.com/fluxfed/fluxfed/internal/report"
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
	// BulkWindow is the window of the bulk gate (bulk.go): MiniClusters created BulkCount or
	// more within it wait until the creations slow below that rate. DefaultBulkWindow when 0; a
	// negative one renders each MiniCluster as soon as it is created.
	BulkWindow time.Duration
	// BulkHoldMax bounds how long a MiniCluster created in bulk waits for the bulk to end;
	// DefaultBulkHoldMax when 0.
	BulkHoldMax time.Duration
}

// Defaults for the manager: bringing up a new MiniCluster takes about ten requests (a create,
// then a read and an apply of each of its four other objects, since the applier makes sure an
// object the cache does not show is not someone else's, and the status), so the client needs
// room above client-go's 5 QPS (and controller-runtime's 20) to bring up a hundred MiniClusters
// in seconds; an unchanged MiniCluster costs none.
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
	// applier applies every derived object but the CURVE Secret, which is created once.
	applier  *apply.Applier
	recorder events.EventRecorder
	entropy  io.Reader
	clock    func() time.Time
	// status writes the member's status fields, and knows when the cache has not seen the
	// last write yet.
	status *report.Status
	// settled remembers the MiniClusters whose objects were last found or made as wanted
	// (settled.go).
	settled settledMemory
}

// +kubebuilder:rbac:groups=flux-framework.org,resources=miniclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=flux-framework.org,resources=miniclusters/status,verbs=get;patch
// +kubebuilder:rbac:groups=flux-framework.org,resources=miniclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=services;configmaps,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;deletecollection
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Setup registers the MiniCluster reconciler with the manager. The manager's cache must be
// limited to fluxfed's objects with CacheByObject, or it watches every Secret of the cluster.
func Setup(mgr ctrl.Manager, opts Options) error {
	r := &Reconciler{
		client:    mgr.GetClient(),
		apiReader: mgr.GetAPIReader(),
		applier: &apply.Applier{
			Client: mgr.GetClient(), Live: mgr.GetAPIReader(), FieldOwner: fluxv1alpha2.FieldOwnerMember,
		},
		recorder: mgr.GetEventRecorder(fluxv1alpha2.FieldOwnerMember),
		status:   &report.Status{Client: mgr.GetClient(), Owner: fluxv1alpha2.FieldOwnerMember},
		entropy:  opts.Entropy,
		clock:    opts.Clock,
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
	window := opts.BulkWindow
	if window == 0 {
		window = DefaultBulkWindow
	}
	b := ctrl.NewControllerManagedBy(mgr)
	if window > 0 {
		holdMax := opts.BulkHoldMax
		if holdMax == 0 {
			holdMax = DefaultBulkHoldMax
		}
		gate, creations := newBulkGate(window, holdMax).handler()
		b = b.For(&fluxv1alpha2.MiniCluster{}, builder.WithPredicates(everyEventButANewCreation)).
			Watches(&fluxv1alpha2.MiniCluster{}, gate, builder.WithPredicates(creations))
	} else {
		b = b.For(&fluxv1alpha2.MiniCluster{})
	}
	return b.
		WithOptions(controller.Options{
			MaxConcurrentReconciles: concurrency,
			// controller-runtime v0.24.1's priority queue can deadlock when the controller stops
			// (kubernetes-sigs/controller-runtime#3538, fixed after it): the client-go work queue.
			UsePriorityQueue: ptr.To(false),
		}).
		// Any change or deletion of an owned object brings its MiniCluster back, which puts the
		// object back as rendered: that is all there is to drift correction. An object whose
		// label is stripped leaves the label-filtered cache, which the watch reports as a
		// deletion of the object as it was, owner and label included.
		Owns(&batchv1.Job{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		// A child's CURVE Secret is the hub's doing, a root's the reconciler's: Secrets are
		// mapped to their MiniCluster by label, whoever made them.
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
// cluster in memory (nor need the permission to list them all), and holds them without their
// managedFields, which internal/apply reads live when an apply changes an object, and the
// ConfigMaps with their values as digests (apply.SummarizeConfigMaps).
func CacheByObject() map[client.Object]cache.ByObject {
	selector := labels.NewSelector()
	req, err := labels.NewRequirement(fluxv1alpha2.LabelMiniCluster, "exists", nil)
	if err != nil {
		panic(err) // a constant key; covered by tests
	}
	byLabel := cache.ByObject{Label: selector.Add(*req), Transform: cache.TransformStripManagedFields()}
	// The ConfigMaps' values only by their digests: the entrypoint script is 22 KB of each.
	summarized := cache.ByObject{Label: byLabel.Label, Transform: apply.SummarizeConfigMaps}
	return map[client.Object]cache.ByObject{
		&batchv1.Job{}:      byLabel,
		&corev1.Service{}:   byLabel,
		&corev1.ConfigMap{}: summarized,
		&corev1.Secret{}:    byLabel,
	}
}

// Reconcile brings one MiniCluster's objects to the state its spec describes and reports it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	mc := &fluxv1alpha2.MiniCluster{}
	if err := r.client.Get(ctx, req.NamespacedName, mc); err != nil {
		if apierrors.IsNotFound(err) {
			r.status.Forget(req.NamespacedName)
			r.settled.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !mc.DeletionTimestamp.IsZero() {
		// Everything the MiniCluster owns carries its owner reference: the garbage collector
		// deletes it. Nothing crosses a cluster boundary here, so there is no finalizer.
		r.settled.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	obs, err := r.reconcileObjects(ctx, mc)
	if err == nil {
		// Read before spec.cleanup deletes the pods.
		obs.lead, err = r.readLeadEnd(ctx, mc, obs.job)
	}
	if err == nil {
		err = r.cleanupPods(ctx, mc, obs)
	}
	if statusErr := r.updateStatus(ctx, mc, obs, err); statusErr != nil {
		// Retried whatever err was: the status must say it.
		return ctrl.Result{}, errors.Join(err, statusErr)
	}
	return ctrl.Result{}, outcome(err)
}
