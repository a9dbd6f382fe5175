package hub

import (
	"context"
	"fmt"
	"slices"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mchandler "sigs.k8s.io/multicluster-runtime/pkg/handler"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/providers/kubeconfig"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// Members lists the member clusters the hub is engaged with: the kubeconfig provider.
type Members interface {
	ListClusters() []multicluster.ClusterName
}

// What the hub needs on its own cluster (deploy/hub); the MiniCluster reconciler's own
// permissions are in deploy/rbac. Namespaces: get is for naming the hub after kube-system.
// +kubebuilder:rbac:groups=flux-framework.org,resources=miniclusters,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=flux-framework.org,resources=miniclusters/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=pods;nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler bursts the root MiniClusters of the hub onto its member clusters: it exposes each
// root's lead broker, pushes the children and their CURVE Secret, reports their state on the
// root and removes them when the root goes.
type Reconciler struct {
	opts     Options
	mgr      mcmanager.Manager
	client   client.Client
	members  Members
	recorder events.EventRecorder

	// probes remembers the last greeting of each root's lead broker (by root UID).
	probes sync.Map
	// namespaces remembers the member namespaces known to exist, per engaged cluster.
	namespaces sync.Map
}

// Setup adds the hub to mgr: the root reconciler, the check of member kubeconfigs and the
// orphan sweep. members is the provider mgr was built with (see NewProvider). The local
// manager's cache must hold the Secrets of opts.MembersNamespace (LocalSecretCache).
func Setup(mgr mcmanager.Manager, members Members, opts Options) (*Reconciler, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	local := mgr.GetLocalManager()
	r := &Reconciler{
		opts:     opts,
		mgr:      mgr,
		client:   local.GetClient(),
		members:  members,
		recorder: local.GetEventRecorder(fluxv1alpha2.FieldOwnerHub),
	}

	engagements := &engagements{events: make(chan event.TypedGenericEvent[multicluster.ClusterName], 64)}
	if err := mgr.Add(engagements); err != nil {
		return nil, err
	}
	if err := local.Add(&sweeper{r: r}); err != nil {
		return nil, err
	}
	if err := setupKubeconfigCheck(local, opts.MembersNamespace); err != nil {
		return nil, err
	}

	localOnly := []mcbuilder.EngageOptions{mcbuilder.WithEngageWithLocalCluster(true), mcbuilder.WithEngageWithProviderClusters(false)}
	membersOnly := []mcbuilder.EngageOptions{mcbuilder.WithEngageWithLocalCluster(false), mcbuilder.WithEngageWithProviderClusters(true)}
	return r, mcbuilder.ControllerManagedBy(mgr).
		Named("hub").
		For(&fluxv1alpha2.MiniCluster{}, localOnly[0], localOnly[1], mcbuilder.WithPredicates(predicate.NewPredicateFuncs(isRootOfHub))).
		Owns(&corev1.Service{}, localOnly[0], localOnly[1]).
		Watches(&corev1.Pod{}, toLocal(r.leadPodToRoot), localOnly[0], localOnly[1]).
		Watches(&corev1.Secret{}, toLocal(r.secretToRoots), localOnly[0], localOnly[1]).
		Watches(&fluxv1alpha2.MiniCluster{}, toLocal(r.childToRoot), membersOnly[0], membersOnly[1]).
		WatchesRawSource(source.TypedChannel(engagements.events, handler.TypedEnqueueRequestsFromMapFunc(
			func(ctx context.Context, name multicluster.ClusterName) []mcreconcile.Request {
				return r.rootsOf(ctx, string(name))
			}))).
		WithOptions(controller.TypedOptions[mcreconcile.Request]{
			MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
			SkipNameValidation:      local.GetControllerOptions().SkipNameValidation,
			// Engaging a member waits for this controller's watch of it to sync; a member that
			// does not answer fails its engagement after this long, and is retried, instead of
			// holding up the provider.
			CacheSyncTimeout: opts.MemberSyncTimeout,
			RateLimiter:      workqueue.NewTypedItemExponentialFailureRateLimiter[mcreconcile.Request](opts.RetryBase, opts.RetryMax),
		}).
		Complete(r)
}

// isRootOfHub tells the roots the hub reconciles: MiniClusters with a burst to push, and those
// still carrying the hub's finalizer (their bursts were removed, or they are being deleted).
func isRootOfHub(obj client.Object) bool {
	mc, ok := obj.(*fluxv1alpha2.MiniCluster)
	return ok && (hasPushedBursts(mc) || slices.Contains(mc.Finalizers, fluxv1alpha2.FinalizerBursts))
}

// hasPushedBursts reports whether mc is a root with at least one burst that names a member.
func hasPushedBursts(mc *fluxv1alpha2.MiniCluster) bool {
	return !mc.IsBurstChild() && slices.ContainsFunc(mc.Spec.Flux.Bursting.Clusters, func(b fluxv1alpha2.Burst) bool { return b.Cluster != "" })
}

// toLocal turns a map function into a handler whose requests are for roots on the hub,
// whichever cluster the event came from.
func toLocal(fn func(context.Context, client.Object) []mcreconcile.Request) mchandler.TypedEventHandlerFunc[client.Object, mcreconcile.Request] {
	return func(multicluster.ClusterName, cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
		return handler.TypedEnqueueRequestsFromMapFunc(fn)
	}
}

func rootRequest(namespace, name string) mcreconcile.Request {
	return mcreconcile.Request{Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}}
}

