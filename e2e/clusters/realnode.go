package clusters

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fluxfed/fluxfed/e2e/netguard"
	"github.com/fluxfed/fluxfed/e2e/realnode"
)

// LabelRealNode is "true" on the real nodes of a local cluster (Options.RealNodes): a pod that
// must run for real selects it (nodeSelector), or names a real node.
const LabelRealNode = "e2e.fluxfed.io/real-node"

// The programs of real nodes and of the cluster DNS; the kubelet and CoreDNS come from
// e2e/k8sbin, containerd from the machine.
const (
	componentContainerd = "containerd"
	componentKubelet    = "kubelet"
	componentCoreDNS    = "coredns"
)

// Real nodes take the addresses after the simulated nodes' (node n is 127.a.0.n with its pods
// in 10.k.n.0/24, see addressPlan); the cluster's DNS is 10.k.250.10, on lo of the cluster's
// sandbox, outside every node's range. The pod network, 10.k.0.0/16, exists only inside the
// sandbox.
func (a addressPlan) clusterDNS() netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(a.k), 250, 10})
}

func (a addressPlan) podNetwork() netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(a.k), 0, 0}), 16)
}

// realNodesPrereqs returns an error naming whatever real nodes need and this machine lacks.
func realNodesPrereqs(opts Options) error {
	var errs []error
	if err := realnode.CheckMachine(); err != nil {
		errs = append(errs, err)
	}
	for _, a := range opts.RealNodeImages {
		if _, err := os.Stat(a); err != nil {
			errs = append(errs, fmt.Errorf("image archive for the real nodes (Options.RealNodeImages): %w", err))
		}
	}
	return errors.Join(errs...)
}

// nodeCerts issues a real node's client certificate (user system:node:<name> in group
// system:nodes, which the binding of ensureNodeRole lets act as a kubelet) and its kubelet's
// serving certificate, for the node's address, which the API server checks against the CA.
func (p *pki) nodeCerts(name string) (clientCert, clientKey, servingCert, servingKey []byte, err error) {
	now := time.Now()
	if clientCert, clientKey, err = p.leaf(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, now); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("issuing node %s's client certificate: %w", name, err)
	}
	if servingCert, servingKey, err = p.leaf(&x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		IPAddresses: []net.IP{net.ParseIP(name)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, now); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("issuing node %s's serving certificate: %w", name, err)
	}
	return clientCert, clientKey, servingCert, servingKey, nil
}

// nodeRoleBinding gives group system:nodes the role system:node: the API server authorizes by
// RBAC alone (no Node authorizer), and the role has no subjects by default.
const nodeRoleBinding = "fluxfed-e2e:nodes"

func ensureNodeRole(ctx context.Context, cs kubernetes.Interface) error {
	_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: nodeRoleBinding},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:nodes"}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("letting the nodes act as kubelets: %w", err)
	}
	return nil
}

