package hub

// This file holds the pure part of exposing the lead broker.

import (
	"fmt"
	"net"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/bursting"
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
