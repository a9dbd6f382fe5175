package hub

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/providers/kubeconfig"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hub/members"
	"github.com/fluxfed/fluxfed/hub/probe"
)

// Defaults of Options.
const (
	DefaultMembersNamespace     = "fluxfed-system"
	DefaultMemberQPS            = 20
	DefaultMemberBurst          = 40
	DefaultMemberConnectTimeout = 10 * time.Second
	DefaultMemberSyncTimeout    = 30 * time.Second
	DefaultMemberTimeout        = 30 * time.Second
	DefaultProbeTimeout         = 3 * time.Second
	DefaultProbeInterval        = 30 * time.Second
	DefaultCleanupTimeout       = 2 * time.Minute
	DefaultSweepInterval        = 5 * time.Minute
	DefaultConcurrency          = 8
	DefaultRetryBase            = time.Second
	DefaultRetryMax             = time.Minute
)

// Options configure the hub. The zero value of every field but Name means its default.
type Options struct {
	// Name identifies this hub on the members: it is the value of the origin-hub label of every
	// object the hub creates there, so that hubs sharing a member never touch each other's
	// objects. It must be a valid label value, and stable across restarts.
	Name string
	// MembersNamespace is the hub namespace where members are registered as kubeconfig Secrets.
	MembersNamespace string
	// MemberQPS and MemberBurst limit each member client.
	MemberQPS   float32
	MemberBurst int
	// MemberConnectTimeout bounds establishing a connection to a member.
	MemberConnectTimeout time.Duration
	// MemberSyncTimeout bounds the wait for a new member's cache to fill: a member that does
	// not answer is retried later instead of holding up the others.
	MemberSyncTimeout time.Duration
	// MemberTimeout bounds the requests of one reconcile to one member.
	MemberTimeout time.Duration
	// SkipNamespaces stops the hub from creating a child's namespace on a member; the namespace
	// must then exist.
	SkipNamespaces bool
	// ProbeTimeout bounds one greeting of the lead broker; ProbeInterval is how often an
	// endpoint that did not answer is tried again.
	ProbeTimeout  time.Duration
	ProbeInterval time.Duration
	// Probe greets the advertised lead broker endpoint; probe.Greet when nil.
	Probe func(ctx context.Context, address string, port int32) error
	// CleanupTimeout bounds how long the deletion of a root waits for unreachable members
	// before its finalizer is released and what is left is the orphan sweep's.
	CleanupTimeout time.Duration
	// SweepInterval is the period of the orphan sweep.
	SweepInterval time.Duration
	// MaxConcurrentReconciles is the number of roots reconciled at once.
	MaxConcurrentReconciles int
	// RetryBase and RetryMax bound the exponential backoff of a root whose members failed.
	RetryBase, RetryMax time.Duration
	// RESTOptions are applied to every member's rest.Config after the hub's own checks and
	// limits (tests count requests with them).
	RESTOptions []func(*rest.Config) error
	// Clock is time.Now when nil.
	Clock func() time.Time
}

