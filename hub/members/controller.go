package members

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mchandler "sigs.k8s.io/multicluster-runtime/pkg/handler"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/internal/metrics"
	"github.com/fluxfed/fluxfed/internal/report"
)

// DefaultKubeconfigKey is the Secret key of a member's kubeconfig when the MemberCluster names none.
const DefaultKubeconfigKey = "kubeconfig"

// What the MemberCluster reconciler needs on the hub (deploy/hub).
// +kubebuilder:rbac:groups=fluxfed.io,resources=memberclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=fluxfed.io,resources=memberclusters/status,verbs=get;patch

// Reconciler registers every MemberCluster with the registry and owns its status: the one place
// where a member's health, identity and what the hub keeps there are written.
type Reconciler struct {
	client    client.Client
	registry  *Registry
	namespace string
	recorder  events.EventRecorder
	// status writes the MemberClusters' status.
	status *report.Status

	mu    sync.Mutex
	queue workqueue.TypedRateLimitingInterface[mcreconcile.Request]
}

// DefaultNamespace is the hub namespace that holds the members' kubeconfig Secrets unless the
// hub is told otherwise (its --members-namespace): where `fluxfed member add` puts them too.
const DefaultNamespace = "fluxfed-system"

// Setup adds the MemberCluster reconciler to mgr. namespace is the hub namespace whose Secrets
// hold the members' kubeconfigs. registry must be the provider mgr was built with.
func Setup(mgr mcmanager.Manager, registry *Registry, namespace string) error {
	local := mgr.GetLocalManager()
	r := &Reconciler{
		client:    local.GetClient(),
		registry:  registry,
		namespace: namespace,
		recorder:  local.GetEventRecorder(fluxv1alpha2.FieldOwnerHub),
		status:    &report.Status{Client: local.GetClient(), Owner: fluxv1alpha2.FieldOwnerHub},
	}
	registry.local = r.client
	registry.notifyOn(r.enqueue)
	local0, local1 := mcbuilder.WithEngageWithLocalCluster(true), mcbuilder.WithEngageWithProviderClusters(false)
	members0, members1 := mcbuilder.WithEngageWithLocalCluster(false), mcbuilder.WithEngageWithProviderClusters(true)
	return mcbuilder.ControllerManagedBy(mgr).
		Named("membercluster").
		For(&fedv1alpha1.MemberCluster{}, local0, local1).
		Watches(&corev1.Secret{}, func(multicluster.ClusterName, cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
			return handler.TypedEnqueueRequestsFromMapFunc(r.secretToMembers)
		}, local0, local1).
		// Where the hub watches on a member follows the roots that burst onto it.
		Watches(&fluxv1alpha2.MiniCluster{}, func(multicluster.ClusterName, cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
			return handler.TypedEnqueueRequestsFromMapFunc(rootToMembers)
		}, local0, local1).
		// The children the hub keeps on a member are counted from its cache.
		Watches(&fluxv1alpha2.MiniCluster{}, mchandler.TypedEventHandlerFunc[client.Object, mcreconcile.Request](
			func(name multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
				return handler.TypedEnqueueRequestsFromMapFunc(func(context.Context, client.Object) []mcreconcile.Request {
					return []mcreconcile.Request{memberRequest(string(name))}
				})
			}), members0, members1).
		WatchesRawSource(source.TypedFunc[mcreconcile.Request](func(_ context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.queue = q
			return nil
		})).
		WithOptions(controller.TypedOptions[mcreconcile.Request]{
			SkipNameValidation: local.GetControllerOptions().SkipNameValidation,
			CacheSyncTimeout:   registry.opts.SyncTimeout,
			// controller-runtime v0.24.1's priority queue can deadlock when its controller stops
			// (kubernetes-sigs/controller-runtime#3538, fixed after it): the client-go work queue.
			UsePriorityQueue: ptr.To(false),
		}).
		Complete(r)
}

func memberRequest(name string) mcreconcile.Request {
	return mcreconcile.Request{Request: reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}}
}

// enqueue reconciles a member whose health or identity changed. It never blocks: the registry
// calls it under its lock.
func (r *Reconciler) enqueue(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.queue != nil {
		r.queue.Add(memberRequest(name))
	}
}

// rootToMembers maps a MiniCluster on the hub to the members it bursts onto or keeps objects on.
func rootToMembers(_ context.Context, obj client.Object) []mcreconcile.Request {
	root, ok := obj.(*fluxv1alpha2.MiniCluster)
	if !ok {
		return nil
	}
	var out []mcreconcile.Request
	for _, b := range root.Spec.Flux.Bursting.Clusters {
		if b.Cluster != "" {
			out = append(out, memberRequest(b.Cluster))
		}
	}
	for _, p := range root.Status.Pushed {
		out = append(out, memberRequest(p.Cluster))
	}
	return out
}

