package clusters

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/fluxfed/fluxfed/e2e/k8sbin"
	"github.com/fluxfed/fluxfed/e2e/netguard"
)

// The components of a local cluster, also the names of their binaries and log files.
const (
	componentEtcd       = "etcd"
	componentAPIServer  = "kube-apiserver"
	componentController = "kube-controller-manager"
	componentScheduler  = "kube-scheduler"
	componentKwok       = "kwok"
)

var localBinaries = []string{componentEtcd, componentAPIServer, componentController, componentScheduler, componentKwok}

// controllers are the kube-controller-manager controllers a MiniCluster and the tests need: Jobs
// and their pods, owner-based deletion, namespaces, service accounts and their tokens, Service
// endpoints (headless Services of the brokers), and the workload controllers tests may use.
// Controllers for real nodes, volumes and clouds are left out: nothing here has them.
var controllers = []string{
	"job-controller",
	"garbage-collector-controller",
	"namespace-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"root-ca-certificate-publisher-controller",
	"endpoints-controller",
	"endpointslice-controller",
	"replicaset-controller",
	"deployment-controller",
	"statefulset-controller",
	"cronjob-controller",
	"ttl-after-finished-controller",
	"pod-garbage-collector-controller",
	"disruption-controller",
	"clusterrole-aggregation-controller",
	"persistentvolume-binder-controller",
}

// serviceAccountIssuer is the issuer of service account tokens in every local cluster.
const serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// startAttempts bounds how often a component is started again on new ports after another
// program took one of its ports.
const startAttempts = 3

// stopGrace is how long a component has to exit after SIGTERM before it gets SIGKILL.
const stopGrace = 10 * time.Second

// localProvider runs each cluster as local processes.
type localProvider struct {
	bin    string
	ports  *portAllocator
	detach bool
	// beforeControllers is Options.BeforeControllers.
	beforeControllers func(ctx context.Context, c *Cluster, cfg *rest.Config) error
	nodes             int
	stages            []byte
	// realNodes, images and pauseImage are Options.RealNodes, RealNodeImages and PauseImage.
	realNodes  int
	images     []string
	pauseImage string
	// http asks etcd whether it is healthy.
	http *http.Client
}

func (l *localProvider) prepare(opts Options) error {
	binaries := localBinaries
	if opts.RealNodes > 0 {
		if err := realNodesPrereqs(opts); err != nil {
			return err
		}
		binaries = append(slices.Clone(binaries), componentKubelet, componentCoreDNS)
	}
	bin, err := k8sbin.Dir(binaries...)
	if err != nil {
		return err
	}
	stages, err := renderStages(nodeResources)
	if err != nil {
		return err
	}
	l.bin, l.ports, l.detach, l.nodes, l.stages = bin, newPortAllocator(), opts.Detach, opts.NodesPerCluster, stages
	l.beforeControllers = opts.BeforeControllers
	l.realNodes, l.images, l.pauseImage = opts.RealNodes, opts.RealNodeImages, opts.PauseImage
	l.http = &http.Client{Transport: &http.Transport{DialContext: (&netguard.Dialer{}).DialContext}}
	return nil
}

// addressPlan gives each cluster addresses of its own, so that node, pod and Service addresses
// never repeat across clusters. k = index+1 and a = 100+k:
//
//   - nodes 127.a.0.n, on loopback: they are real, a process may listen on them (a Forwarder,
//     for a NodePort), and whatever dials them stays on the machine;
//   - Services 127.a.240.0/20 (the kubernetes Service at 127.a.240.1), on loopback too, although
//     a Service's cluster IP is never dialled here: no kube-proxy runs;
//   - node n's pods 10.k.n.0/24, and 10.k.239.0/24 for pods of nodes kwok knows nothing about.
//     Pod addresses cannot be loopback addresses: the endpoint controllers write them into
//     EndpointSlices, which refuse the loopback range. Nothing dials a pod address here (the
//     stand-in brokers reach each other by name, see e2e/brokersim), and the tests run where
//     nothing but loopback is routed (e2e/cmd/loopback).
//
// The API servers and etcd listen on 127.0.0.1, outside every cluster's range.
type addressPlan struct{ k int }

