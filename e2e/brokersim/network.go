package brokersim

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// ClusterDomain is the DNS domain of every simulated cluster, the one the rendered
// default_connect names (<pod>.<service>.<namespace>.svc.cluster.local).
const ClusterDomain = "cluster.local"

// Listener is a broker's bind socket as the network sees it: the pod (its cluster and
// hostname) and the TCP port it binds. Whatever interface the bind URI names (eth0, 0.0.0.0,
// *), a pod has one, so the port is all that matters.
type Listener struct {
	Cluster  string
	Hostname string
	Port     int
}

// String returns "<hostname>:<port> in cluster <cluster>".
func (l Listener) String() string {
	return fmt.Sprintf("%s:%d in cluster %s", l.Hostname, l.Port, l.Cluster)
}

// Route says that a broker running in Cluster reaches Target when it dials Host:Port. Routes
// are per cluster: a name that resolves in one cluster does not in another.
type Route struct {
	// Cluster is the cluster the dialling broker runs in.
	Cluster string
	// Host is the name or address the broker dials, after %h and %p substitution.
	Host string
	Port int
	// Target is the listener the connection reaches.
	Target Listener
}

// Lead is the one address that resolves from every cluster: the address and port the root's
// rank 0 is exposed at (a node address and the NodePort of the lead broker Service), leading
// to rank 0's listener. When Address is an IPv4 loopback address, as the nodes of the local
// clusters have, Run serves the NodePort there for real (a clusters.Forwarder to rank 0's
// listener) and the brokers that connect to it dial it; any other address is routed
// in-process, like the names of a cluster.
type Lead struct {
	Address string
	Port    int
	Target  Listener
}

// Network maps the addresses brokers dial to the listeners they reach. Build it before Run and
// do not change it while a Run uses it. Several runs may share it, one at a time when a lead is
// on loopback: each serves the lead's NodePort on its address while it runs.
type Network struct {
	routes map[dialKey]Listener
	leads  map[hostPort]Listener
}

type hostPort struct {
	host string
	port int
}

type dialKey struct {
	cluster string
	hostPort
}

// NewNetwork returns a network where nothing resolves.
func NewNetwork() *Network {
	return &Network{routes: map[dialKey]Listener{}, leads: map[hostPort]Listener{}}
}

// AddRoute adds r. It refuses an incomplete route and one that sends an address already
// routed in that cluster to another listener.
func (n *Network) AddRoute(r Route) error {
	if r.Cluster == "" {
		return fmt.Errorf("route to %s:%d: no cluster", r.Host, r.Port)
	}
	if err := checkAddr(r.Host, r.Port); err != nil {
		return fmt.Errorf("route in cluster %s: %w", r.Cluster, err)
	}
	if err := checkListener(r.Target); err != nil {
		return fmt.Errorf("route to %s:%d in cluster %s: %w", r.Host, r.Port, r.Cluster, err)
	}
	key := dialKey{cluster: r.Cluster, hostPort: hostPort{host: strings.ToLower(r.Host), port: r.Port}}
	if prev, dup := n.routes[key]; dup && prev != r.Target {
		return fmt.Errorf("%s:%d in cluster %s leads to %s already, not to %s", r.Host, r.Port, r.Cluster, prev, r.Target)
	}
	n.routes[key] = r.Target
	return nil
}

// AddLead adds the address rank 0 is exposed at, which resolves from every cluster.
func (n *Network) AddLead(l Lead) error {
	if err := checkAddr(l.Address, l.Port); err != nil {
		return fmt.Errorf("lead broker: %w", err)
	}
	if err := checkListener(l.Target); err != nil {
		return fmt.Errorf("lead broker %s:%d: %w", l.Address, l.Port, err)
	}
	key := hostPort{host: strings.ToLower(l.Address), port: l.Port}
	if prev, dup := n.leads[key]; dup && prev != l.Target {
		return fmt.Errorf("lead broker %s:%d leads to %s already, not to %s", l.Address, l.Port, prev, l.Target)
	}
	n.leads[key] = l.Target
	return nil
}

// AddHeadlessService adds the names a headless Service gives the pods of an indexed Job whose
// subdomain it is: inside cluster only, <pod>.<service>.<namespace>.svc.cluster.local:port
// leads to the pod's listener on port. pods are the pods' hostnames.
func (n *Network) AddHeadlessService(cluster, namespace, service string, port int, pods ...string) error {
	for _, pod := range pods {
		err := n.AddRoute(Route{
			Cluster: cluster,
			Host:    pod + "." + service + "." + namespace + ".svc." + ClusterDomain,
			Port:    port,
			Target:  Listener{Cluster: cluster, Hostname: pod, Port: port},
		})
		if err != nil {
			return fmt.Errorf("headless Service %s/%s: %w", namespace, service, err)
		}
	}
	return nil
}

// Routes returns every route, the leads as routes with an empty Cluster, sorted.
func (n *Network) Routes() []Route {
	var out []Route
	for k, t := range n.routes {
		out = append(out, Route{Cluster: k.cluster, Host: k.host, Port: k.port, Target: t})
	}
	for k, t := range n.leads {
		out = append(out, Route{Host: k.host, Port: k.port, Target: t})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Cluster != b.Cluster {
			return a.Cluster < b.Cluster
		}
		if a.Host != b.Host {
			return a.Host < b.Host
		}
		return a.Port < b.Port
	})
	return out
}