// secretToMembers maps a Secret of the members namespace to the MemberClusters that name it.
func (r *Reconciler) secretToMembers(ctx context.Context, obj client.Object) []mcreconcile.Request {
	if obj.GetNamespace() != r.namespace {
		return nil
	}
	var list fedv1alpha1.MemberClusterList
	if err := r.client.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the MemberClusters of a Secret", "secret", obj.GetName())
		return nil
	}
	var out []mcreconcile.Request
	for _, mc := range list.Items {
		if mc.Spec.KubeconfigSecretRef.Name == obj.GetName() {
			out = append(out, memberRequest(mc.Name))
		}
	}
	return out
}

// Reconcile registers one MemberCluster with the registry and writes what the registry knows of
// it. A Ready member is visited again every record interval, to record its heartbeat.
func (r *Reconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
	if req.ClusterName != mcmanager.LocalCluster {
		return reconcile.Result{}, nil
	}
	mc := &fedv1alpha1.MemberCluster{}
	if err := r.client.Get(ctx, req.NamespacedName, mc); err != nil || !mc.DeletionTimestamp.IsZero() {
		if err == nil || apierrors.IsNotFound(err) {
			r.registry.Remove(req.Name)
			r.status.Forget(req.NamespacedName)
			metrics.ForgetMember(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	r.registry.Set(r.registration(ctx, mc))
	snap, _ := r.registry.Snapshot(mc.Name)
	now := r.registry.opts.Clock()
	record := heartbeatAfter(r.registry.opts.RecordInterval, r.registry.opts.HealthInterval)
	st := ComputeStatus(mc, snap, r.children(ctx, snap, now), metav1.NewTime(now), record)
	if err := r.writeStatus(ctx, mc, st); err != nil {
		return reconcile.Result{}, err
	}
	metrics.SetMember(mc.Name, health(snap.Phase), len(mc.Status.Orphans))
	if snap.Phase == PhaseReady {
		return reconcile.Result{RequeueAfter: r.registry.opts.RecordInterval}, nil
	}
	return reconcile.Result{}, nil
}

// heartbeatAfter is how old a recorded heartbeat must be for a newer answer to replace it: a
// record interval, less the health interval by which the last answer may precede a reconcile,
// so that a member visited every record interval is recorded every time, not every other time.
func heartbeatAfter(recordInterval, healthInterval time.Duration) time.Duration {
	return max(recordInterval-healthInterval, recordInterval/2)
}

// health is the value of the health label of fluxfed_member_health for a phase.
func health(p Phase) string {
	switch p {
	case PhaseReady:
		return metrics.HealthReady
	case PhaseNotReady:
		return metrics.HealthNotReady
	}
	return metrics.HealthUnknown
}

// registration reads a MemberCluster's kubeconfig.
func (r *Reconciler) registration(ctx context.Context, mc *fedv1alpha1.MemberCluster) Registration {
	reg := Registration{Name: mc.Name, Created: mc.CreationTimestamp, RecordedID: mc.Status.ClusterID,
		Secret: r.namespace + "/" + mc.Spec.KubeconfigSecretRef.Name, CreateNamespaces: mc.Spec.Namespaces.Create}
	if c := meta.FindStatusCondition(mc.Status.Conditions, fedv1alpha1.ConditionReady); c != nil {
		reg.RecordedDuplicate = c.Reason == fedv1alpha1.ReasonDuplicateCluster
	}
	ref := mc.Spec.KubeconfigSecretRef
	key := ref.Key
	if key == "" {
		key = DefaultKubeconfigKey
	}
	secret := &corev1.Secret{}
	notFound := func(msg string) Registration {
		reg.Refusal = &State{Phase: PhaseNotReady, Reason: fedv1alpha1.ReasonKubeconfigNotFound, Message: msg}
		return reg
	}
	switch err := r.client.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: ref.Name}, secret); {
	case apierrors.IsNotFound(err):
		return notFound(fmt.Sprintf("Secret %s/%s does not exist", r.namespace, ref.Name))
	case err != nil:
		return notFound(fmt.Sprintf("reading Secret %s/%s: %v", r.namespace, ref.Name, err))
	case len(secret.Data[key]) == 0:
		return notFound(fmt.Sprintf("Secret %s/%s has no key %q with a kubeconfig", r.namespace, ref.Name, key))
	}
	reg.Kubeconfig = secret.Data[key]
	// Read only, for every event of every root: the cache's objects themselves, not copies.
	var roots fluxv1alpha2.MiniClusterList
	if err := r.client.List(ctx, &roots, client.UnsafeDisableDeepCopy); err != nil {
		// Kept as it is until the roots can be read.
		if snap, ok := r.registry.Snapshot(mc.Name); ok {
			reg.Scope = snap.Wanted
		}
		ctrl.LoggerFrom(ctx).Error(err, "Listing the roots that burst onto a member")
		return reg
	}
	reg.Scope = WantedScope(mc, roots.Items)
	reg.Namespaces = LentNamespaces(mc, roots.Items)
	return reg
}

// children reports on the child MiniClusters in an engaged member's cache, which holds only
// this hub's; nothing when the member is not engaged.
func (r *Reconciler) children(ctx context.Context, snap Snapshot, now time.Time) Children {
	if snap.Cluster == nil {
		return Children{}
	}
	// Read only, for every event of every child: the cache's objects themselves, not copies.
	var list fluxv1alpha2.MiniClusterList
	if err := snap.Cluster.GetCache().List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return Children{}
	}
	return CountChildren(list.Items, now)
}

