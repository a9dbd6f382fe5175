package hub

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mchandler "sigs.k8s.io/multicluster-runtime/pkg/handler"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/bursting"
	"github.com/fluxfed/fluxfed/internal/metrics"
	"github.com/fluxfed/fluxfed/internal/report"
)

// What the hub needs on its own cluster (deploy/hub); the MiniCluster reconciler's own
// permissions are in deploy/rbac. Namespaces: get is for naming the hub after kube-system.
// Secrets: create, in the members namespace only, is for the hub's ownership key (proof.go).
// +kubebuilder:rbac:groups=flux-framework.org,resources=miniclusters,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=flux-framework.org,resources=miniclusters/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=pods;nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=fluxfed-system,resources=secrets,verbs=create
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler bursts the root MiniClusters of the hub onto its member clusters: it exposes each
// root's lead broker, pushes the children and their CURVE Secret, reports their state on the
// root and removes them when the root goes.
type Reconciler struct {
	opts     Options
	client   client.Client
	live     client.Reader
	members  Members
	recorder events.EventRecorder
	// status writes the hub's fields of the roots' status.
	status *report.Status

	// memory is what the hub keeps of each root between reconciles (memory.go).
	memory memory
	// namespaces remembers the member namespaces known to exist, per engaged cluster.
	namespaces sync.Map
	// orphansMu serializes the writes of MemberClusters' status.orphans.
	orphansMu sync.Mutex
	// keys holds the key of the hub's proofs of ownership, once read.
	keys keyring
	// wakes wakes the roots whose Flux instance told a follower of a change (fluxstream.go), and
	// those whose lead broker's greeting changed (leadprobe.go).
	wakes wakes
	// probing is set while the lead prober runs: a root is then greeted by it, not requeued for it.
	probing atomic.Bool
}

// Setup adds the hub to mgr: the root reconciler and the orphan sweep. registry is the provider
// mgr was built with; members.Setup runs the MemberCluster reconciler that keeps it.
func Setup(mgr mcmanager.Manager, registry Members, opts Options) (*Reconciler, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	local := mgr.GetLocalManager()
	if opts.Exec == nil {
		if opts.Exec, err = NewExec(local.GetConfig()); err != nil {
			return nil, err
		}
		if opts.ExecStream, err = NewExecStream(local.GetConfig()); err != nil {
			return nil, err
		}
	}
	r := &Reconciler{
		opts:     opts,
		client:   local.GetClient(),
		live:     local.GetAPIReader(),
		members:  registry,
		recorder: local.GetEventRecorder(fluxv1alpha2.FieldOwnerHub),
		status:   &report.Status{Client: local.GetClient(), Owner: fluxv1alpha2.FieldOwnerHub},
	}
	if err := local.Add(&sweeper{r: r}); err != nil {
		return nil, err
	}
	if err := local.Add(&leadProber{r: r}); err != nil {
		return nil, err
	}

	// Every watch says which clusters it engages: the hub's own (roots, their lead broker
	// Service, pod and CURVE Secret, the MemberClusters) or the members' (children, their Secrets).
	onHub := []mcbuilder.EngageOptions{mcbuilder.WithEngageWithLocalCluster(true), mcbuilder.WithEngageWithProviderClusters(false)}
	onMembers := []mcbuilder.EngageOptions{mcbuilder.WithEngageWithLocalCluster(false), mcbuilder.WithEngageWithProviderClusters(true)}
	return r, mcbuilder.ControllerManagedBy(mgr).
		Named("hub").
		For(&fluxv1alpha2.MiniCluster{}, onHub[0], onHub[1], mcbuilder.WithPredicates(predicate.NewPredicateFuncs(isRootOfHub))).
		Owns(&corev1.Service{}, onHub[0], onHub[1]).
		Watches(&corev1.Pod{}, toRoots(r.leadPodToRoot), onHub[0], onHub[1]).
		Watches(&corev1.Secret{}, toRoots(r.curveSecretToRoot), onHub[0], onHub[1]).
		Watches(&fedv1alpha1.MemberCluster{}, toRoots(r.memberToRoots), onHub[0], onHub[1],
			mcbuilder.WithPredicates(predicate.Funcs{UpdateFunc: memberMoved})).
		Watches(&fluxv1alpha2.MiniCluster{}, toRoots(r.pushedToRoot), onMembers[0], onMembers[1]).
		Watches(&corev1.Secret{}, toRoots(r.pushedToRoot), onMembers[0], onMembers[1]).
		WatchesRawSource(&r.wakes).
		WithOptions(controller.TypedOptions[mcreconcile.Request]{
			MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
			SkipNameValidation:      local.GetControllerOptions().SkipNameValidation,
			// Engaging a member waits for this controller's watches of it to sync; a member that
			// does not answer fails its engagement after this long, and is tried again.
			CacheSyncTimeout: opts.Members.SyncTimeout,
			RateLimiter:      workqueue.NewTypedItemExponentialFailureRateLimiter[mcreconcile.Request](opts.RetryBase, opts.RetryMax),
			// controller-runtime v0.24.1's priority queue can deadlock when its controller stops
			// (kubernetes-sigs/controller-runtime#3538, fixed after it): the client-go work queue.
			UsePriorityQueue: ptr.To(false),
		}).
		Complete(r)
}

