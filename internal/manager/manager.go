// Package manager is the fluxfed manager, the process the Deployment runs: the MiniCluster
// operator, and with --hub the bursting hub. It holds the manager's general flags and its run,
// apart from the command line. The hub's part (its flags, its manager and its gateway) is
// internal/manager/hubmanager, which Run is given by `fluxfed manager`; without it Run runs the
// MiniCluster operator alone, and a binary that calls it so (cmd/fluxfed-manager, what the image
// of a member runs) links neither the hub, with its offline admission (apiextensions-apiserver
// and CEL), nor the rest of the command line.
package manager

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"time"

	"github.com/spf13/pflag"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
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
	bulkWindow           time.Duration
	zap                  zap.Options
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
	fs.DurationVar(&o.bulkWindow, "bulk-create-window", member.DefaultBulkWindow, fmt.Sprintf("new MiniClusters created %d or more within this window wait until the creations slow below that rate, at most %s, so that the manager does not slow down the client creating them; 0 renders each at once", member.BulkCount, member.DefaultBulkHoldMax))
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

// gcPercent is the garbage collector's target when GOGC is not set. What a reconcile renders is
// garbage when it ends. With Go's default of 100, fluxfed-manager rendering a hundred new
// MiniClusters at once peaked at 53-54 MiB of RSS, and at 49 MiB with 50, for about 1 s more CPU
// per thousand MiniClusters; the hub with 200 roots on two members peaked at 110 MiB, and at
// 99 MiB with 50 (tools/bench/managermem).
const gcPercent = 50

// Hub is the hub's part of the manager (internal/manager/hubmanager.Options, the flags of
// `fluxfed manager --hub`). When it is enabled Run has it make the manager, whose local cluster
// then runs the MiniCluster operator too.
type Hub interface {
	// Enabled reports whether the hub runs (--hub).
	Enabled() bool
	// NewManager returns the hub's manager of the cluster at cfg, whose local manager has the
	// options local, and the function that runs it until its context is done. concurrency is
	// --max-concurrent-reconciles, which the hub's reconciler takes too.
	NewManager(ctx context.Context, cfg *rest.Config, local ctrl.Options, concurrency int) (ctrlmanager.Manager, func(context.Context) error, error)
}

// Run runs the manager until ctx is done, logging to logs; version is what its start is logged
// with. hub is the hub's part, nil for the MiniCluster operator alone.
func Run(ctx context.Context, opts *Options, hub Hub, version string, logs io.Writer) error {
	if opts.bulkWindow < 0 {
		return fmt.Errorf("--bulk-create-window is %s: it must be 0 (each MiniCluster is rendered as soon as it is created) or a positive duration", opts.bulkWindow)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
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
	if hub != nil && hub.Enabled() {
		if mgr, start, err = hub.NewManager(ctx, cfg, local, opts.concurrency); err != nil {
			return err
		}
	} else {
		if mgr, err = ctrl.NewManager(cfg, local); err != nil {
			return fmt.Errorf("creating the manager: %w", err)
		}
		start = mgr.Start
	}
	if err := member.Setup(mgr, member.Options{MaxConcurrentReconciles: opts.concurrency, BulkWindow: bulkWindow(opts.bulkWindow)}); err != nil {
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

// bulkWindow is --bulk-create-window as member.Options takes it: 0 there is the default, and a
// negative window renders each MiniCluster at once.
func bulkWindow(flag time.Duration) time.Duration {
	if flag == 0 {
		return -1
	}
	return flag
}
