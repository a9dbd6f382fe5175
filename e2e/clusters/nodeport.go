package clusters

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/fluxfed/fluxfed/e2e/netguard"
)

// backendDialTimeout bounds the connection to a forwarder's backend, which is on loopback: it
// answers at once or not at all.
const backendDialTimeout = 5 * time.Second

// Forwarder stands in for kube-proxy, which the local clusters do not run, for one NodePort: it
// listens on the port at every node's address and forwards each TCP connection to a backend
// address on loopback (where kube-proxy would pick a ready endpoint of the Service). It only
// works because the simulated nodes have loopback addresses. A connection its backend refuses
// is closed, as kube-proxy rejects a connection to a Service without endpoints.
type Forwarder struct {
	backend   string
	listeners []net.Listener
	dial      dialFunc

	// ctx ends the dials to the backend in flight when the forwarder closes.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// ForwardNodePort listens on port at each of the node addresses and forwards every connection
// to backend. The node addresses and the backend must be loopback addresses (netguard.Allowed).
func ForwardNodePort(nodes []string, port int, backend string) (*Forwarder, error) {
	if len(nodes) == 0 {
		return nil, errors.New("forwarding a NodePort: no node addresses")
	}
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("forwarding a NodePort: port %d is not in 1-65535", port)
	}
	if err := netguard.Allowed(backend); err != nil {
		return nil, fmt.Errorf("forwarding NodePort %d: the backend: %w", port, err)
	}
	return forwardNodePort(nodes, port, backend, (&netguard.Dialer{Dialer: net.Dialer{Timeout: backendDialTimeout}}).DialContext)
}

// dialFunc dials a forwarder's backend.
type dialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// forwardNodePort is ForwardNodePort with the backend dialled by dial, which may reach into the
// network namespace of a cluster's real nodes.
func forwardNodePort(nodes []string, port int, backend string, dial dialFunc) (*Forwarder, error) {
	var listeners []net.Listener
	for _, node := range nodes {
		addr := net.JoinHostPort(node, strconv.Itoa(port))
		if err := netguard.Allowed(node); err != nil {
			return nil, errors.Join(fmt.Errorf("forwarding NodePort %d: node address: %w", port, err), closeAll(listeners))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("forwarding NodePort %d: %w", port, err), closeAll(listeners))
		}
		listeners = append(listeners, l)
	}
	return serveForward(listeners, backend, dial), nil
}

// serveForward forwards every connection that the listeners accept to backend, dialled by dial.
func serveForward(listeners []net.Listener, backend string, dial dialFunc) *Forwarder {
	f := &Forwarder{backend: backend, listeners: listeners, conns: map[net.Conn]struct{}{}, dial: dial}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	for _, l := range f.listeners {
		f.wg.Go(func() { f.serve(l) })
	}
	return f
}

func closeAll(listeners []net.Listener) error {
	var errs []error
	for _, l := range listeners {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}

// ForwardNodePort forwards svc's node port, on every node of c, to backend. svc must be a
// NodePort (or LoadBalancer) Service whose first port has its node port assigned, as the API
// server returns it.
func (c *Cluster) ForwardNodePort(svc *corev1.Service, backend string) (*Forwarder, error) {
	if svc.Spec.Type != corev1.ServiceTypeNodePort && svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return nil, fmt.Errorf("service %s/%s is of type %q, which has no node port", svc.Namespace, svc.Name, svc.Spec.Type)
	}
	if len(svc.Spec.Ports) == 0 || svc.Spec.Ports[0].NodePort == 0 {
		return nil, fmt.Errorf("service %s/%s has no node port assigned yet", svc.Namespace, svc.Name)
	}
	if len(c.NodeAddresses) == 0 {
		return nil, fmt.Errorf("cluster %s has no node addresses", c.Name)
	}
	f, err := ForwardNodePort(c.NodeAddresses, int(svc.Spec.Ports[0].NodePort), backend)
	if err != nil {
		return nil, fmt.Errorf("cluster %s, service %s/%s: %w", c.Name, svc.Namespace, svc.Name, err)
	}
	return f, nil
}

// Addrs returns the addresses the forwarder listens on, one per node.
func (f *Forwarder) Addrs() []string {
	out := make([]string, len(f.listeners))
	for i, l := range f.listeners {
		out[i] = l.Addr().String()
	}
	return out
}

// Close stops listening, closes every forwarded connection, and returns once every goroutine of
// the forwarder ended. It may be called more than once.
func (f *Forwarder) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.cancel()
	var errs []error
	for _, l := range f.listeners {
		if err := l.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	for c := range f.conns {
		_ = c.Close() // the peer sees the connection end, as when a node goes away
	}
	f.mu.Unlock()
	f.wg.Wait()
	return errors.Join(errs...)
}

// track records c so that Close ends it; it reports false, and closes c, once the forwarder is
// closed.
func (f *Forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		_ = c.Close()
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *Forwarder) untrack(c net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.conns, c)
	_ = c.Close()
}

func (f *Forwarder) serve(l net.Listener) {
	for {
		client, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // a connection that failed before it was accepted concerns nobody else
		}
		if !f.track(client) {
			return
		}
		f.wg.Go(func() { f.forward(client) })
	}
}

// forward carries one connection to the backend and back. Each direction ends with a half
// close, so that a peer that stops sending still gets the rest of the answer.
func (f *Forwarder) forward(client net.Conn) {
	defer f.untrack(client)
	backend, err := f.dial(f.ctx, "tcp", f.backend)
	if err != nil {
		return // closing the client's connection is the answer
	}
	if !f.track(backend) {
		return
	}
	defer f.untrack(backend)
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src) // ends when either side closes; nothing to report to
		if tcp, ok := dst.(*net.TCPConn); ok {
			_ = tcp.CloseWrite()
		}
	}
	wg.Go(func() { pipe(backend, client) })
	pipe(client, backend)
	wg.Wait()
}