func planFor(index int) addressPlan { return addressPlan{k: index + 1} }

// octet is the second octet of the cluster's loopback addresses.
func (a addressPlan) octet() int { return 100 + a.k }

func (a addressPlan) nodeIP(n int) string { return fmt.Sprintf("127.%d.0.%d", a.octet(), n) }

// nodeIPs are the addresses of nodes 1 to count.
func (a addressPlan) nodeIPs(count int) []string {
	out := make([]string, count)
	for n := range out {
		out[n] = a.nodeIP(n + 1)
	}
	return out
}
func (a addressPlan) serviceCIDR() string     { return fmt.Sprintf("127.%d.240.0/20", a.octet()) }
func (a addressPlan) serviceIP() net.IP       { return net.IPv4(127, byte(a.octet()), 240, 1) }
func (a addressPlan) podCIDR(n int) string    { return fmt.Sprintf("10.%d.%d.0/24", a.k, n) }
func (a addressPlan) fallbackPodCIDR() string { return fmt.Sprintf("10.%d.239.0/24", a.k) }

// nodeName names node n (from 1) of a cluster; the cluster's name in it keeps node names apart
// across clusters too.
func nodeName(cluster string, n int) string { return fmt.Sprintf("%s-node-%d", cluster, n) }

func (l *localProvider) path(name string) string { return filepath.Join(l.bin, name) }

