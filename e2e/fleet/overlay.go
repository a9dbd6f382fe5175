package fleet

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/bursting"
	"github.com/fluxfed/fluxfed/e2e/brokersim"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// Side is one MiniCluster of a federation as it runs: the root on the hub, or a child on a
// member, with its Running broker pods and the config its cluster's reconciler rendered.
type Side struct {
	Cluster     string
	MiniCluster *fluxv1alpha2.MiniCluster
	Pods        []corev1.Pod
	BrokerTOML  []byte
	CurveCert   []byte
}

// Federation reads the sides of root (as read from the hub) from the clusters; a burst without
// a child (of size 0) has no side.
func (f *Fleet) Federation(ctx context.Context, root *fluxv1alpha2.MiniCluster) ([]Side, error) {
	sides := []Side{{Cluster: f.Hub.Name, MiniCluster: root}}
	for _, b := range root.Spec.Flux.Bursting.Clusters {
		if b.Cluster == "" {
			continue
		}
		child := &fluxv1alpha2.MiniCluster{}
		key := client.ObjectKey{Namespace: bursting.ChildNamespace(root, b), Name: b.Name}
		if err := f.Clients[b.Cluster].Get(ctx, key, child); err != nil {
			if apierrors.IsNotFound(err) {
				continue // a burst of size 0 runs nothing
			}
			return nil, fmt.Errorf("burst %s on %s: %w", b.Name, b.Cluster, err)
		}
		sides = append(sides, Side{Cluster: b.Cluster, MiniCluster: child})
	}
	for i := range sides {
		s := &sides[i]
		c, mc := f.Clients[s.Cluster], s.MiniCluster
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(mc.Namespace), client.MatchingLabels{batchv1.JobNameLabel: names.JobName(mc)}); err != nil {
			return nil, err
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				s.Pods = append(s.Pods, p)
			}
		}
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: mc.Namespace, Name: names.ConfigMapName(mc)}, cm); err != nil {
			return nil, fmt.Errorf("the broker config of %s on %s: %w", mc.Name, s.Cluster, err)
		}
		s.BrokerTOML = []byte(cm.Data[names.KeyBrokerTOML])
		secret := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: mc.Namespace, Name: names.CurveSecretName(mc)}, secret); err != nil {
			return nil, fmt.Errorf("the certificate of %s on %s: %w", mc.Name, s.Cluster, err)
		}
		s.CurveCert = secret.Data[names.KeyCurveCert]
	}
	return sides, nil
}

// Network routes a federation's names as the clusters would: inside each cluster, the names a
// pod's headless Service (its subdomain) gives it; across clusters, only the lead broker's
// advertised node address and NodePort (root.Status.LeadBroker), to rank 0.
func Network(root *fluxv1alpha2.MiniCluster, sides []Side) (*brokersim.Network, error) {
	n := brokersim.NewNetwork()
	for _, s := range sides {
		bySubdomain := map[string][]string{}
		for _, p := range s.Pods {
			bySubdomain[p.Spec.Subdomain] = append(bySubdomain[p.Spec.Subdomain], p.Spec.Hostname)
		}
		for subdomain, hosts := range bySubdomain {
			if err := n.AddHeadlessService(s.Cluster, s.MiniCluster.Namespace, subdomain, names.DefaultBrokerPort, hosts...); err != nil {
				return nil, err
			}
		}
	}
	lead := root.Status.LeadBroker
	if lead == nil || lead.Address == "" {
		return nil, fmt.Errorf("root %s has no lead broker endpoint yet", root.Name)
	}
	err := n.AddLead(brokersim.Lead{Address: lead.Address, Port: int(lead.Port),
		Target: brokersim.Listener{Cluster: sides[0].Cluster, Hostname: root.Name + "-0", Port: names.DefaultBrokerPort}})
	return n, err
}

// Brokers returns one stand-in per Running pod of the sides; change, when set, may alter a
// side's config and certificate.
func Brokers(sides []Side, change func(s Side) (toml, cert []byte)) []brokersim.Broker {
	var out []brokersim.Broker
	for _, s := range sides {
		toml, cert := s.BrokerTOML, s.CurveCert
		if change != nil {
			toml, cert = change(s)
		}
		for _, p := range s.Pods {
			out = append(out, brokersim.Broker{Cluster: s.Cluster, Hostname: p.Spec.Hostname, BrokerTOML: toml, CurveCert: cert})
		}
	}
	return out
}