// ErrUnresolved is wrapped by the errors of Resolve for an address that does not resolve.
var ErrUnresolved = errors.New("does not resolve")

// Resolve returns the listener a broker running in cluster reaches when it connects to uri:
// a route of that cluster, else the lead broker's address. The error wraps ErrUnresolved when
// neither matches, or is a *URIError when uri is not a tcp://host:port URI.
func (n *Network) Resolve(cluster, uri string) (Listener, error) {
	l, _, err := n.resolve(cluster, uri)
	return l, err
}

// resolve is Resolve, and also returns the lead's address when uri reaches a lead.
func (n *Network) resolve(cluster, uri string) (Listener, *hostPort, error) {
	host, port, err := SplitTCP(uri)
	if err != nil {
		return Listener{}, nil, err
	}
	key := hostPort{host: strings.ToLower(host), port: port}
	if l, ok := n.routes[dialKey{cluster: cluster, hostPort: key}]; ok {
		return l, nil, nil
	}
	if l, ok := n.leads[key]; ok {
		return l, &key, nil
	}
	return Listener{}, nil, fmt.Errorf("%s:%d %w from cluster %s: only the cluster's own Service names and the lead broker's exposed address do", host, port, ErrUnresolved, cluster)
}

// String returns host:port.
func (h hostPort) String() string { return net.JoinHostPort(h.host, strconv.Itoa(h.port)) }

// onLoopback reports whether h is an IPv4 loopback address, where a process can listen: a node
// address of the local clusters (e2e/clusters).
func (h hostPort) onLoopback() bool {
	ip, err := netip.ParseAddr(h.host)
	return err == nil && ip.Is4() && ip.IsLoopback()
}

// BindListener returns the listener a broker of hostname in cluster gets when it binds uri,
// a tcp:// URI whose host part names an interface or address of the pod (eth0, 0.0.0.0, *).
func BindListener(cluster, hostname, uri string) (Listener, error) {
	_, port, err := SplitTCP(uri)
	if err != nil {
		return Listener{}, err
	}
	l := Listener{Cluster: cluster, Hostname: hostname, Port: port}
	if err := checkListener(l); err != nil {
		return Listener{}, err
	}
	return l, nil
}

// URIError reports a URI the stand-in cannot bind or connect to.
type URIError struct {
	URI    string
	Reason string
}

// Error returns "<uri>: <reason>".
func (e *URIError) Error() string { return strconv.Quote(e.URI) + ": " + e.Reason }

// SplitTCP splits a ZeroMQ tcp://host:port URI into its host and port, as a broker's bind or
// connect does: the port must be a decimal number in 1-65535 (0MQ's wildcard * is refused,
// as Flux refuses it); IPv6 addresses and ipc:// are not simulated.
func SplitTCP(uri string) (host string, port int, err error) {
	rest, ok := strings.CutPrefix(uri, "tcp://")
	if !ok {
		if strings.HasPrefix(uri, "ipc://") {
			return "", 0, &URIError{URI: uri, Reason: "ipc:// is not simulated"}
		}
		return "", 0, &URIError{URI: uri, Reason: "not a tcp:// URI"}
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return "", 0, &URIError{URI: uri, Reason: "no port"}
	}
	host, p := rest[:i], rest[i+1:]
	switch {
	case host == "":
		return "", 0, &URIError{URI: uri, Reason: "no host"}
	case strings.ContainsAny(host, "[]:/"):
		return "", 0, &URIError{URI: uri, Reason: "not a host name or IPv4 address (IPv6 is not simulated)"}
	case p == "*":
		return "", 0, &URIError{URI: uri, Reason: "the port is the 0MQ wildcard"}
	}
	port, err = parsePort(p)
	if err != nil {
		return "", 0, &URIError{URI: uri, Reason: err.Error()}
	}
	return host, port, nil
}

func parsePort(s string) (int, error) {
	if s == "" || len(s) > 5 || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("the port %q is not a number in 1-65535", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("the port %q is not a number in 1-65535", s)
	}
	return n, nil
}

func checkAddr(host string, port int) error {
	switch {
	case host == "":
		return errors.New("no host")
	case strings.ContainsAny(host, "[]:/ "):
		return fmt.Errorf("%q is not a host name or IPv4 address", host)
	case port < 1 || port > 65535:
		return fmt.Errorf("port %d is not in 1-65535", port)
	}
	return nil
}

func checkListener(l Listener) error {
	switch {
	case l.Cluster == "":
		return errors.New("the listener has no cluster")
	case l.Hostname == "":
		return errors.New("the listener has no hostname")
	case l.Port < 1 || l.Port > 65535:
		return fmt.Errorf("the listener's port %d is not in 1-65535", l.Port)
	}
	return nil
}

// loopback returns a TCP address to listen on for a stand-in's listener: any free port of the
// loopback interface.
func loopback() string { return net.JoinHostPort("127.0.0.1", "0") }
