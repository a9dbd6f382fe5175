package hub

// This file holds the pure part of exposing the lead broker, and how the hub greets it.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/bursting"
	"github.com/fluxfed/fluxfed/internal/apply"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// exposeType returns how the root's lead broker is exposed: spec.flux.bursting.expose.type,
// NodePort when unset.
func exposeType(mc *fluxv1alpha2.MiniCluster) corev1.ServiceType {
	if e := mc.Spec.Flux.Bursting.Expose; e != nil && e.Type == fluxv1alpha2.ExposeLoadBalancer {
		return corev1.ServiceTypeLoadBalancer
	}
	return corev1.ServiceTypeNodePort
}

// LeadBrokerSelector selects the root's rank 0: the pod of index 0 of its broker Job.
func LeadBrokerSelector(mc *fluxv1alpha2.MiniCluster) map[string]string {
	selector := names.SelectorLabels(mc)
	selector[batchv1.JobNameLabel] = names.JobName(mc)
	selector[batchv1.JobCompletionIndexAnnotation] = "0"
	return selector
}

// LeadBrokerService returns the Service '<name>-lead-broker' that lets members reach the root's
// rank 0, and nothing else of the root: the only broker a burst broker ever dials across
// clusters. Owner references are the caller's.
func LeadBrokerService(mc *fluxv1alpha2.MiniCluster) *corev1ac.ServiceApplyConfiguration {
	port := corev1ac.ServicePort().
		WithName("broker").
		WithProtocol(corev1.ProtocolTCP).
		WithPort(names.DefaultBrokerPort).
		WithTargetPort(intstr.FromInt32(names.DefaultBrokerPort))
	if e := mc.Spec.Flux.Bursting.Expose; e != nil && e.NodePort != 0 {
		port.WithNodePort(e.NodePort)
	}
	return corev1ac.Service(names.LeadBrokerServiceName(mc), mc.Namespace).
		WithLabels(names.SelectorLabels(mc)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(exposeType(mc)).
			WithSelector(LeadBrokerSelector(mc)).
			// A broker that restarts must be reachable before it reports ready: the bursts'
			// brokers retry their connection until it answers.
			WithPublishNotReadyAddresses(true).
			WithPorts(port))
}

// AdvertisedEndpoint returns the endpoint members dial to reach the root's rank 0, and the
// condition reason that says where it came from: spec.flux.bursting.expose.address when set;
// else, for a LoadBalancer, its ingress; else the ExternalIP of the node running rank 0, falling
// back to its InternalIP. The port is the Service's node port for a NodePort Service, the broker
// port for a LoadBalancer. svc is the lead broker Service as stored (nil if not yet created) and
// node the node of rank 0's pod (nil if not scheduled). An error, with reason AddressPending,
// says what is still missing.
func AdvertisedEndpoint(mc *fluxv1alpha2.MiniCluster, svc *corev1.Service, node *corev1.Node) (bursting.Endpoint, string, error) {
	if svc == nil || len(svc.Spec.Ports) == 0 {
		return bursting.Endpoint{}, fluxv1alpha2.ReasonAddressPending, fmt.Errorf("the lead broker Service %s does not exist yet", names.LeadBrokerServiceName(mc))
	}
	loadBalancer := svc.Spec.Type == corev1.ServiceTypeLoadBalancer
	port := svc.Spec.Ports[0].NodePort
	if loadBalancer {
		port = svc.Spec.Ports[0].Port
	}
	if port == 0 {
		return bursting.Endpoint{}, fluxv1alpha2.ReasonAddressPending, fmt.Errorf("the lead broker Service %s has no node port yet", svc.Name)
	}

	if e := mc.Spec.Flux.Bursting.Expose; e != nil && e.Address != "" {
		return bursting.Endpoint{Address: e.Address, Port: port}, fluxv1alpha2.ReasonAddressOverridden, nil
	}
	if loadBalancer {
		for _, ingress := range svc.Status.LoadBalancer.Ingress {
			switch {
			case ingress.IP != "":
				return bursting.Endpoint{Address: ingress.IP, Port: port}, fluxv1alpha2.ReasonAddressAssigned, nil
			case ingress.Hostname != "":
				return bursting.Endpoint{Address: ingress.Hostname, Port: port}, fluxv1alpha2.ReasonAddressAssigned, nil
			}
		}
		return bursting.Endpoint{}, fluxv1alpha2.ReasonAddressPending, fmt.Errorf("the load balancer of Service %s has no address yet", svc.Name)
	}
	if node == nil {
		return bursting.Endpoint{}, fluxv1alpha2.ReasonAddressPending, fmt.Errorf("the lead broker pod is not scheduled to a node yet")
	}
	// Flux takes no IPv6 address as a host: a dual-stack node's IPv4 addresses are the ones to
	// advertise.
	for _, want := range []corev1.NodeAddressType{corev1.NodeExternalIP, corev1.NodeInternalIP} {
		for _, a := range node.Status.Addresses {
			if ip := net.ParseIP(a.Address); a.Type == want && ip != nil && ip.To4() != nil {
				return bursting.Endpoint{Address: a.Address, Port: port}, fluxv1alpha2.ReasonAddressAssigned, nil
			}
		}
	}
	return bursting.Endpoint{}, fluxv1alpha2.ReasonAddressPending, fmt.Errorf("node %s has no IPv4 ExternalIP or InternalIP address", node.Name)
}

