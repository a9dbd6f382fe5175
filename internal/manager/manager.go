// Package manager is the fluxfed manager, the process the Deployment runs (`fluxfed manager`):
// the MiniCluster operator and, with --hub, the bursting hub. It holds the manager's flags and
// its run, apart from the command line, so that another main can run the manager without
// linking the rest of fluxfed (tools/bench/managermem measures such a binary against fluxfed:
// about 1 MiB less RSS, not worth a second binary in the image).
package manager

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hub"
	"github.com/fluxfed/fluxfed/hub/gateway"
	"github.com/fluxfed/fluxfed/hub/members"
	"github.com/fluxfed/fluxfed/internal/metrics"
	"github.com/fluxfed/fluxfed/member"
)

// Options are the manager's flags.
type Options struct {
	metricsAddr          string
	metricsSecure        bool // issue 12: metrics over HTTPS with authentication and authorization
	probeAddr            string
	pprofAddr            string
	leaderElect          bool
	leaderElectNamespace string
	kubeconfig           string
	qps                  float64
	burst                int
	concurrency          int
	zap                  zap.Options

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

// BindGeneral adds the flags of the operator to fs.
func (o *Options) BindGeneral(fs *pflag.FlagSet) {
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", `address the metrics endpoint binds to ("0" disables it)`)
	// issue 12: metrics over HTTPS with authentication and authorization (internal/metrics).
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS to scrapers whose token may get /metrics (ClusterRole fluxfed-metrics-reader); false serves plain HTTP to anyone")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", `address the /healthz and /readyz probes bind to ("0" disables them)`)
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "0", `address Go's profiler (/debug/pprof/) binds to, e.g. 127.0.0.1:6060, served without authentication ("0" disables it)`)
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader so that only one replica reconciles at a time")
	fs.StringVar(&o.leaderElectNamespace, "leader-election-namespace", "", "namespace of the leader election lease (default: the pod's namespace)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to manage (default: in-cluster config, $KUBECONFIG or ~/.kube/config)")
	fs.Float64Var(&o.qps, "kube-api-qps", member.DefaultAPIQPS, "queries per second the manager may send to the API server")
	fs.IntVar(&o.burst, "kube-api-burst", member.DefaultAPIBurst, "requests the manager may send at once above --kube-api-qps")
	fs.IntVar(&o.concurrency, "max-concurrent-reconciles", member.DefaultConcurrency, "MiniClusters reconciled at the same time")
}

// BindLogging adds controller-runtime's logging flags (--zap-*) to fs.
func (o *Options) BindLogging(fs *pflag.FlagSet) {
	// controller-runtime binds its logging flags to a Go flag set.
	zapFlags := flag.NewFlagSet("zap", flag.ContinueOnError)
	o.zap.BindFlags(zapFlags)
	fs.AddGoFlagSet(zapFlags)
	if f := fs.Lookup("zap-devel"); f != nil {
		// controller-runtime's text is one long line.
		f.Usage = "development logging: console encoder, debug level, stack traces from warnings " +
			"(without it: JSON encoder, info level, stack traces from errors)"
	}
}

// BindHub adds the flags of the hub (--hub and what it uses) to fs.
func (o *Options) BindHub(fs *pflag.FlagSet) {
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

// NewScheme returns the types the manager works with: Kubernetes' built-in ones, MiniCluster and
// MemberCluster.
func NewScheme() (*k8sruntime.Scheme, error) {
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering Kubernetes types: %w", err)
	}
	if err := fluxv1alpha2.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering %s types: %w", fluxv1alpha2.GroupVersion, err)
	}
	if err := fedv1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering %s types: %w", fedv1alpha1.GroupVersion, err)
	}
	return scheme, nil
}