// ComputeStatus returns the status of mc from what the registry knows of it and what the
// member's cache holds of its children. What is not known now (the version of a member that
// does not answer) keeps its last value. The heartbeat is recorded when the member last
// answered, but only once record passed while nothing else changes, so that a healthy member
// costs one status write a minute.
func ComputeStatus(mc *fedv1alpha1.MemberCluster, snap Snapshot, children Children, now metav1.Time, record time.Duration) fedv1alpha1.MemberClusterStatus {
	st := *mc.Status.DeepCopy()
	// status.orphans is the root reconciler's, under a field owner of its own: sending it here
	// would make it co-owned, and never removed.
	st.Orphans = nil
	st.ObservedGeneration = mc.Generation
	if snap.ClusterID != "" {
		st.ClusterID = snap.ClusterID
	}
	if snap.Version != "" {
		st.KubernetesVersion = snap.Version
	}
	if snap.Nodes != nil {
		st.Nodes = snap.Nodes
	}
	if children.Count != nil {
		st.Children = *children.Count
	}
	if snap.Phase == PhaseReady {
		st.WatchedNamespaces, st.DeniedNamespaces = nil, snap.Denied
		if !snap.Watched.All {
			st.WatchedNamespaces = snap.Watched.Namespaces
		}
	}
	cond := metav1.Condition{Type: fedv1alpha1.ConditionReady, ObservedGeneration: mc.Generation, LastTransitionTime: now,
		Reason: snap.Reason, Message: snap.Message}
	switch snap.Phase {
	case PhaseReady:
		cond.Status = metav1.ConditionTrue
	case PhaseNotReady:
		cond.Status = metav1.ConditionFalse
	default:
		cond.Status = metav1.ConditionUnknown
		if cond.Reason == "" {
			cond.Reason, cond.Message = fedv1alpha1.ReasonConnecting, "the hub has not checked the member yet"
		}
	}
	old := meta.FindStatusCondition(st.Conditions, fedv1alpha1.ConditionReady)
	moved := old == nil || old.Status != cond.Status || old.Reason != cond.Reason
	meta.SetStatusCondition(&st.Conditions, cond)
	lackConditions(&st.Conditions, mc, snap, children, now)
	if !snap.LastSeen.IsZero() {
		seen := metav1.NewTime(snap.LastSeen.Truncate(time.Second))
		if st.LastHeartbeatTime == nil || moved || seen.Sub(st.LastHeartbeatTime.Time) >= record {
			st.LastHeartbeatTime = &seen
		}
	}
	return st
}

// writeStatus writes st with server-side apply under the hub's field owner when it differs from
// what is stored, then records an event for each condition that moved (see memberConditions). A
// MemberCluster the cache holds as it was before the last write is not written again.
func (r *Reconciler) writeStatus(ctx context.Context, mc *fedv1alpha1.MemberCluster, st fedv1alpha1.MemberClusterStatus) error {
	current := *mc.Status.DeepCopy()
	current.Orphans = nil
	if equality.Semantic.DeepEqual(current, st) || r.status.Lags(mc) {
		return nil
	}
	if err := r.status.Apply(ctx, mc, &st); err != nil {
		return err
	}
	events := &report.Events{}
	events.Append(memberConditions.Events(mc.Status.Conditions, st.Conditions)...)
	events.Record(r.recorder, mc)
	return nil
}

// memberConditions are the conditions of a MemberCluster and the events of their moves. Ready is told
// from its first answer on; what the member lacks is told when it is found out, and when it is
// fixed; a condition the hub cannot tell (Unknown) is no news but for Ready.
var memberConditions = report.Conditions{
	Types: []string{fedv1alpha1.ConditionReady, fedv1alpha1.ConditionFluxfedInstalled,
		fedv1alpha1.ConditionNamespacesAvailable, fedv1alpha1.ConditionCredentialsValid},
	Announce: func(before *metav1.Condition, after metav1.Condition) bool {
		if after.Type == fedv1alpha1.ConditionReady {
			return before != nil || after.Status != metav1.ConditionUnknown
		}
		return after.Status != metav1.ConditionUnknown && (before != nil || after.Status == metav1.ConditionFalse)
	},
	Action: "CheckMember",
}