// startRealNodes brings up the cluster's sandbox, its CoreDNS and its real nodes, each with the
// images imported before its kubelet starts. waitUsable then waits for the nodes to be Ready.
func (l *localProvider) startRealNodes(ctx context.Context, env *Environment, c *Cluster, plan addressPlan, keys *pki, files pkiFiles, cs kubernetes.Interface) error {
	sb, err := realnode.NewSandbox()
	if err != nil {
		return fmt.Errorf("the real nodes' sandbox: %w", err)
	}
	if err := env.update(func() { c.Sandbox = sb }); err != nil {
		return errors.Join(err, sb.Remove())
	}
	if err := realnode.SetupNetwork(ctx, sb.Netns(), plan.clusterDNS()); err != nil {
		return err
	}
	if err := ensureNodeRole(ctx, cs); err != nil {
		return err
	}
	var names []string
	for i := 1; i <= l.realNodes; i++ {
		names = append(names, plan.nodeIP(l.nodes+i))
	}
	if err := env.update(func() { c.RealNodes = names }); err != nil {
		return err
	}
	if err := c.serveRealNodes(); err != nil {
		return err
	}
	if err := l.startDNS(ctx, env, c); err != nil {
		return err
	}
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { errs[i] = l.startRealNode(ctx, env, c, cs, plan, keys, files, l.nodes+i+1, name) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startDNS starts the cluster's CoreDNS in the sandbox, on the cluster DNS address, reading the
// API server through the sandbox's side of the proxy with the administrator's kubeconfig, and
// waits until it answers for the kubernetes Service.
func (l *localProvider) startDNS(ctx context.Context, env *Environment, c *Cluster) error {
	corefile := filepath.Join(c.Dir, "Corefile")
	if err := os.WriteFile(corefile, []byte(realnode.Corefile(c.Kubeconfig)), 0o644); err != nil {
		return err
	}
	coredns := l.path(componentCoreDNS)
	argv, err := realnode.DNSCommand(c.Sandbox.Netns(), c.Sandbox.Cgroup()+"/dns", coredns, corefile)
	if err != nil {
		return err
	}
	if _, err := l.startDaemon(env, c, procSpec{component: componentCoreDNS, path: argv[0], args: argv[1:], binary: coredns}); err != nil {
		return err
	}
	resolver := c.resolver()
	name := "kubernetes.default.svc.cluster.local"
	return env.poll(ctx, c, "CoreDNS to answer for "+name, componentCoreDNS, func(ctx context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		addrs, err := resolver.LookupHost(ctx, name)
		return err == nil && len(addrs) > 0, err
	})
}

// startDaemon starts a process of a real node or of the cluster DNS and records it, in the
// state file and as an owner of the sandbox.
func (l *localProvider) startDaemon(env *Environment, c *Cluster, spec procSpec) (*Process, error) {
	spec.dir, spec.log = c.Dir, filepath.Join(c.Dir, "logs", spec.component+".log")
	p, err := startProcess(spec, l.detach)
	if err != nil {
		return nil, err
	}
	if err := env.addProcess(c, p); err != nil {
		return nil, err
	}
	if err := c.Sandbox.Own(p.PID); err != nil {
		return nil, err
	}
	return p, nil
}

// startRealNode starts node number n of the cluster: containerd, the images, the kubelet; and
// waits until the node is Ready.
func (l *localProvider) startRealNode(ctx context.Context, env *Environment, c *Cluster, cs kubernetes.Interface, plan addressPlan, keys *pki, files pkiFiles, n int, name string) error {
	dir := filepath.Join(c.Dir, "nodes", name)
	pkiDir := filepath.Join(dir, "pki")
	if err := os.MkdirAll(pkiDir, 0o700); err != nil {
		return err
	}
	clientCert, clientKey, servingCert, servingKey, err := keys.nodeCerts(name)
	if err != nil {
		return err
	}
	node := &realnode.Node{
		Name:       name,
		Dir:        dir,
		Bridge:     "cbr" + strconv.Itoa(n),
		PodCIDR:    plan.podCIDR(n),
		ClusterDNS: plan.clusterDNS().String(),
		PauseImage: l.pauseImage,
		Cgroup:     c.Sandbox.Cgroup() + "/node-" + strconv.Itoa(n),
		Kubeconfig: filepath.Join(dir, "kubeconfig"),
		ClientCA:   files.CACert,
		TLSCert:    filepath.Join(pkiDir, "kubelet.crt"),
		TLSKey:     filepath.Join(pkiDir, "kubelet.key"),
		Labels:     map[string]string{LabelRealNode: "true"},
	}
	for path, data := range map[string][]byte{node.TLSCert: servingCert, node.TLSKey: servingKey} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}
	server, err := c.apiServerAddress()
	if err != nil {
		return err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters[c.Name] = &clientcmdapi.Cluster{Server: "https://" + server, CertificateAuthorityData: keys.CACert}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: clientCert, ClientKeyData: clientKey}
	kc.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: name}
	kc.CurrentContext = c.Name
	if err := writeKubeconfig(node.Kubeconfig, kc); err != nil {
		return err
	}
	if err := node.Prepare(); err != nil {
		return err
	}

	containerd, err := exec.LookPath(componentContainerd)
	if err != nil {
		return err
	}
	argv, err := node.ContainerdCommand(c.Sandbox.Netns(), containerd)
	if err != nil {
		return err
	}
	started := time.Now()
	cd, err := l.startDaemon(env, c, procSpec{component: componentContainerd + "-" + name, path: argv[0], args: argv[1:], binary: containerd})
	if err != nil {
		return err
	}
	if err := env.poll(ctx, c, "containerd of node "+name, cd.Component, func(ctx context.Context) (bool, error) {
		out, err := exec.CommandContext(ctx, "ctr", "--address", node.Socket(), "version").CombinedOutput()
		if err != nil {
			return false, fmt.Errorf("ctr version: %w: %s", err, out)
		}
		return true, nil
	}); err != nil {
		return err
	}
	answered := time.Now()
	if err := realnode.ImportImages(ctx, node.Socket(), l.images); err != nil {
		return err
	}
	env.logf("Cluster %s: real node %s: containerd answered in %s, %d image archives imported in %s; starting its kubelet",
		c.Name, name, answered.Sub(started).Round(100*time.Millisecond), len(l.images), time.Since(answered).Round(100*time.Millisecond))
	kubelet := l.path(componentKubelet)
	argv, err = node.KubeletCommand(c.Sandbox.Netns(), kubelet, cd.PID)
	if err != nil {
		return err
	}
	kp, err := l.startDaemon(env, c, procSpec{component: componentKubelet + "-" + name, path: argv[0], args: argv[1:], binary: kubelet})
	if err != nil {
		return err
	}
	kubeletStarted := time.Now()
	if err := env.poll(ctx, c, "real node "+name+" to be Ready", kp.Component, func(ctx context.Context) (bool, error) {
		node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return nodeReady(node), fmt.Errorf("node %s is not Ready", name)
	}); err != nil {
		return err
	}
	env.logf("Cluster %s: real node %s is Ready %s after its containerd started (%s after its kubelet)",
		c.Name, name, time.Since(started).Round(100*time.Millisecond), time.Since(kubeletStarted).Round(100*time.Millisecond))
	return nil
}