// Run runs the manager until ctx is done, logging to logs; version is what its start is logged
// with.
func Run(ctx context.Context, opts *Options, version string, logs io.Writer) error {
	opts.zap.DestWriter = logs
	log := zap.New(zap.UseFlagOptions(&opts.zap))
	ctrl.SetLogger(log)

	cfg, err := RestConfig(opts.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = float32(opts.qps), opts.burst
	scheme, err := NewScheme()
	if err != nil {
		return err
	}
	local := ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOptions(),
		Metrics:                 metrics.ServerOptions(opts.metricsAddr, opts.metricsSecure), // issue 12
		HealthProbeBindAddress:  opts.probeAddr,
		PprofBindAddress:        opts.pprofAddr,
		LeaderElection:          opts.leaderElect,
		LeaderElectionID:        "fluxfed-manager.flux-framework.org",
		LeaderElectionNamespace: opts.leaderElectNamespace,
		// The manager exits soon after losing its lease; nothing it owns needs a clean handover.
		LeaderElectionReleaseOnCancel: true,
	}
	var mgr ctrlmanager.Manager
	var start func(context.Context) error
	if opts.hub {
		hubOpts, err := opts.hubOptions(ctx, cfg)
		if err != nil {
			return err
		}
		mcmgr, _, err := hub.NewManager(cfg, local, hubOpts)
		if err != nil {
			return err
		}
		mgr, start = mcmgr.GetLocalManager(), mcmgr.Start
		if opts.gatewayAddr != "" {
			if err := addGateway(mcmgr, cfg, opts); err != nil {
				return err
			}
		}
		log.Info("Running as a hub", "hub", hubOpts.Name, "membersNamespace", hubOpts.MembersNamespace)
	} else {
		if mgr, err = ctrl.NewManager(cfg, local); err != nil {
			return fmt.Errorf("creating the manager: %w", err)
		}
		start = mgr.Start
	}
	if err := member.Setup(mgr, member.Options{MaxConcurrentReconciles: opts.concurrency}); err != nil {
		return fmt.Errorf("setting up the MiniCluster reconciler: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding the readiness check: %w", err)
	}

	log.Info("Starting manager", "version", version, "leaderElection", opts.leaderElect)
	if err := start(ctx); err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	return nil
}

// cacheOptions are the options of the manager's cache of its own cluster: the member's (only
// the objects of MiniClusters, without their managedFields), and MiniClusters without theirs,
// which are as big as the spec and read by nothing that reads the cache (the status is written
// by server-side apply; internal/apply reads an object live when it needs its managedFields).
func cacheOptions() cache.Options {
	byObject := member.CacheByObject()
	byObject[&fluxv1alpha2.MiniCluster{}] = cache.ByObject{Transform: cache.TransformStripManagedFields()}
	return cache.Options{ByObject: byObject}
}

// hubOptions are the hub's options from the flags. Without --hub-name, the hub is named after
// the UID of its cluster's kube-system namespace: stable across restarts and unique to the
// cluster, so that two hubs sharing a member never take each other's children.
func (o *Options) hubOptions(ctx context.Context, cfg *rest.Config) (hub.Options, error) {
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
		MaxConcurrentReconciles: o.concurrency,
		ProbeInterval:           o.probeInterval,
		FluxInterval:            o.fluxInterval,
		FluxIntervalMax:         o.fluxIntervalMax,
		FluxTimeout:             o.fluxTimeout,
		JoinTimeout:             o.joinTimeout,
	}, nil
}

// RestConfig loads the kubeconfig named by --kubeconfig, else the usual places.
func RestConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := ctrl.GetConfig()
		if err != nil {
			return nil, fmt.Errorf("loading the cluster config: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}

// addGateway runs the hub's gateway beside the hub, on every replica: it serves requests, it
// reconciles nothing.
func addGateway(mgr mcmanager.Manager, cfg *rest.Config, opts *Options) error {
	ns, name, ok := strings.Cut(opts.gatewayService, "/")
	if !ok || ns == "" || name == "" {
		return fmt.Errorf("--gateway-service %q is not NAMESPACE/NAME", opts.gatewayService)
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
	serving := gateway.Serving{Address: opts.gatewayAddr, CertDir: opts.gatewayCertDir, Service: types.NamespacedName{Namespace: ns, Name: name}}
	return mgr.GetLocalManager().Add(gatewayRunnable(func(ctx context.Context) error { return gw.Serve(ctx, serving) }))
}

// gatewayRunnable runs on every replica, leader or not.
type gatewayRunnable func(context.Context) error

func (g gatewayRunnable) Start(ctx context.Context) error { return g(ctx) }
func (gatewayRunnable) NeedLeaderElection() bool          { return false }
