// Package hubmanager is the hub's part of the fluxfed manager (`fluxfed manager --hub`): its
// flags, the hub's multi-cluster manager and the gateway beside it. internal/manager runs it
// when --hub is given (manager.Run takes it as a manager.Hub); it lives apart so that the
// MiniCluster operator alone (cmd/fluxfed-manager) does not link the hub.
package hubmanager

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/fluxfed/fluxfed/hub"
	"github.com/fluxfed/fluxfed/hub/gateway"
	"github.com/fluxfed/fluxfed/hub/members"
	"github.com/fluxfed/fluxfed/internal/manager"
)

// Options are the hub's flags; they are the manager.Hub of `fluxfed manager`.
type Options struct {
	hub                  bool
	hubName              string
	membersNamespace     string
	memberQPS            float64
	memberBurst          int
	memberConnectTimeout time.Duration
	memberTimeout        time.Duration
	healthInterval       time.Duration
	healthTimeout        time.Duration
	dialAllow            string
	leadAddressAllow     string
	gatewayAddr          string
	gatewayCertDir       string
	gatewayService       string
	skipNamespaces       bool
	cleanupTimeout       time.Duration
	sweepInterval        time.Duration
	fluxInterval         time.Duration
	probeInterval        time.Duration
	fluxIntervalMax      time.Duration
	fluxTimeout          time.Duration
	joinTimeout          time.Duration
}

var _ manager.Hub = (*Options)(nil)

// Bind adds the flags of the hub (--hub and what it uses) to fs.
func (o *Options) Bind(fs *pflag.FlagSet) {
	fs.BoolVar(&o.hub, "hub", false, "also run the hub: burst root MiniClusters onto the member clusters registered as MemberClusters")
	fs.StringVar(&o.hubName, "hub-name", "", "identity of this hub on the members (a label value; default: the UID of this cluster's kube-system namespace)")
	fs.StringVar(&o.membersNamespace, "members-namespace", hub.DefaultMembersNamespace, "namespace of the hub that holds the kubeconfig Secrets of the MemberClusters")
	fs.Float64Var(&o.memberQPS, "member-api-qps", members.DefaultQPS, "queries per second the hub may send to each member")
	fs.IntVar(&o.memberBurst, "member-api-burst", members.DefaultBurst, "requests the hub may send at once to each member above --member-api-qps")
	fs.DurationVar(&o.memberConnectTimeout, "member-connect-timeout", members.DefaultConnectTimeout, "how long the hub waits to connect to a member")
	fs.DurationVar(&o.memberTimeout, "member-timeout", hub.DefaultMemberTimeout, "how long one reconcile of a root waits for each member: a member that hangs delays the others no longer")
	fs.DurationVar(&o.healthInterval, "member-health-interval", members.DefaultHealthInterval, "how often the hub checks that each member answers")
	fs.DurationVar(&o.healthTimeout, "member-health-timeout", members.DefaultHealthTimeout, "how long one health check of a member may take")
	fs.StringVar(&o.dialAllow, "dial-allow", "", "comma-separated CIDRs the hub may connect to (members' API servers, the lead broker's advertised address), e.g. 10.0.0.0/8; empty allows any")
	fs.StringVar(&o.leadAddressAllow, "lead-address-allow", "", "comma-separated CIDRs in which the hub greets a lead broker address a user wrote (spec.flux.bursting.expose.address); empty: any address but loopback, link-local and unspecified ones")
	fs.BoolVar(&o.skipNamespaces, "skip-member-namespaces", false, "do not create the children's namespaces on the members (they must exist)")
	fs.DurationVar(&o.cleanupTimeout, "cleanup-timeout", hub.DefaultCleanupTimeout, "how long deleting a root waits for unreachable members before leaving their children to the orphan sweep")
	fs.DurationVar(&o.sweepInterval, "orphan-sweep-interval", hub.DefaultSweepInterval, "how often the hub deletes, on every member, the children of roots that no longer exist")
	fs.DurationVar(&o.probeInterval, "lead-probe-interval", hub.DefaultProbeInterval, "how often the hub greets a root's advertised lead broker endpoint again, at most")
	fs.DurationVar(&o.fluxInterval, "flux-interval", hub.DefaultFluxInterval, "how often the hub asks the Flux instance of a root that bursts what it sees (flux commands in its lead broker's container)")
	fs.DurationVar(&o.fluxIntervalMax, "flux-interval-max", hub.DefaultFluxIntervalMax, "the longest wait between two asks: each answer that changed nothing doubles the wait up to this")
	fs.DurationVar(&o.fluxTimeout, "flux-timeout", hub.DefaultFluxTimeout, "how long one ask of a Flux instance may take")
	fs.DurationVar(&o.joinTimeout, "join-timeout", hub.DefaultJoinTimeout, "how long a burst's brokers may run before the root's Flux instance sees them online; after it the burst is NotJoining")
	fs.StringVar(&o.gatewayAddr, "gateway-bind-address", "", "host:port of the hub's gateway (the aggregated API gateway.fluxfed.io behind `fluxfed logs` and `fluxfed exec`), e.g. :8444; empty: no gateway")
	fs.StringVar(&o.gatewayCertDir, "gateway-cert-dir", "", "directory with the gateway's tls.crt and tls.key; empty: the hub makes a certificate and writes its CA into APIService "+gateway.APIServiceName)
	fs.StringVar(&o.gatewayService, "gateway-service", "fluxfed-system/fluxfed-gateway", "NAMESPACE/NAME of the Service of the gateway's APIService, whose DNS name the made certificate carries")
}

