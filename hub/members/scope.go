package members

import (
	"context"
	"fmt"
	"slices"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/bursting"
	"github.com/fluxfed/fluxfed/hub/policy"
)

// Scope is where on a member the hub watches what it pushes. A member's owner who lends only
// some namespaces grants the hub's identity access there and nowhere else (deploy/member-access),
// so a cache that listed MiniClusters or Secrets cluster-wide would be refused, and would be
// more than the hub needs to see.
type Scope struct {
	// All is every namespace: the owner lent the whole member (spec.namespaces.allow Any).
	All bool
	// Namespaces are the namespaces the hub's roots burst into, as the member's policy allows,
	// sorted and without repeats.
	Namespaces []string
}

// NewScope returns the scope of the given namespaces.
func NewScope(namespaces ...string) Scope {
	ns := slices.Clone(namespaces)
	slices.Sort(ns)
	return Scope{Namespaces: slices.Compact(ns)}
}

// Equal reports whether two scopes are the same.
func (s Scope) Equal(o Scope) bool {
	return s.All == o.All && slices.Equal(s.Namespaces, o.Namespaces)
}

// Covers reports whether the scope holds namespace.
func (s Scope) Covers(namespace string) bool {
	_, found := slices.BinarySearch(s.Namespaces, namespace)
	return s.All || found
}

// WantedScope returns where the hub must watch on the member mc registers, given the roots on the
// hub: every namespace when its owner lent them all (spec.namespaces.allow Any); else the
// namespaces roots burst into there, those the member's policy allows, and those where the hub
// keeps objects to delete (recorded in a root's status.pushed or in mc's status.orphans).
func WantedScope(mc *fedv1alpha1.MemberCluster, roots []fluxv1alpha2.MiniCluster) Scope {
	if mc.Spec.Namespaces.Allow == fedv1alpha1.NamespaceAllowAny {
		return Scope{All: true}
	}
	ns := burstNamespaces(mc, roots)
	for i := range roots {
		if roots[i].IsBurstChild() {
			continue
		}
		for _, p := range roots[i].Status.Pushed {
			if p.Cluster == mc.Name && mayHold(p.Namespace) {
				ns = append(ns, p.Namespace)
			}
		}
	}
	for _, o := range mc.Status.Orphans {
		if mayHold(o.Namespace) {
			ns = append(ns, o.Namespace)
		}
	}
	return NewScope(ns...)
}

// LentNamespaces returns the namespaces of the member mc registers whose existence its health
// check reports on: those roots burst into, as the member's policy allows, and those
// spec.namespaces lists. Namespaces the hub only keeps objects to delete in are not among them.
func LentNamespaces(mc *fedv1alpha1.MemberCluster, roots []fluxv1alpha2.MiniCluster) []string {
	ns := burstNamespaces(mc, roots)
	if mc.Spec.Namespaces.Allow == fedv1alpha1.NamespaceAllowListed {
		for _, n := range mc.Spec.Namespaces.Names {
			ns = append(ns, string(n))
		}
	}
	return NewScope(ns...).Namespaces
}

// burstNamespaces returns the namespaces roots burst into on the member mc registers, as the
// member's policy allows.
func burstNamespaces(mc *fedv1alpha1.MemberCluster, roots []fluxv1alpha2.MiniCluster) []string {
	var ns []string
	for i := range roots {
		root := &roots[i]
		if root.IsBurstChild() {
			continue
		}
		for _, b := range root.Spec.Flux.Bursting.Clusters {
			if b.Cluster != mc.Name {
				continue
			}
			if child := bursting.ChildNamespace(root, b); policy.Namespace(mc.Spec.Namespaces, root.Namespace, child) == nil {
				ns = append(ns, child)
			}
		}
	}
	return ns
}

// mayHold reports whether the hub may ever have pushed to namespace: not one of the namespaces
// never targeted, and a namespace name. A status that says otherwise was not written by the hub.
func mayHold(namespace string) bool {
	return policy.Namespace(fedv1alpha1.MemberNamespaces{Allow: fedv1alpha1.NamespaceAllowAny}, "", namespace) == nil
}

