package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/fluxfed/fluxfed/e2e/clusters"
	"github.com/fluxfed/fluxfed/e2e/netguard"
	"github.com/fluxfed/fluxfed/e2e/realnode"
)

// HubAddress is the hub's node address as the member clusters' pods reach it, when every cluster
// has real nodes (Options.RealNodes): the clusters' sandboxes are separate network namespaces
// without a route between them or out of the machine, and a pod cannot reach a node's loopback
// address, so each member's sandbox holds this address on its lo, where NodePorts listens on the
// hub's node ports and carries every connection to the hub's node address on loopback.
// 10.0.0.0/16 is no cluster's pod network (cluster k has 10.k.0.0/16, k from 1). A root exposes
// its lead broker at this address (spec.flux.bursting.expose.address).
var HubAddress = netip.MustParseAddr("10.0.0.1")

// NodePorts plays kube-proxy for the NodePort Services of a hub with real nodes: a Service that
// selects one running pod is forwarded, on the hub's node addresses, to that pod in the hub's
// sandbox (clusters.Cluster.ForwardNodePortToPod), and, in every member's sandbox, from
// HubAddress at the same port to the hub's first node address. It lives as long as the program
// that serves it.
type NodePorts struct {
	hub     *clusters.Cluster
	members []*clusters.Cluster
	cs      kubernetes.Interface
	logf    func(string, ...any)
	cancel  context.CancelFunc
	done    chan struct{}

	mu       sync.Mutex
	forwards map[types.NamespacedName]*forward
}

type forward struct {
	backend string
	f       *clusters.Forwarder
	bridges []net.Listener
}

// ServeNodePorts gives every member's sandbox HubAddress and serves the hub's node ports, as
// NodePorts says, until Close; logf reports each port it starts forwarding and each failure to.
func ServeNodePorts(hub *clusters.Cluster, members []*clusters.Cluster, logf func(string, ...any)) (*NodePorts, error) {
	if hub.Sandbox == nil {
		return nil, fmt.Errorf("cluster %s has no real nodes, whose node ports NodePorts serves", hub.Name)
	}
	cs, err := kubernetes.NewForConfig(hub.Config)
	if err != nil {
		return nil, err
	}
	for _, m := range members {
		if m.Sandbox == nil {
			return nil, fmt.Errorf("cluster %s has no real nodes, whose pods would reach the hub's node ports", m.Name)
		}
		out, err := exec.Command("nsenter", "--net="+m.Sandbox.Netns(), "--", "ip", "addr", "replace", HubAddress.String()+"/32", "dev", "lo").CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("giving lo of %s's sandbox the hub's address %s: %w: %s", m.Name, HubAddress, err, out)
		}
		if err := realnode.CheckIsolated(m.Sandbox.Netns()); err != nil {
			return nil, fmt.Errorf("cluster %s's sandbox: %w", m.Name, err)
		}
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &NodePorts{hub: hub, members: members, cs: cs, logf: logf, cancel: cancel, done: make(chan struct{}),
		forwards: map[types.NamespacedName]*forward{}}
	go func() {
		defer close(p.done)
		for ctx.Err() == nil {
			if err := p.sync(ctx); err != nil && ctx.Err() == nil {
				logf("Node ports of %s: %v", hub.Name, err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return p, nil
}

// Close stops forwarding every node port and returns once it stopped.
func (p *NodePorts) Close() error {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for key, fw := range p.forwards {
		errs = append(errs, fw.close())
		delete(p.forwards, key)
	}
	return errors.Join(errs...)
}

func (fw *forward) close() error {
	errs := []error{fw.f.Close()}
	for _, l := range fw.bridges {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}

// sync forwards every NodePort Service that selects one running pod to it, and stops forwarding
// the others.
func (p *NodePorts) sync(ctx context.Context) error {
	services, err := p.cs.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing Services: %w", err)
	}
	want := map[types.NamespacedName]bool{}
	var errs []error
	for i := range services.Items {
		svc := &services.Items[i]
		if svc.Spec.Type != corev1.ServiceTypeNodePort || len(svc.Spec.Selector) == 0 || len(svc.Spec.Ports) == 0 || svc.Spec.Ports[0].NodePort == 0 {
			continue
		}
		pods, err := p.cs.CoreV1().Pods(svc.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(svc.Spec.Selector).String()})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var backends []*corev1.Pod
		for j := range pods.Items {
			pod := &pods.Items[j]
			if pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" && pod.DeletionTimestamp == nil {
				backends = append(backends, pod)
			}
		}
		if len(backends) != 1 {
			continue
		}
		key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
		want[key] = true
		backend := backends[0].Status.PodIP
		p.mu.Lock()
		fw := p.forwards[key]
		p.mu.Unlock()
		if fw != nil && fw.backend == backend {
			continue
		}
		if fw != nil {
			errs = append(errs, fw.close())
		}
		fw, err = p.open(svc, backends[0])
		p.mu.Lock()
		if err == nil {
			p.forwards[key] = fw
		} else {
			delete(p.forwards, key)
		}
		p.mu.Unlock()
		errs = append(errs, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, fw := range p.forwards {
		if !want[key] {
			errs = append(errs, fw.close())
			delete(p.forwards, key)
		}
	}
	return errors.Join(errs...)
}

// open forwards svc's node port to pod, on the hub's nodes and from every member's sandbox.
func (p *NodePorts) open(svc *corev1.Service, pod *corev1.Pod) (*forward, error) {
	f, err := p.hub.ForwardNodePortToPod(svc, pod)
	if err != nil {
		return nil, err
	}
	fw := &forward{backend: pod.Status.PodIP, f: f}
	port := strconv.Itoa(int(svc.Spec.Ports[0].NodePort))
	target := net.JoinHostPort(p.hub.NodeAddresses[0], port)
	for _, m := range p.members {
		l, err := realnode.Listen(m.Sandbox.Netns(), "tcp", net.JoinHostPort(HubAddress.String(), port))
		if err != nil {
			return nil, errors.Join(fmt.Errorf("cluster %s: listening on the hub's address: %w", m.Name, err), fw.close())
		}
		fw.bridges = append(fw.bridges, l)
		go bridge(l, target)
	}
	p.logf("Node port %s of Service %s/%s on the hub reaches pod %s at %s, from the hub's nodes and from %s in the members' sandboxes",
		port, svc.Namespace, svc.Name, pod.Name, pod.Status.PodIP, HubAddress)
	return fw, nil
}

// bridge carries every connection l accepts to target, on loopback, until l is closed.
func bridge(l net.Listener, target string) {
	dialer := &netguard.Dialer{Dialer: net.Dialer{Timeout: 10 * time.Second}}
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			up, err := dialer.DialContext(context.Background(), "tcp", target)
			if err != nil {
				return
			}
			defer up.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(up, conn); done <- struct{}{} }()
			go func() { _, _ = io.Copy(conn, up); done <- struct{}{} }()
			<-done
		}()
	}
}