// withDefaults returns o with every unset field at its default, or an error naming the field
// that cannot be used.
func (o Options) withDefaults() (Options, error) {
	if o.Name == "" {
		return o, errors.New("hub: Options.Name (the hub identity) is required")
	}
	setDefault(&o.MembersNamespace, DefaultMembersNamespace)
	setDefault(&o.MemberQPS, DefaultMemberQPS)
	setDefault(&o.MemberBurst, DefaultMemberBurst)
	setDefault(&o.MemberConnectTimeout, DefaultMemberConnectTimeout)
	setDefault(&o.MemberSyncTimeout, DefaultMemberSyncTimeout)
	setDefault(&o.MemberTimeout, DefaultMemberTimeout)
	setDefault(&o.ProbeTimeout, DefaultProbeTimeout)
	setDefault(&o.ProbeInterval, DefaultProbeInterval)
	setDefault(&o.CleanupTimeout, DefaultCleanupTimeout)
	setDefault(&o.SweepInterval, DefaultSweepInterval)
	setDefault(&o.MaxConcurrentReconciles, DefaultConcurrency)
	setDefault(&o.RetryBase, DefaultRetryBase)
	setDefault(&o.RetryMax, DefaultRetryMax)
	if o.Probe == nil {
		o.Probe = probe.Greet
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	for name, d := range map[string]time.Duration{
		"member connect timeout": o.MemberConnectTimeout, "member sync timeout": o.MemberSyncTimeout,
		"member timeout": o.MemberTimeout, "probe timeout": o.ProbeTimeout, "probe interval": o.ProbeInterval,
		"cleanup timeout": o.CleanupTimeout, "sweep interval": o.SweepInterval,
	} {
		if d < 0 {
			return o, fmt.Errorf("hub: the %s must be positive, got %v", name, d)
		}
	}
	if o.MemberQPS < 0 || o.MemberBurst < 0 || o.MaxConcurrentReconciles < 0 {
		return o, fmt.Errorf("hub: member QPS (%v), member burst (%d) and concurrency (%d) must be positive",
			o.MemberQPS, o.MemberBurst, o.MaxConcurrentReconciles)
	}
	return o, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// NewProvider returns the multicluster-runtime kubeconfig provider that engages the members
// registered in opts.MembersNamespace. Every member's kubeconfig passes members.CheckRESTConfig
// and gets the client limits of opts; its cache holds only the MiniClusters and Secrets that
// carry this hub's origin label, and waits at most opts.MemberSyncTimeout to fill.
func NewProvider(scheme *runtime.Scheme, opts Options) (*kubeconfig.Provider, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	restOptions := []func(*rest.Config) error{
		members.CheckRESTConfig,
		members.Limits(opts.MemberQPS, opts.MemberBurst, opts.MemberConnectTimeout),
	}
	restOptions = append(restOptions, opts.RESTOptions...)
	return kubeconfig.New(kubeconfig.Options{
		Namespace:             opts.MembersNamespace,
		KubeconfigSecretLabel: kubeconfig.DefaultKubeconfigSecretLabel,
		KubeconfigSecretKey:   kubeconfig.DefaultKubeconfigSecretKey,
		RESTOptions:           restOptions,
		ClusterOptions:        []cluster.Option{memberClusterOptions(scheme, opts)},
	}), nil
}

// memberClusterOptions limits what the hub holds of a member: only objects labelled with this
// hub's identity. The hub reads two kinds through the cache, MiniClusters and Secrets; the one
// other kind it reads, Namespaces, is read live.
func memberClusterOptions(scheme *runtime.Scheme, opts Options) cluster.Option {
	return func(o *cluster.Options) {
		o.Scheme = scheme
		o.Cache.DefaultLabelSelector = labels.SelectorFromSet(labels.Set{fluxv1alpha2.LabelOriginHub: opts.Name})
		o.Client.Cache = &client.CacheOptions{Unstructured: false, DisableFor: []client.Object{&corev1.Namespace{}}}
		timeout := opts.MemberSyncTimeout
		o.NewCache = func(config *rest.Config, cacheOpts cache.Options) (cache.Cache, error) {
			c, err := cache.New(config, cacheOpts)
			if err != nil {
				return nil, err
			}
			return &boundedSync{Cache: c, timeout: timeout}, nil
		}
	}
}

// boundedSync bounds the waits for a member's cache to fill: engaging a member waits for it
// (WaitForCacheSync, and GetInformer as the watches start), so without a bound a member that
// does not answer, or refuses to list, would hold the provider forever and keep a rotated
// kubeconfig from ever being picked up. Past the bound, the engagement fails and is retried.
type boundedSync struct {
	cache.Cache
	timeout time.Duration
}

func (b *boundedSync) WaitForCacheSync(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return b.Cache.WaitForCacheSync(ctx)
}

func (b *boundedSync) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return b.Cache.GetInformer(ctx, obj, opts...)
}

// LocalSecretCache is the local cache's setting for Secrets on a hub: the member reconciler's
// (Secrets labelled with a MiniCluster) everywhere, and every Secret of the members namespace,
// where the kubeconfig provider and the hub read the members' kubeconfigs.
func LocalSecretCache(membersNamespace string, byMiniCluster cache.ByObject) cache.ByObject {
	return cache.ByObject{Namespaces: map[string]cache.Config{
		cache.AllNamespaces: {LabelSelector: byMiniCluster.Label},
		membersNamespace:    {LabelSelector: labels.Everything()},
	}}
}

// LocalNodeCache is the local cache's setting for Nodes on a hub: the hub reads only the
// addresses of the node that runs a root's rank 0, so the rest of each Node is dropped.
func LocalNodeCache() cache.ByObject {
	return cache.ByObject{Transform: func(obj any) (any, error) {
		node, ok := obj.(*corev1.Node)
		if !ok {
			return obj, nil
		}
		return &corev1.Node{
			TypeMeta:   node.TypeMeta,
			ObjectMeta: metav1.ObjectMeta{Name: node.Name, UID: node.UID, ResourceVersion: node.ResourceVersion},
			Status:     corev1.NodeStatus{Addresses: node.Status.Addresses},
		}, nil
	}}
}
