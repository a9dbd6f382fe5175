package status

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	"github.com/fluxfed/fluxfed/hub/members"
)

// defaultKubeconfigKey is the key of a member's Secret when its MemberCluster names none; the
// schema defaults it to the same.
const defaultKubeconfigKey = "kubeconfig"

// Members reaches the members of a hub: with the rest config given for a member in Configs, else
// as the hub does, with the kubeconfig in the Secret its MemberCluster names. A kubeconfig from a
// Secret passes the hub's own check first (members.Check): no exec plugin runs, no file is read.
type Members struct {
	// Hub reads the hub's MemberClusters and their Secrets.
	Hub client.Reader
	// Namespace is where the hub keeps the members' kubeconfig Secrets (its --members-namespace).
	Namespace string
	// Configs reach members by name, in place of their Secrets' kubeconfigs.
	Configs map[string]*rest.Config
	// Scheme is the scheme of the members' clients.
	Scheme *k8sruntime.Scheme
	// Timeout bounds every request to a member, so that one that does not answer costs a few
	// seconds, not the whole report.
	Timeout time.Duration
}

// Reader returns a client of member.
func (m *Members) Reader(ctx context.Context, member string) (client.Reader, error) {
	cfg, ok := m.Configs[member]
	if ok {
		cfg = rest.CopyConfig(cfg)
	} else {
		var err error
		if cfg, err = m.secretConfig(ctx, member); err != nil {
			return nil, err
		}
	}
	cfg.Timeout = m.Timeout
	c, err := client.New(cfg, client.Options{Scheme: m.Scheme})
	if err != nil {
		return nil, fmt.Errorf("connecting to member %s: %w", member, err)
	}
	return c, nil
}

// secretConfig reads the kubeconfig of member from the hub, as the hub does.
func (m *Members) secretConfig(ctx context.Context, member string) (*rest.Config, error) {
	mc := &fedv1alpha1.MemberCluster{}
	if err := m.Hub.Get(ctx, client.ObjectKey{Name: member}, mc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("no MemberCluster %s on the hub", member)
		}
		return nil, fmt.Errorf("reading MemberCluster %s: %w", member, err)
	}
	ref := mc.Spec.KubeconfigSecretRef
	key := ref.Key
	if key == "" {
		key = defaultKubeconfigKey
	}
	secret := &corev1.Secret{}
	if err := m.Hub.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: ref.Name}, secret); err != nil {
		return nil, fmt.Errorf("reading the kubeconfig Secret %s/%s of member %s (or pass --member-context %s=CONTEXT): %w",
			m.Namespace, ref.Name, member, member, err)
	}
	data, ok := secret.Data[key]
	if !ok {
		return nil, fmt.Errorf("the kubeconfig Secret %s/%s of member %s has no key %q", m.Namespace, ref.Name, member, key)
	}
	cfg, err := members.Check(data)
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", member, err)
	}
	return cfg, nil
}