func (l *localProvider) up(ctx context.Context, env *Environment, c *Cluster) error {
	plan := planFor(c.index)
	var nodeIPs []net.IP
	for _, ip := range plan.nodeIPs(l.nodes) {
		nodeIPs = append(nodeIPs, net.ParseIP(ip))
	}
	keys, err := newPKI(c.Name, plan.serviceIP(), nodeIPs)
	if err != nil {
		return err
	}
	files, err := keys.write(filepath.Join(c.Dir, "pki"))
	if err != nil {
		return err
	}
	stagesPath := filepath.Join(c.Dir, "kwok-stages.yaml")
	if err := os.WriteFile(stagesPath, l.stages, 0o644); err != nil {
		return err
	}
	logPath := func(component string) string { return filepath.Join(c.Dir, "logs", component+".log") }

	var etcdURL string
	dataDir := filepath.Join(c.Dir, "etcd")
	if err := l.startWithRetry(ctx, env, c, 2, func(ports []int) (procSpec, error) {
		etcdURL = "http://127.0.0.1:" + strconv.Itoa(ports[0])
		peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
		// A failed attempt may have left a member behind with other URLs.
		if err := os.RemoveAll(dataDir); err != nil {
			return procSpec{}, err
		}
		return procSpec{
			component: componentEtcd, path: l.path(componentEtcd), dir: c.Dir, log: logPath(componentEtcd),
			args: []string{
				"--name=" + c.Name,
				"--data-dir=" + dataDir,
				"--listen-client-urls=" + etcdURL,
				"--advertise-client-urls=" + etcdURL,
				"--listen-peer-urls=" + peerURL,
				"--initial-advertise-peer-urls=" + peerURL,
				"--initial-cluster=" + c.Name + "=" + peerURL,
				"--initial-cluster-state=new",
				// Throwaway data: durability buys nothing and fsync is slow on shared disks.
				"--unsafe-no-fsync=true",
				"--log-level=warn",
			},
		}, nil
	}, func(ctx context.Context) (bool, error) { return etcdHealthy(ctx, l.http, etcdURL) }); err != nil {
		return err
	}

	var cs kubernetes.Interface
	if err := l.startWithRetry(ctx, env, c, 1, func(ports []int) (procSpec, error) {
		server := "https://127.0.0.1:" + strconv.Itoa(ports[0])
		if err := writeKubeconfig(c.Kubeconfig, adminKubeconfig(c.Name, server, keys)); err != nil {
			return procSpec{}, err
		}
		cfg, err := restConfig(c.Kubeconfig)
		if err != nil {
			return procSpec{}, err
		}
		if cs, err = kubernetes.NewForConfig(cfg); err != nil {
			return procSpec{}, err
		}
		return procSpec{
			component: componentAPIServer, path: l.path(componentAPIServer), dir: c.Dir, log: logPath(componentAPIServer),
			args: []string{
				"--etcd-servers=" + etcdURL,
				"--bind-address=127.0.0.1",
				"--advertise-address=127.0.0.1",
				// The kubernetes Service's endpoint would be the loopback address, which Endpoints
				// refuse; nothing in a cluster of simulated pods dials it anyway.
				"--endpoint-reconciler-type=none",
				"--secure-port=" + strconv.Itoa(ports[0]),
				"--cert-dir=" + filepath.Join(c.Dir, "pki"),
				"--tls-cert-file=" + files.ServingCert,
				"--tls-private-key-file=" + files.ServingKey,
				"--client-ca-file=" + files.CACert,
				"--service-account-issuer=" + serviceAccountIssuer,
				"--service-account-key-file=" + files.ServiceAccountPubKey,
				"--service-account-signing-key-file=" + files.ServiceAccountKey,
				"--service-cluster-ip-range=" + plan.serviceCIDR(),
				"--authorization-mode=RBAC",
				// The plugin taints every new node not-ready until the node lifecycle controller
				// sees it Ready. That controller is not run (it would evict pods whenever kwok
				// renews a lease late on a busy machine), so the taint would stay for good.
				"--disable-admission-plugins=TaintNodesByCondition",
				"--allow-privileged=true",
				// The hub runs flux in lead broker containers through pods/exec: the API server
				// would dial the node's Hostname address first, a name only DNS could resolve.
				// The InternalIP is a loopback address of this machine.
				"--kubelet-preferred-address-types=InternalIP",
				// What answers there is kwok (see kubeletEndpoint), with a certificate of the
				// cluster's CA: the API server checks it as it would check a kubelet's.
				"--kubelet-certificate-authority=" + files.CACert,
				// Aggregated APIs (the hub's gateway): the API server forwards the user it
				// authenticated in these headers, over a connection of the proxy certificate.
				"--requestheader-client-ca-file=" + files.CACert,
				"--requestheader-allowed-names=" + frontProxyClient,
				"--requestheader-username-headers=X-Remote-User",
				"--requestheader-group-headers=X-Remote-Group",
				"--requestheader-extra-headers-prefix=X-Remote-Extra-",
				"--proxy-client-cert-file=" + files.ProxyClientCert,
				"--proxy-client-key-file=" + files.ProxyClientKey,
				"--profiling=false",
			},
		}, nil
	}, func(ctx context.Context) (bool, error) { return readyz(ctx, cs) }); err != nil {
		return err
	}

	if l.beforeControllers != nil {
		cfg, err := restConfig(c.Kubeconfig)
		if err != nil {
			return err
		}
		if err := l.beforeControllers(ctx, c, cfg); err != nil {
			return fmt.Errorf("cluster %s: before the controllers: %w", c.Name, err)
		}
	}

	if l.nodes > 0 {
		if err := installKwokExec(ctx, c); err != nil {
			return err
		}
	}
	kwokPorts, err := l.ports.take(1)
	if err != nil {
		return err
	}
	kwokServer := "127.0.0.1:" + strconv.Itoa(kwokPorts[0])
	kwokEnv := append(os.Environ(), "HOME="+c.Dir) // kwok also reads ~/.kwok/kwok.yaml; not the user's
	specs := []procSpec{{
		component: componentController, path: l.path(componentController),
		args: []string{
			"--kubeconfig=" + c.Kubeconfig,
			"--leader-elect=false",
			"--secure-port=0",
			"--controllers=" + strings.Join(controllers, ","),
			"--use-service-account-credentials=false",
			"--service-account-private-key-file=" + files.ServiceAccountKey,
			"--root-ca-file=" + files.CACert,
			"--cluster-name=" + c.Name,
		},
	}, {
		component: componentScheduler, path: l.path(componentScheduler),
		args: []string{
			"--kubeconfig=" + c.Kubeconfig,
			"--leader-elect=false",
			"--secure-port=0",
		},
	}, {
		component: componentKwok, path: l.path(componentKwok), env: kwokEnv,
		args: []string{
			"--kubeconfig=" + c.Kubeconfig,
			"--config=" + stagesPath,
			"--manage-nodes-with-annotation-selector=" + annotationKwokNode + "=" + kwokNodeValue,
			"--node-lease-duration-seconds=40",
			"--cidr=" + plan.fallbackPodCIDR(),
			// kwok's server is the nodes' kubelet endpoint: it runs exec requests for the pods
			// that an Exec object names as local commands (e2e/fluxsim).
			"--server-address=" + kwokServer,
			"--tls-cert-file=" + files.KubeletCert,
			"--tls-private-key-file=" + files.KubeletKey,
			"--enable-crds=Exec,Logs",
		},
	}}
	if l.nodes == 0 {
		specs = specs[:2] // no simulated node, no kwok
	}
	for _, spec := range specs {
		spec.dir, spec.log = c.Dir, logPath(spec.component)
		p, err := startProcess(spec, l.detach)
		if err != nil {
			return err
		}
		if err := env.addProcess(c, p); err != nil {
			return err
		}
	}
	if l.realNodes > 0 {
		if err := l.startRealNodes(ctx, env, c, plan, keys, files, cs); err != nil {
			return err
		}
	}
	if l.nodes == 0 {
		return nil
	}
	if err := createNodes(ctx, cs, c.Name, plan, l.nodes); err != nil {
		return err
	}
	if err := env.update(func() { c.KubeletBackend = kwokServer }); err != nil {
		return err
	}
	return l.serveKubeletEndpoint(c, plan, kwokServer)
}