// leadPodToRoot maps the pod of a root's rank 0 to the root: where it runs is the address the
// bursts dial.
func (r *Reconciler) leadPodToRoot(_ context.Context, obj client.Object) []mcreconcile.Request {
	name := obj.GetLabels()[fluxv1alpha2.LabelMiniCluster]
	if name == "" || obj.GetLabels()[batchv1.JobCompletionIndexAnnotation] != "0" {
		return nil
	}
	return []mcreconcile.Request{rootRequest(obj.GetNamespace(), name)}
}

// secretToRoots maps a member's kubeconfig Secret to the roots that burst onto the member, and
// a root's CURVE Secret to the root: the children wait for it.
func (r *Reconciler) secretToRoots(ctx context.Context, obj client.Object) []mcreconcile.Request {
	if name := obj.GetLabels()[fluxv1alpha2.LabelMiniCluster]; name != "" {
		return []mcreconcile.Request{rootRequest(obj.GetNamespace(), name)}
	}
	if obj.GetNamespace() != r.opts.MembersNamespace || obj.GetLabels()[kubeconfig.DefaultKubeconfigSecretLabel] != "true" {
		return nil
	}
	return r.rootsOf(ctx, obj.GetName())
}

// childToRoot maps a child on a member to its root, when this hub pushed it.
func (r *Reconciler) childToRoot(_ context.Context, obj client.Object) []mcreconcile.Request {
	hub, namespace, name, _, ok := OriginOf(obj)
	if !ok || hub != r.opts.Name {
		return nil
	}
	return []mcreconcile.Request{rootRequest(namespace, name)}
}

// rootsOf returns the roots that burst onto member, or that still carry the hub's finalizer
// (they may have children there to delete).
func (r *Reconciler) rootsOf(ctx context.Context, member string) []mcreconcile.Request {
	var list fluxv1alpha2.MiniClusterList
	if err := r.client.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the roots of a member", "member", member)
		return nil
	}
	var out []mcreconcile.Request
	for i := range list.Items {
		mc := &list.Items[i]
		targets := slices.ContainsFunc(mc.Spec.Flux.Bursting.Clusters, func(b fluxv1alpha2.Burst) bool { return b.Cluster == member })
		if targets || slices.Contains(mc.Finalizers, fluxv1alpha2.FinalizerBursts) {
			out = append(out, rootRequest(mc.Namespace, mc.Name))
		}
	}
	return out
}