// LeadProbeBound is how long after the lead broker's advertised endpoint stops answering its
// root says so (LeadBrokerReachable=False, NotAnswering), at most: the root is greeted again
// every probe interval whether the endpoint answered or not, and a greeting may be one that
// another root naming the same endpoint asked for up to an interval before (probe.Limiter); one
// probe timeout more for the greeting that finds it closed.
func LeadProbeBound(interval, timeout time.Duration) time.Duration {
	return 2*interval + timeout
}

// greetLead greets the lead broker at l's endpoint. Whatever went wrong, the root's status says
// only that no Flux broker answered there: the endpoint may be anything a user wrote in
// spec.flux.bursting.expose.address, and a message that told a refused connection from a peer
// that answered with something else would make the hub a port scanner for them. What happened
// is logged for the hub's operator. An address a user wrote is greeted only inside the networks
// of LeadAddressAllow.
func (r *Reconciler) greetLead(ctx context.Context, l lead) error {
	endpoint := net.JoinHostPort(l.endpoint.Address, strconv.Itoa(int(l.endpoint.Port)))
	address := l.endpoint.Address
	if l.reason == fluxv1alpha2.ReasonAddressOverridden {
		checked, err := AllowedLeadAddress(ctx, r.opts.LeadAddressAllow, address)
		if err != nil {
			return fmt.Errorf("the hub did not greet %s (spec.flux.bursting.expose.address): %w; the bursts are told it anyway", endpoint, err)
		}
		// The address that was checked is the one dialled, not the name again.
		address = checked.String()
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.ProbeTimeout)
	defer cancel()
	if err := r.opts.Probe(ctx, address, l.endpoint.Port); err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("Greeting the lead broker failed", "endpoint", endpoint, "error", err.Error())
		return fmt.Errorf("no Flux broker answered at %s", endpoint)
	}
	return nil
}

// DefaultLeadAddressDeny are the networks a user-written lead broker address is never greeted
// in when the hub's operator lists no networks (--lead-address-allow): the hub pod's own
// loopback and link-local addresses (which include cloud metadata services), and unspecified
// addresses. No member could reach a lead broker there anyway.
var DefaultLeadAddressDeny = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("0.0.0.0/8"), netip.MustParsePrefix("::/128"),
}

// errLeadAddressRefused is the refusal of a user-written address outside the allowed networks.
var errLeadAddressRefused = errors.New("it is outside the networks the hub's operator lets the hub greet (the hub's --lead-address-allow)")

// AllowedLeadAddress resolves a user-written lead broker address and returns the address to
// dial: every address a name resolves to must be inside allowed or, with none listed, outside
// DefaultLeadAddressDeny.
func AllowedLeadAddress(ctx context.Context, allowed []netip.Prefix, address string) (netip.Addr, error) {
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(address); err == nil {
		addrs = []netip.Addr{ip}
	} else {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if addrs, err = net.DefaultResolver.LookupNetIP(ctx, "ip", address); err != nil || len(addrs) == 0 {
			return netip.Addr{}, errors.New("the name does not resolve")
		}
	}
	for _, a := range addrs {
		a = a.Unmap()
		inside := func(ps []netip.Prefix) bool {
			for _, p := range ps {
				if p.Contains(a) {
					return true
				}
			}
			return false
		}
		if (len(allowed) > 0 && !inside(allowed)) || (len(allowed) == 0 && inside(DefaultLeadAddressDeny)) {
			return netip.Addr{}, errLeadAddressRefused
		}
	}
	return addrs[0].Unmap(), nil
}

// exposeLeadBroker applies the root's lead broker Service and returns it as stored. A Service of
// the name that is not the root's is a refusal: it is reported, never taken over.
func (r *Reconciler) exposeLeadBroker(ctx context.Context, root *fluxv1alpha2.MiniCluster) (*corev1.Service, error) {
	svc := LeadBrokerService(root).WithOwnerReferences(metav1ac.OwnerReference().
		WithAPIVersion(fluxv1alpha2.GroupVersion.String()).WithKind("MiniCluster").WithName(root.Name).WithUID(root.UID).
		WithController(true).WithBlockOwnerDeletion(true))
	applier := &apply.Applier{Client: r.client, Live: r.live, FieldOwner: fluxv1alpha2.FieldOwnerHub}
	obj, err := applier.Apply(ctx, svc, apply.ControlledBy(root))
	if err != nil {
		return nil, fmt.Errorf("exposing the lead broker: %w", err)
	}
	return obj.(*corev1.Service), nil
}