// kubeletPort is the port of every simulated node's kubelet endpoint (the Node's
// status.daemonEndpoints), where the API server sends exec, attach, logs and port-forward.
const kubeletPort = 10250

// serveKubeletEndpoint forwards the kubelet port of every node of c to kwok's server, which
// listens on 127.0.0.1 only: kwok has one server for all the nodes it simulates, and each node
// has an address of its own. The forwarder lives as long as this process (down or
// ReleaseKubelets ends it): clusters left running with Detach lose their kubelet endpoint, and
// so exec, when the process that started them exits, unless another program serves it
// (Environment.ServeKubelets).
func (l *localProvider) serveKubeletEndpoint(c *Cluster, plan addressPlan, kwokServer string) error {
	f, err := ForwardNodePort(plan.nodeIPs(l.nodes), kubeletPort, kwokServer)
	if err != nil {
		return fmt.Errorf("cluster %s: serving the nodes' kubelet endpoint: %w", c.Name, err)
	}
	c.kubelet = f
	return nil
}

//go:embed kwok-exec-crd.yaml
var kwokExecCRD []byte

//go:embed kwok-logs-crd.yaml
var kwokLogsCRD []byte

// installKwokExec installs kwok's Exec and Logs resources before kwok starts to watch them.
func installKwokExec(ctx context.Context, c *Cluster) error {
	cfg, err := restConfig(c.Kubeconfig)
	if err != nil {
		return err
	}
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, data := range [][]byte{kwokExecCRD, kwokLogsCRD} {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return fmt.Errorf("kwok's resource: %w", err)
		}
		if err := installEstablished(ctx, c, cs, crd); err != nil {
			return err
		}
	}
	return nil
}