// option scopes a member's cache: every namespace, the namespaces of the scope, or none at all
// (an inert cache, for a member no root bursts onto yet).
func (s Scope) option() cluster.Option {
	return func(o *cluster.Options) {
		switch {
		case s.All:
		case len(s.Namespaces) == 0:
			o.NewCache = func(*rest.Config, cache.Options) (cache.Cache, error) { return inertCache{}, nil }
		default:
			o.Cache.DefaultNamespaces = map[string]cache.Config{}
			for _, ns := range s.Namespaces {
				o.Cache.DefaultNamespaces[ns] = cache.Config{}
			}
		}
	}
}

// watched are the kinds the hub watches on a member: what its member identity must be allowed
// to list and watch in a namespace before the hub watches it there.
var watched = []schema.GroupResource{{Group: "flux-framework.org", Resource: "miniclusters"}, {Resource: "secrets"}}

// access splits the namespaces of want into those the hub's identity on the member may list and
// watch the watched kinds in, and those it may not, asking the member's API server
// (SelfSubjectAccessReview, which every authenticated identity may create). A namespace the
// member allowed before (in allowed) is not asked about again.
func access(ctx context.Context, cs kubernetes.Interface, want Scope, allowed Scope) (granted Scope, denied []string, err error) {
	if want.All {
		return want, nil, nil
	}
	var ok []string
	for _, ns := range want.Namespaces {
		if allowed.Covers(ns) {
			ok = append(ok, ns)
			continue
		}
		may, err := mayWatch(ctx, cs, ns)
		if err != nil {
			return Scope{}, nil, err
		}
		if may {
			ok = append(ok, ns)
		} else {
			denied = append(denied, ns)
		}
	}
	return NewScope(ok...), denied, nil
}

// mayWatch asks whether the identity of cs may list and watch every watched kind in namespace.
func mayWatch(ctx context.Context, cs kubernetes.Interface, namespace string) (bool, error) {
	for _, gr := range watched {
		for _, verb := range []string{"list", "watch"} {
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb, Group: gr.Group, Resource: gr.Resource},
			}}
			got, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
			if err != nil {
				return false, fmt.Errorf("asking the member whether the hub may %s %s in namespace %s: %w", verb, gr, namespace, err)
			}
			if !got.Status.Allowed {
				return false, nil
			}
		}
	}
	return true, nil
}

// inertCache is the cache of a member the hub watches no namespace of: it holds nothing, and its
// informers never deliver an event.
type inertCache struct{}

var _ cache.Cache = inertCache{}

func (inertCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	return fmt.Errorf("the hub watches no namespace of this member, so it holds no %T %s", obj, key)
}

func (inertCache) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

func (inertCache) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	return inertInformer{}, nil
}

func (inertCache) GetInformerForKind(context.Context, schema.GroupVersionKind, ...cache.InformerGetOption) (cache.Informer, error) {
	return inertInformer{}, nil
}

func (inertCache) RemoveInformer(context.Context, client.Object) error { return nil }

func (inertCache) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

func (inertCache) WaitForCacheSync(context.Context) bool { return true }

func (inertCache) IndexField(context.Context, client.Object, string, client.IndexerFunc) error {
	return nil
}

// inertInformer is an informer of nothing: synced at once, and silent.
type inertInformer struct{}

func (inertInformer) AddEventHandler(toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return done{}, nil
}

func (inertInformer) AddEventHandlerWithResyncPeriod(toolscache.ResourceEventHandler, time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return done{}, nil
}

func (inertInformer) AddEventHandlerWithOptions(toolscache.ResourceEventHandler, toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return done{}, nil
}

func (inertInformer) RemoveEventHandler(toolscache.ResourceEventHandlerRegistration) error {
	return nil
}
func (inertInformer) AddIndexers(toolscache.Indexers) error    { return nil }
func (inertInformer) HasSynced() bool                          { return true }
func (inertInformer) HasSyncedChecker() toolscache.DoneChecker { return done{} }
func (inertInformer) IsStopped() bool                          { return false }

// done is a registration, and a checker, of something that is done from the start.
type done struct{}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (done) HasSynced() bool                          { return true }
func (done) HasSyncedChecker() toolscache.DoneChecker { return done{} }
func (done) Name() string                             { return "nothing to watch" }
func (done) Done() <-chan struct{}                    { return closed }
