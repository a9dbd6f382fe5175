package hub

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
)

// NewManager returns a multicluster manager for a hub, with the hub set up on it: the local
// manager is built from cfg and local, its cache widened to what the hub reads (the Secrets of
// the members namespace, the addresses of Nodes), and the members come from the kubeconfig
// provider. The caller adds the local reconcilers (the MiniCluster reconciler) to
// GetLocalManager() and starts it.
func NewManager(ctx context.Context, cfg *rest.Config, local manager.Options, opts Options) (mcmanager.Manager, *Reconciler, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	provider, err := NewProvider(local.Scheme, opts)
	if err != nil {
		return nil, nil, err
	}
	byObject := map[client.Object]cache.ByObject{}
	var secrets cache.ByObject
	for obj, c := range local.Cache.ByObject {
		if _, ok := obj.(*corev1.Secret); ok {
			secrets = c
			continue
		}
		byObject[obj] = c
	}
	byObject[&corev1.Secret{}] = LocalSecretCache(opts.MembersNamespace, secrets)
	byObject[&corev1.Node{}] = LocalNodeCache()
	// The hub watches the pods of rank 0 only; they carry the MiniCluster label.
	if secrets.Label != nil {
		byObject[&corev1.Pod{}] = cache.ByObject{Label: secrets.Label}
	}
	local.Cache.ByObject = byObject
	// The kubeconfig provider engages members one reconcile at a time, each bounded by the
	// member sync timeout; several at once keep one silent member from delaying the others.
	if local.Controller.MaxConcurrentReconciles == 0 {
		local.Controller.MaxConcurrentReconciles = 4
	}

	mgr, err := mcmanager.New(cfg, provider, local)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the hub manager: %w", err)
	}
	if err := provider.SetupWithManager(ctx, mgr); err != nil {
		return nil, nil, fmt.Errorf("setting up the member provider: %w", err)
	}
	r, err := Setup(mgr, provider, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("setting up the hub: %w", err)
	}
	return mgr, r, nil
}