// Reconcile brings one root's federation to the state its spec describes and reports it.
func (r *Reconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
	if req.ClusterName != mcmanager.LocalCluster {
		return reconcile.Result{}, nil
	}
	root := &fluxv1alpha2.MiniCluster{}
	if err := r.client.Get(ctx, req.NamespacedName, root); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	switch {
	case !root.DeletionTimestamp.IsZero():
		return r.finalize(ctx, root)
	case !hasPushedBursts(root):
		// Every burst that named a member was removed (or the root never had one, and a child
		// of its name turned up on a member): its children go, then the finalizer.
		return r.unburst(ctx, root)
	}
	if err := r.ensureFinalizer(ctx, root); err != nil {
		return reconcile.Result{}, err
	}
	return r.burst(ctx, root)
}

// engagements tells the hub when a member is engaged or disengaged, so that the roots bursting
// onto it are reconciled at once instead of at their next retry.
type engagements struct {
	events chan event.TypedGenericEvent[multicluster.ClusterName]
	mu     sync.Mutex
	stop   <-chan struct{}
}

func (e *engagements) Start(ctx context.Context) error {
	e.mu.Lock()
	e.stop = ctx.Done()
	e.mu.Unlock()
	<-ctx.Done()
	return nil
}

// Engage is called by the manager for every member the provider engages; ctx ends when the
// member is disengaged. It also starts the member cache's informer of Secrets (the watch of
// children starts that of MiniClusters), so the first push to a member does not wait for it.
func (e *engagements) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	if _, err := cl.GetCache().GetInformer(ctx, &corev1.Secret{}, cache.BlockUntilSynced(false)); err != nil {
		return fmt.Errorf("watching the Secrets of member %s: %w", name, err)
	}
	e.mu.Lock()
	stop := e.stop
	e.mu.Unlock()
	send := func() {
		select {
		case e.events <- event.TypedGenericEvent[multicluster.ClusterName]{Object: name}:
		case <-stop:
		}
	}
	go func() {
		send()
		<-ctx.Done()
		send()
	}()
	return nil
}

// NeedLeaderElection is false: the notifications are harmless on a standby, whose controller
// does not run.
func (e *engagements) NeedLeaderElection() bool { return false }

// ensureFinalizer adds the hub's finalizer to root with server-side apply: the hub owns that
// entry of metadata.finalizers and nothing else.
func (r *Reconciler) ensureFinalizer(ctx context.Context, root *fluxv1alpha2.MiniCluster) error {
	if slices.Contains(root.Finalizers, fluxv1alpha2.FinalizerBursts) {
		return nil
	}
	return r.applyFinalizer(ctx, root, []string{fluxv1alpha2.FinalizerBursts})
}

// releaseFinalizer removes the hub's finalizer: applying no finalizers as the hub's field owner
// drops the one entry it owns.
func (r *Reconciler) releaseFinalizer(ctx context.Context, root *fluxv1alpha2.MiniCluster) error {
	if !slices.Contains(root.Finalizers, fluxv1alpha2.FinalizerBursts) {
		return nil
	}
	return r.applyFinalizer(ctx, root, []string{})
}

func (r *Reconciler) applyFinalizer(ctx context.Context, root *fluxv1alpha2.MiniCluster, finalizers []string) error {
	u := metaApplyObject(root)
	u.SetFinalizers(finalizers)
	u.SetUID(root.UID)
	err := r.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fluxv1alpha2.FieldOwnerHub), client.ForceOwnership)
	// Releasing the finalizer of a root that is gone (or re-created: the UID does not match) is
	// done already.
	if apierrors.IsNotFound(err) || (apierrors.IsConflict(err) && len(finalizers) == 0) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("applying the finalizer %s: %w", fluxv1alpha2.FinalizerBursts, err)
	}
	return nil
}

// Member returns the engaged cluster of a member, or why there is none.
func (r *Reconciler) Member(ctx context.Context, name string) (cluster.Cluster, error) {
	cl, _, err := r.member(ctx, name)
	return cl, err
}

// eventf records an event on root.
func (r *Reconciler) eventf(root *fluxv1alpha2.MiniCluster, eventType, reason, action, format string, args ...any) {
	r.recorder.Eventf(root, nil, eventType, reason, action, format, args...)
}

// now is the hub's clock as a metav1.Time.
func (r *Reconciler) now() metav1.Time { return metav1.NewTime(r.opts.Clock()) }
