package hub

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	"github.com/fluxfed/fluxfed/hub/members"
)

// NewManager returns a multicluster manager for a hub, with the hub set up on it: the local
// manager is built from cfg and local, its cache widened to what the hub reads (the Secrets of
// the members namespace, the addresses of Nodes), and the members are the hub's MemberClusters
// (members.Registry). The caller adds the local reconcilers (the MiniCluster reconciler) to
// GetLocalManager() and starts it.
func NewManager(cfg *rest.Config, local manager.Options, opts Options) (mcmanager.Manager, *Reconciler, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	memberOpts := opts.Members
	syncTimeout := memberOpts.SyncTimeout
	if syncTimeout == 0 {
		syncTimeout = members.DefaultSyncTimeout
	}
	memberOpts.ClusterOptions = append(memberOpts.ClusterOptions, memberClusterOptions(local.Scheme, opts.Name, syncTimeout))
	registry, err := members.NewRegistry(memberOpts)
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

	mgr, err := mcmanager.New(cfg, registry, local)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the hub manager: %w", err)
	}
	if err := members.Setup(mgr, registry, opts.MembersNamespace); err != nil {
		return nil, nil, fmt.Errorf("setting up the members: %w", err)
	}
	r, err := Setup(mgr, registry, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("setting up the hub: %w", err)
	}
	return mgr, r, nil
}