// installEstablished creates crd and waits until it is established.
func installEstablished(ctx context.Context, c *Cluster, cs apiextensionsclient.Interface, crd *apiextensionsv1.CustomResourceDefinition) error {
	if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cluster %s: installing kwok's %s resource: %w", c.Name, crd.Spec.Names.Kind, err)
	}
	for {
		got, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster %s: kwok's %s resource is not established: %w", c.Name, crd.Spec.Names.Kind, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (l *localProvider) nodeCount(perCluster int) int { return perCluster + l.realNodes }

// startWithRetry starts a component that listens on n ports and waits until ready says so. When
// the component exits because another program took one of its ports in the meantime, it starts
// it again on new ports.
func (l *localProvider) startWithRetry(ctx context.Context, env *Environment, c *Cluster, n int,
	build func(ports []int) (procSpec, error), ready func(context.Context) (bool, error),
) error {
	for attempt := 1; ; attempt++ {
		ports, err := l.ports.take(n)
		if err != nil {
			return err
		}
		spec, err := build(ports)
		if err != nil {
			return err
		}
		p, err := startProcess(spec, l.detach)
		if err != nil {
			return err
		}
		if err := env.addProcess(c, p); err != nil {
			return err
		}
		err = env.poll(ctx, c, spec.component+" to be ready", spec.component, ready)
		if err == nil {
			return nil
		}
		if !p.exited() || !portTaken(tail(p.Log, tailLines)) || attempt == startAttempts {
			return err
		}
		env.logf("Cluster %s: another program took a port of %s; starting it on new ports", c.Name, spec.component)
		env.dropProcess(c, p)
	}
}

// etcdHealthy asks etcd's /health endpoint.
func etcdHealthy(ctx context.Context, client *http.Client, url string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", http.NoBody)
	if err != nil {
		return false, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return false, err
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
		return false, fmt.Errorf("etcd health: %s %s", resp.Status, body)
	}
	return true, nil
}

// createNodes registers the simulated nodes, which kwok then brings to Ready and keeps there.
func createNodes(ctx context.Context, cs kubernetes.Interface, cluster string, plan addressPlan, count int) error {
	for n := 1; n <= count; n++ {
		node := simulatedNode(cluster, plan, n)
		created, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("creating node %s: %w", node.Name, err)
		}
		// The addresses are what makes nodes of different clusters distinct; make sure they
		// survived creation rather than trust that the API server keeps a new node's status.
		if len(created.Status.Addresses) == 0 {
			created.Status = node.Status
			if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("setting the status of node %s: %w", node.Name, err)
			}
		}
	}
	return nil
}

// simulatedNode is node n (from 1) of a cluster, marked for kwok, with its own InternalIP and pod
// range and room for tens of pods. It carries no taint, so that any pod can land on it.
func simulatedNode(cluster string, plan addressPlan, n int) *corev1.Node {
	name := nodeName(cluster, n)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				corev1.LabelHostname:   name,
				corev1.LabelOSStable:   "linux",
				corev1.LabelArchStable: "amd64",
				"type":                 "kwok",
			},
			Annotations: map[string]string{
				annotationKwokNode: kwokNodeValue,
				// No kubelet watches ConfigMaps and Secrets for these nodes' pods.
				"node.alpha.kubernetes.io/ttl": "0",
			},
		},
		Spec: corev1.NodeSpec{PodCIDR: plan.podCIDR(n), PodCIDRs: []string{plan.podCIDR(n)}},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: plan.nodeIP(n)},
				{Type: corev1.NodeHostName, Address: name},
			},
			Allocatable:     nodeResources.DeepCopy(),
			Capacity:        nodeResources.DeepCopy(),
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: kubeletPort}},
		},
	}
}

// down stops the cluster's processes: the clients of the API server first, all at once, then the
// API server, then etcd, so that none of them spends its grace period retrying a server that went
// away.
func (l *localProvider) down(c *Cluster) error {
	c.closeKubelet()
	var errs []error
	if c.Sandbox != nil {
		// Everything the real nodes started goes at once, daemons included: a kubelet or a
		// containerd given time to stop cleanly would only stop containers that are killed
		// anyway.
		errs = append(errs, c.Sandbox.Remove())
	}
	var clients, servers []*Process
	for _, p := range c.Processes {
		switch p.Component {
		case componentAPIServer:
			servers = append([]*Process{p}, servers...)
		case componentEtcd:
			servers = append(servers, p)
		default:
			clients = append(clients, p)
		}
	}
	stopped := make([]error, len(clients))
	var wg sync.WaitGroup
	for i, p := range clients {
		wg.Go(func() { stopped[i] = p.stop(stopGrace) })
	}
	wg.Wait()
	errs = append(errs, stopped...)
	for _, p := range servers {
		errs = append(errs, p.stop(stopGrace))
	}
	return errors.Join(errs...)
}