// apiServerAddress is the host:port of the cluster's API server on loopback.
func (c *Cluster) apiServerAddress() (string, error) {
	cfg, err := restConfig(c.Kubeconfig)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return "", fmt.Errorf("the API server's address %q: %w", cfg.Host, err)
	}
	return u.Host, nil
}

// sandboxDialer dials pods and the cluster DNS inside the cluster's sandbox.
func (c *Cluster) sandboxDialer() *realnode.Dialer {
	plan := planFor(c.index)
	return &realnode.Dialer{
		Netns:   c.Sandbox.Netns(),
		Allowed: []netip.Prefix{plan.podNetwork()},
		Dialer:  net.Dialer{Timeout: backendDialTimeout},
	}
}

// resolver asks the cluster's DNS, in its sandbox, as a pod would.
func (c *Cluster) resolver() *net.Resolver {
	dns := net.JoinHostPort(planFor(c.index).clusterDNS().String(), "53")
	d := c.sandboxDialer()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, dns)
	}}
}

// Resolver returns a resolver that asks the DNS of a cluster with real nodes, from inside its
// sandbox, as a pod would; nil for a cluster without real nodes.
func (c *Cluster) Resolver() *net.Resolver {
	if c.Sandbox == nil {
		return nil
	}
	return c.resolver()
}

// serveRealNodes carries connections between the sandbox and this program's namespace, where
// the control plane listens: from the sandbox's 127.0.0.1 at the API server's port to the API
// server, and from each real node's address here at the kubelet port to its kubelet in the
// sandbox. Closed by closeKubelet.
func (c *Cluster) serveRealNodes() error {
	server, err := c.apiServerAddress()
	if err != nil {
		return err
	}
	l, err := realnode.Listen(c.Sandbox.Netns(), "tcp", server)
	if err != nil {
		return fmt.Errorf("cluster %s: the API server's side in the real nodes' sandbox: %w", c.Name, err)
	}
	guarded := (&netguard.Dialer{Dialer: net.Dialer{Timeout: backendDialTimeout}}).DialContext
	c.realProxies = append(c.realProxies, serveForward([]net.Listener{l}, server, guarded))
	inside := c.sandboxDialer().DialContext
	for _, name := range c.RealNodes {
		endpoint := net.JoinHostPort(name, strconv.Itoa(kubeletPort))
		f, err := forwardNodePort([]string{name}, kubeletPort, endpoint, inside)
		if err != nil {
			c.closeKubelet()
			return fmt.Errorf("cluster %s: the kubelet endpoint of real node %s: %w", c.Name, name, err)
		}
		c.realProxies = append(c.realProxies, f)
	}
	return nil
}

// ForwardNodePortToPod forwards svc's node port, on every node of c, to pod, which runs on a real
// node of c, at the Service's target port, as kube-proxy would to the pod as an endpoint of the
// Service: the connection goes into the cluster's sandbox, to the pod's address.
func (c *Cluster) ForwardNodePortToPod(svc *corev1.Service, pod *corev1.Pod) (*Forwarder, error) {
	if c.Sandbox == nil {
		return nil, fmt.Errorf("cluster %s has no real nodes; forward to a backend on loopback with ForwardNodePort", c.Name)
	}
	if pod.Status.PodIP == "" {
		return nil, fmt.Errorf("pod %s/%s has no address yet", pod.Namespace, pod.Name)
	}
	if svc.Spec.Type != corev1.ServiceTypeNodePort && svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return nil, fmt.Errorf("service %s/%s is of type %q, which has no node port", svc.Namespace, svc.Name, svc.Spec.Type)
	}
	if len(svc.Spec.Ports) == 0 || svc.Spec.Ports[0].NodePort == 0 {
		return nil, fmt.Errorf("service %s/%s has no node port assigned yet", svc.Namespace, svc.Name)
	}
	port, err := targetPort(svc.Spec.Ports[0], pod)
	if err != nil {
		return nil, fmt.Errorf("service %s/%s to pod %s: %w", svc.Namespace, svc.Name, pod.Name, err)
	}
	f, err := forwardNodePort(c.NodeAddresses, int(svc.Spec.Ports[0].NodePort), net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port)), c.sandboxDialer().DialContext)
	if err != nil {
		return nil, fmt.Errorf("cluster %s, service %s/%s: %w", c.Name, svc.Namespace, svc.Name, err)
	}
	return f, nil
}

// targetPort resolves a Service port's target on pod: a number, a container port's name, or
// (unset) the Service port itself.
func targetPort(sp corev1.ServicePort, pod *corev1.Pod) (int, error) {
	switch {
	case sp.TargetPort.Type == intstr.String && sp.TargetPort.StrVal != "":
		for _, ctr := range pod.Spec.Containers {
			for _, p := range ctr.Ports {
				if p.Name == sp.TargetPort.StrVal {
					return int(p.ContainerPort), nil
				}
			}
		}
		return 0, fmt.Errorf("no container port named %q", sp.TargetPort.StrVal)
	case sp.TargetPort.IntVal != 0:
		return int(sp.TargetPort.IntVal), nil
	}
	return int(sp.Port), nil
}
