package hub

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/bursting"
)

func rootWithExpose(expose *fluxv1alpha2.Expose) *fluxv1alpha2.MiniCluster {
	return v1alpha2test.MiniCluster("flux-sample").Namespace("hpc").Spec(func(s *fluxv1alpha2.MiniClusterSpec) {
		s.Flux.Bursting.Expose = expose
	}).Obj()
}

func TestLeadBrokerService(t *testing.T) {
	tests := []struct {
		name         string
		expose       *fluxv1alpha2.Expose
		wantType     corev1.ServiceType
		wantNodePort *int32
	}{
		{name: "NodePort by default", wantType: corev1.ServiceTypeNodePort},
		{name: "fixed node port", expose: &fluxv1alpha2.Expose{NodePort: 30093}, wantType: corev1.ServiceTypeNodePort, wantNodePort: ptr.To[int32](30093)},
		{name: "load balancer", expose: &fluxv1alpha2.Expose{Type: fluxv1alpha2.ExposeLoadBalancer}, wantType: corev1.ServiceTypeLoadBalancer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := LeadBrokerService(rootWithExpose(tt.expose))
			require.Equal(t, "flux-sample-lead-broker", *svc.Name)
			require.Equal(t, "hpc", *svc.Namespace)
			require.Equal(t, tt.wantType, *svc.Spec.Type)
			require.Equal(t, map[string]string{
				fluxv1alpha2.LabelMiniCluster:              "flux-sample",
				"batch.kubernetes.io/job-name":             "flux-sample",
				"batch.kubernetes.io/job-completion-index": "0",
			}, svc.Spec.Selector, "rank 0 only")
			require.True(t, *svc.Spec.PublishNotReadyAddresses)
			require.Len(t, svc.Spec.Ports, 1)
			require.Equal(t, int32(8050), *svc.Spec.Ports[0].Port)
			require.Equal(t, int32(8050), svc.Spec.Ports[0].TargetPort.IntVal)
			require.Equal(t, tt.wantNodePort, svc.Spec.Ports[0].NodePort)
		})
	}
}

func TestAdvertisedEndpoint(t *testing.T) {
	nodePortSvc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "flux-sample-lead-broker"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 8050, NodePort: 31234}}},
	}
	lbSvc := func(ingress ...corev1.LoadBalancerIngress) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "flux-sample-lead-broker"},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 8050, NodePort: 31234}}},
			Status:     corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: ingress}},
		}
	}
	node := func(addresses ...corev1.NodeAddress) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Status: corev1.NodeStatus{Addresses: addresses}}
	}
	external := corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.7"}
	internal := corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.7"}
	internalV6 := corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "fd00::7"}

	tests := []struct {
		name       string
		expose     *fluxv1alpha2.Expose
		svc        *corev1.Service
		node       *corev1.Node
		want       bursting.Endpoint
		wantReason string
		wantErr    string
	}{
		{name: "no Service yet", wantReason: fluxv1alpha2.ReasonAddressPending, wantErr: "does not exist yet"},
		{name: "node port not allocated", svc: &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 8050}}}},
			node: node(external), wantReason: fluxv1alpha2.ReasonAddressPending, wantErr: "no node port yet"},
		{name: "override wins", expose: &fluxv1alpha2.Expose{Address: "lead.example.org"}, svc: nodePortSvc, node: node(external),
			want: bursting.Endpoint{Address: "lead.example.org", Port: 31234}, wantReason: fluxv1alpha2.ReasonAddressOverridden},
		{name: "node external IP first", svc: nodePortSvc, node: node(internal, external),
			want: bursting.Endpoint{Address: "203.0.113.7", Port: 31234}, wantReason: fluxv1alpha2.ReasonAddressAssigned},
		{name: "internal IP without an external one", svc: nodePortSvc, node: node(internal),
			want: bursting.Endpoint{Address: "10.0.0.7", Port: 31234}, wantReason: fluxv1alpha2.ReasonAddressAssigned},
		{name: "IPv6 is skipped", svc: nodePortSvc, node: node(internalV6, internal),
			want: bursting.Endpoint{Address: "10.0.0.7", Port: 31234}, wantReason: fluxv1alpha2.ReasonAddressAssigned},
		{name: "only IPv6", svc: nodePortSvc, node: node(internalV6), wantReason: fluxv1alpha2.ReasonAddressPending, wantErr: "no IPv4"},
		{name: "pod not scheduled", svc: nodePortSvc, wantReason: fluxv1alpha2.ReasonAddressPending, wantErr: "not scheduled"},
		{name: "load balancer IP on the broker port", svc: lbSvc(corev1.LoadBalancerIngress{IP: "198.51.100.4"}),
			want: bursting.Endpoint{Address: "198.51.100.4", Port: 8050}, wantReason: fluxv1alpha2.ReasonAddressAssigned},
		{name: "load balancer hostname", svc: lbSvc(corev1.LoadBalancerIngress{Hostname: "lb.example.org"}),
			want: bursting.Endpoint{Address: "lb.example.org", Port: 8050}, wantReason: fluxv1alpha2.ReasonAddressAssigned},
		{name: "load balancer pending", svc: lbSvc(), wantReason: fluxv1alpha2.ReasonAddressPending, wantErr: "no address yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reason, err := AdvertisedEndpoint(rootWithExpose(tt.expose), tt.svc, tt.node)
			require.Equal(t, tt.wantReason, reason)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}