// Reconcile brings one root's federation to the state its spec describes and reports it.
func (r *Reconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
	if req.ClusterName != mcmanager.LocalCluster {
		return reconcile.Result{}, nil
	}
	root := &fluxv1alpha2.MiniCluster{}
	if err := r.client.Get(ctx, req.NamespacedName, root); err != nil || !isRootOfHub(root) {
		if apierrors.IsNotFound(err) {
			metrics.ForgetRoot(req.Namespace, req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	switch {
	case !root.DeletionTimestamp.IsZero():
		return r.finalize(ctx, root)
	case !hasPushedBursts(root):
		// Every burst that named a member was moved off the members: its children go, then
		// the finalizer.
		return r.unburst(ctx, root)
	}
	if err := r.ensureFinalizer(ctx, root); err != nil {
		return reconcile.Result{}, err
	}
	r.restoreFlux(root)
	return r.burst(ctx, root)
}

// restoreFlux reports the series of root's Flux instance (internal/metrics) as its status.flux
// recorded them, until the hub has asked the instance itself: a restarted hub would otherwise
// show none until the instance's next answer, which may be long in coming, or never come.
func (r *Reconciler) restoreFlux(root *fluxv1alpha2.MiniCluster) {
	if m, ok := r.memory.peek(root.UID); ok && m.asked() {
		return
	}
	metrics.SetFlux(root.Namespace, root.Name, root.Status.Flux)
}

// burst runs one root through the phases: observe the lead broker and the members, push the
// children (push.go), remove those of bursts gone from the spec (delete.go), report (status.go).
// Events are sent once the status they describe is written.
func (r *Reconciler) burst(ctx context.Context, root *fluxv1alpha2.MiniCluster) (reconcile.Result, error) {
	if err := bursting.ValidateFederation(root); err != nil {
		return reconcile.Result{}, r.refuse(ctx, root, err)
	}
	// Whether the cache has seen the last status write is known from the root as read, before
	// this reconcile writes status.pushed.
	stale := r.status.Lags(root)
	p, err := r.prover(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	events := &report.Events{}
	svc, svcErr := r.exposeLeadBroker(ctx, root)
	if svcErr != nil && !isRefusal(svcErr) {
		return reconcile.Result{}, svcErr
	}
	fed, err := r.observe(ctx, root, svc, svcErr)
	var invalid *invalidError
	switch {
	case errors.As(err, &invalid):
		return reconcile.Result{}, r.refuse(ctx, root, invalid.error)
	case err != nil:
		return reconcile.Result{}, err
	}
	if fed.plan != nil {
		obs := r.observeFlux(ctx, root)
		reportFlux(obs, events)
		idle := r.scale(ctx, root, fed, obs, events)
		r.push(ctx, root, p, fed, events)
		fed.flux = fluxStatus(obs, root.Status.Flux)
		fed.requeue = sooner(fed.requeue, obs.next, idle, r.joinFlux(fed.plan, obs, fed.bursts))
	}
	removeErr := r.removeStale(ctx, root, p, fed, events)
	if err := r.writeStatus(ctx, root, fed, stale, events); err != nil {
		return reconcile.Result{}, errors.Join(err, removeErr)
	}
	events.Record(r.recorder, root)
	// A failing member is retried with backoff; the others are done.
	if err := errors.Join(fed.err(), removeErr); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: fed.requeue}, nil
}

// toRoots turns a map function into a handler whose requests are for roots on the hub,
// whichever cluster the event came from.
func toRoots(fn func(context.Context, client.Object) []mcreconcile.Request) mchandler.TypedEventHandlerFunc[client.Object, mcreconcile.Request] {
	return func(multicluster.ClusterName, cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
		return handler.TypedEnqueueRequestsFromMapFunc(fn)
	}
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

// curveSecretToRoot maps a root's CURVE Secret to the root: the children wait for it.
func (r *Reconciler) curveSecretToRoot(_ context.Context, obj client.Object) []mcreconcile.Request {
	if name := obj.GetLabels()[fluxv1alpha2.LabelMiniCluster]; name != "" && obj.GetNamespace() != r.opts.MembersNamespace {
		return []mcreconcile.Request{rootRequest(obj.GetNamespace(), name)}
	}
	return nil
}

// pushedToRoot maps a child or a child's Secret on a member to its root, when this hub pushed
// it: a change or a deletion there is put right.
func (r *Reconciler) pushedToRoot(_ context.Context, obj client.Object) []mcreconcile.Request {
	origin, ok := fluxv1alpha2.OriginOf(obj)
	if !ok || origin.Hub != r.opts.Name {
		return nil
	}
	return []mcreconcile.Request{rootRequest(origin.Namespace, origin.Name)}
}

// memberToRoots maps a MemberCluster to the roots that burst onto it.
func (r *Reconciler) memberToRoots(ctx context.Context, obj client.Object) []mcreconcile.Request {
	return r.rootsOf(ctx, obj.GetName())
}

// memberMoved passes the updates of a MemberCluster that matter to its roots: its readiness,
// its identity, its spec or where the hub watches on it, not a recorded heartbeat.
func memberMoved(e event.UpdateEvent) bool {
	before, ok1 := e.ObjectOld.(*fedv1alpha1.MemberCluster)
	after, ok2 := e.ObjectNew.(*fedv1alpha1.MemberCluster)
	if !ok1 || !ok2 {
		return true
	}
	b := meta.FindStatusCondition(before.Status.Conditions, fedv1alpha1.ConditionReady)
	a := meta.FindStatusCondition(after.Status.Conditions, fedv1alpha1.ConditionReady)
	return before.Generation != after.Generation || before.Status.ClusterID != after.Status.ClusterID ||
		!slices.Equal(before.Status.WatchedNamespaces, after.Status.WatchedNamespaces) ||
		!slices.Equal(before.Status.DeniedNamespaces, after.Status.DeniedNamespaces) ||
		(a == nil) != (b == nil) || (a != nil && (a.Status != b.Status || a.Reason != b.Reason))
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

// sweeper runs the orphan sweep every SweepInterval.
type sweeper struct{ r *Reconciler }

// Start sweeps every SweepInterval, the first time sooner (after a restart, what a hub killed
// mid-way left is found early), and puts back the ownership key's Secret if it was deleted.
func (s *sweeper) Start(ctx context.Context) error {
	timer := time.NewTimer(min(s.r.opts.SweepInterval, firstSweep))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
			if err := s.r.keepKey(ctx); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "Keeping the hub's ownership key")
			}
			if _, err := s.r.Sweep(ctx); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "Orphan sweep")
			}
			timer.Reset(s.r.opts.SweepInterval)
		}
	}
}

// firstSweep is how soon after the hub starts it sweeps the first time.
const firstSweep = 30 * time.Second

// NeedLeaderElection is true: only the leading hub deletes.
func (s *sweeper) NeedLeaderElection() bool { return true }