// Enabled reports whether --hub was given.
func (o *Options) Enabled() bool { return o != nil && o.hub }

// NewManager returns the hub's manager (hub.NewManager) with the gateway beside it when
// --gateway-bind-address is given: its local manager, which the MiniCluster operator joins, and
// the multi-cluster manager's Start.
func (o *Options) NewManager(ctx context.Context, cfg *rest.Config, local ctrl.Options, concurrency int) (ctrlmanager.Manager, func(context.Context) error, error) {
	hubOpts, err := o.hubOptions(ctx, cfg, concurrency)
	if err != nil {
		return nil, nil, err
	}
	mcmgr, _, err := hub.NewManager(cfg, local, hubOpts)
	if err != nil {
		return nil, nil, err
	}
	if o.gatewayAddr != "" {
		if err := o.addGateway(mcmgr, cfg); err != nil {
			return nil, nil, err
		}
	}
	ctrl.Log.Info("Running as a hub", "hub", hubOpts.Name, "membersNamespace", hubOpts.MembersNamespace)
	return mcmgr.GetLocalManager(), mcmgr.Start, nil
}

// hubOptions are the hub's options from the flags. Without --hub-name, the hub is named after
// the UID of its cluster's kube-system namespace: stable across restarts and unique to the
// cluster, so that two hubs sharing a member never take each other's children.
func (o *Options) hubOptions(ctx context.Context, cfg *rest.Config, concurrency int) (hub.Options, error) {
	name := o.hubName
	if name == "" {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return hub.Options{}, err
		}
		ns, err := cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
		if err != nil {
			return hub.Options{}, fmt.Errorf("naming the hub after namespace kube-system (or set --hub-name): %w", err)
		}
		name = string(ns.UID)
	}
	if errs := validation.IsValidLabelValue(name); len(errs) > 0 || name == "" {
		return hub.Options{}, fmt.Errorf("--hub-name %q must be a non-empty label value: %s", name, strings.Join(errs, "; "))
	}
	if o.fluxIntervalMax < o.fluxInterval {
		return hub.Options{}, fmt.Errorf("--flux-interval-max (%v) must be at least --flux-interval (%v)", o.fluxIntervalMax, o.fluxInterval)
	}
	var dial members.Dialer
	if o.dialAllow != "" {
		allowed, err := members.ParsePrefixes(o.dialAllow)
		if err != nil {
			return hub.Options{}, fmt.Errorf("--dial-allow: %w", err)
		}
		dial = members.AllowDial(allowed, nil)
	}
	leadAllow, err := members.ParsePrefixes(o.leadAddressAllow)
	if err != nil {
		return hub.Options{}, fmt.Errorf("--lead-address-allow: %w", err)
	}
	return hub.Options{
		Name:             name,
		MembersNamespace: o.membersNamespace,
		Members: members.Options{
			QPS:            float32(o.memberQPS),
			Burst:          o.memberBurst,
			ConnectTimeout: o.memberConnectTimeout,
			HealthInterval: o.healthInterval,
			HealthTimeout:  o.healthTimeout,
		},
		MemberTimeout:           o.memberTimeout,
		Dial:                    dial,
		LeadAddressAllow:        leadAllow,
		SkipNamespaces:          o.skipNamespaces,
		CleanupTimeout:          o.cleanupTimeout,
		SweepInterval:           o.sweepInterval,
		MaxConcurrentReconciles: concurrency,
		ProbeInterval:           o.probeInterval,
		FluxInterval:            o.fluxInterval,
		FluxIntervalMax:         o.fluxIntervalMax,
		FluxTimeout:             o.fluxTimeout,
		JoinTimeout:             o.joinTimeout,
	}, nil
}

// addGateway runs the hub's gateway beside the hub, on every replica: it serves requests, it
// reconciles nothing.
func (o *Options) addGateway(mgr mcmanager.Manager, cfg *rest.Config) error {
	ns, name, ok := strings.Cut(o.gatewayService, "/")
	if !ok || ns == "" || name == "" {
		return fmt.Errorf("--gateway-service %q is not NAMESPACE/NAME", o.gatewayService)
	}
	gw, err := gateway.New(gateway.Options{
		Hub: rest.CopyConfig(cfg),
		Members: func(ctx context.Context, member string) (*rest.Config, error) {
			cl, err := mgr.GetCluster(ctx, multicluster.ClusterName(member))
			if err != nil {
				return nil, err
			}
			return cl.GetConfig(), nil
		},
		Log: ctrl.Log.WithName("gateway"),
	})
	if err != nil {
		return fmt.Errorf("setting up the gateway: %w", err)
	}
	serving := gateway.Serving{Address: o.gatewayAddr, CertDir: o.gatewayCertDir, Service: types.NamespacedName{Namespace: ns, Name: name}}
	return mgr.GetLocalManager().Add(gatewayRunnable(func(ctx context.Context) error { return gw.Serve(ctx, serving) }))
}

// gatewayRunnable runs on every replica, leader or not.
type gatewayRunnable func(context.Context) error

func (g gatewayRunnable) Start(ctx context.Context) error { return g(ctx) }
func (gatewayRunnable) NeedLeaderElection() bool          { return false }
