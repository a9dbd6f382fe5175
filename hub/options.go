package hub

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hub/members"
	"github.com/fluxfed/fluxfed/hub/probe"
)

// Defaults of Options.
const (
	DefaultMembersNamespace = members.DefaultNamespace
	// DefaultOwnershipKeySecret is the Secret of the members namespace that holds the key of
	// the hub's proofs of ownership (proof.go); the hub creates it on its first start.
	DefaultOwnershipKeySecret = "fluxfed-hub-ownership"
	DefaultMemberTimeout      = 10 * time.Second
	DefaultProbeTimeout       = 3 * time.Second
	DefaultProbeInterval      = 10 * time.Second
	DefaultCleanupTimeout     = 2 * time.Minute
	DefaultSweepInterval      = 5 * time.Minute
	DefaultConcurrency        = 8
	DefaultRetryBase          = time.Second
	DefaultRetryMax           = time.Minute
	DefaultFluxInterval       = 10 * time.Second
	DefaultFluxIntervalMax    = 2 * time.Minute
	DefaultFluxTimeout        = 10 * time.Second
	DefaultJoinTimeout        = 2 * time.Minute
)

// Options configure the hub. The zero value of every field but Name means its default.
type Options struct {
	// Name identifies this hub on the members: it is the value of the origin-hub label of every
	// object the hub creates there, so that hubs sharing a member never touch each other's
	// objects. It must be a valid label value, and stable across restarts.
	Name string
	// MembersNamespace is the hub namespace that holds the members' kubeconfig Secrets.
	MembersNamespace string
	// OwnershipKeySecret is the Secret of MembersNamespace that holds the key with which the
	// hub proves what it created on members. It is created on the hub's first start; deleting
	// it while the hub is stopped disowns everything the hub pushed (docs/security.md).
	OwnershipKeySecret string
	// Members configure how members are reached and health-checked.
	Members members.Options
	// MemberTimeout bounds the requests of one reconcile to one member: a member that stops
	// answering delays the other bursts of a root by no more than this.
	MemberTimeout time.Duration
	// SkipNamespaces stops the hub from creating a child's namespace on a member; the namespace
	// must then exist.
	SkipNamespaces bool
	// ProbeTimeout bounds one greeting of the lead broker; ProbeInterval is how often an
	// endpoint that did not answer is tried again.
	ProbeTimeout  time.Duration
	ProbeInterval time.Duration
	// Probe greets the advertised lead broker endpoint; when nil, probe.GreetWith(Dial), at most
	// once per ProbeInterval for one endpoint whichever roots name it.
	Probe func(ctx context.Context, address string, port int32) error
	// LeadAddressAllow are the networks in which the hub greets a lead broker address a user
	// wrote (spec.flux.bursting.expose.address); when empty, any address but those of
	// DefaultLeadAddressDeny. Addresses the hub found itself (node addresses, load balancer
	// ingress) are greeted wherever Dial allows.
	LeadAddressAllow []netip.Prefix
	// Dial opens every connection the hub makes to what others name (members' API servers, the
	// lead broker's endpoint); members.Options.Dial defaults to it. A net.Dialer when nil.
	Dial members.Dialer
	// CleanupTimeout bounds how long the deletion of a root waits for unreachable members
	// before its finalizer is released and what is left is the orphan sweep's.
	CleanupTimeout time.Duration
	// SweepInterval is the period of the orphan sweep.
	SweepInterval time.Duration
	// MaxConcurrentReconciles is the number of roots reconciled at once.
	MaxConcurrentReconciles int
	// RetryBase and RetryMax bound the exponential backoff of a root whose members failed.
	RetryBase, RetryMax time.Duration
	// Exec runs the flux commands in a root's lead broker container; NewExec of the hub's own
	// API server when nil.
	Exec Exec
	// ExecStream leaves the follower of an on-demand root's Flux instance running in its lead
	// broker's container (fluxstream.go). When Exec is nil, NewExecStream of the hub's own API
	// server; when Exec is set and ExecStream is nil, no follower runs and the hub only asks.
	ExecStream ExecStream
	// FluxInterval is how often the hub asks a root's Flux instance what it sees; each answer
	// that changed nothing doubles the wait, up to FluxIntervalMax. FluxTimeout bounds one ask.
	FluxInterval, FluxIntervalMax, FluxTimeout time.Duration
	// JoinTimeout is how long a burst's brokers may run without the root's instance seeing
	// them online before the burst is NotJoining.
	JoinTimeout time.Duration
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
	setDefault(&o.OwnershipKeySecret, DefaultOwnershipKeySecret)
	setDefault(&o.MemberTimeout, DefaultMemberTimeout)
	setDefault(&o.ProbeTimeout, DefaultProbeTimeout)
	setDefault(&o.ProbeInterval, DefaultProbeInterval)
	setDefault(&o.CleanupTimeout, DefaultCleanupTimeout)
	setDefault(&o.SweepInterval, DefaultSweepInterval)
	setDefault(&o.MaxConcurrentReconciles, DefaultConcurrency)
	setDefault(&o.RetryBase, DefaultRetryBase)
	setDefault(&o.RetryMax, DefaultRetryMax)
	setDefault(&o.FluxInterval, DefaultFluxInterval)
	setDefault(&o.FluxIntervalMax, max(DefaultFluxIntervalMax, o.FluxInterval))
	setDefault(&o.FluxTimeout, DefaultFluxTimeout)
	setDefault(&o.JoinTimeout, DefaultJoinTimeout)
	if o.Members.Dial == nil {
		o.Members.Dial = o.Dial
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Probe == nil {
		o.Probe = probe.NewLimiter(o.ProbeInterval, o.Clock).Limit(probe.GreetWith(probe.Dialer(o.Dial)))
	}
	if o.Members.Clock == nil {
		o.Members.Clock = o.Clock
	}
	for name, d := range map[string]time.Duration{
		"member timeout": o.MemberTimeout, "probe timeout": o.ProbeTimeout, "probe interval": o.ProbeInterval,
		"cleanup timeout": o.CleanupTimeout, "sweep interval": o.SweepInterval,
		"flux interval": o.FluxInterval, "flux timeout": o.FluxTimeout, "join timeout": o.JoinTimeout,
	} {
		if d < 0 {
			return o, fmt.Errorf("hub: the %s must be positive, got %v", name, d)
		}
	}
	if o.MaxConcurrentReconciles < 0 {
		return o, fmt.Errorf("hub: the concurrency must be positive, got %d", o.MaxConcurrentReconciles)
	}
	return o, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// memberClusterOptions limits what the hub holds of a member: only objects labelled with this
// hub's identity, without their managedFields (internal/apply reads an object live when an apply
// must change it). The hub reads two kinds through the cache, MiniClusters and Secrets; the one
// other kind it reads, Namespaces, is read live.
func memberClusterOptions(scheme *runtime.Scheme, hub string, syncTimeout time.Duration) cluster.Option {
	return func(o *cluster.Options) {
		o.Scheme = scheme
		o.Cache.DefaultLabelSelector = labels.SelectorFromSet(labels.Set{fluxv1alpha2.LabelOriginHub: hub})
		o.Cache.DefaultTransform = cache.TransformStripManagedFields()
		o.Client.Cache = &client.CacheOptions{Unstructured: false, DisableFor: []client.Object{&corev1.Namespace{}}}
		o.NewCache = func(config *rest.Config, cacheOpts cache.Options) (cache.Cache, error) {
			c, err := cache.New(config, cacheOpts)
			if err != nil {
				return nil, err
			}
			return &boundedSync{Cache: c, timeout: syncTimeout}, nil
		}
	}
}

// boundedSync bounds the waits for a member's cache to fill: engaging a member waits for it
// (WaitForCacheSync, and GetInformer as the watches start), so without a bound a member that
// does not answer, or refuses to list, would hold its engagement forever. Past the bound the
// engagement fails and is tried again at the member's next health check.
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
// where the MemberClusters' kubeconfigs are.
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
