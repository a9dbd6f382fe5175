package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/member"
)

// managerOptions are the flags of `fluxfed manager`.
type managerOptions struct {
	metricsAddr          string
	probeAddr            string
	leaderElect          bool
	leaderElectNamespace string
	kubeconfig           string
	qps                  float64
	burst                int
	concurrency          int
	zap                  zap.Options
}

func (o *managerOptions) bind(fs *flag.FlagSet) {
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", `address the metrics endpoint binds to ("0" disables it)`)
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", `address the /healthz and /readyz probes bind to ("0" disables them)`)
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader so that only one replica reconciles at a time")
	fs.StringVar(&o.leaderElectNamespace, "leader-election-namespace", "", "namespace of the leader election lease (default: the pod's namespace)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to manage (default: in-cluster config, $KUBECONFIG or ~/.kube/config)")
	fs.Float64Var(&o.qps, "kube-api-qps", member.DefaultAPIQPS, "queries per second the manager may send to the API server")
	fs.IntVar(&o.burst, "kube-api-burst", member.DefaultAPIBurst, "requests the manager may send at once above --kube-api-qps")
	fs.IntVar(&o.concurrency, "max-concurrent-reconciles", member.DefaultConcurrency, "MiniClusters reconciled at the same time")
	o.zap.BindFlags(fs)
}

// newScheme returns the types the manager works with: Kubernetes' built-in ones and MiniCluster.
func newScheme() (*k8sruntime.Scheme, error) {
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering Kubernetes types: %w", err)
	}
	if err := fluxv1alpha2.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering %s types: %w", fluxv1alpha2.GroupVersion, err)
	}
	return scheme, nil
}

func runManager(ctx context.Context, args []string, _, stderr io.Writer) error {
	opts := managerOptions{zap: zap.Options{DestWriter: stderr}}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts.bind(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("manager takes no arguments, got %q", fs.Args())
	}
	log := zap.New(zap.UseFlagOptions(&opts.zap))
	ctrl.SetLogger(log)

	cfg, err := restConfig(opts.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = float32(opts.qps), opts.burst
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cache.Options{ByObject: member.CacheByObject()},
		Metrics:                 metricsserver.Options{BindAddress: opts.metricsAddr},
		HealthProbeBindAddress:  opts.probeAddr,
		LeaderElection:          opts.leaderElect,
		LeaderElectionID:        "fluxfed-manager.flux-framework.org",
		LeaderElectionNamespace: opts.leaderElectNamespace,
		// The manager exits soon after losing its lease; nothing it owns needs a clean handover.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
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

	log.Info("Starting manager", "version", buildVersion(), "leaderElection", opts.leaderElect)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	return nil
}

// restConfig loads the kubeconfig named by --kubeconfig, else the usual places.
func restConfig(kubeconfig string) (*rest.Config, error) {
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
