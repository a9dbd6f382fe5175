// Package fleet runs fluxfed on local clusters the way a user installs it: a hub and members
// from e2e/clusters, fluxfed's manifests applied to each (deploy/hub on the hub,
// deploy/default and deploy/member-access-any on the members), `fluxfed manager --hub` on the hub
// and `fluxfed manager` on every member as processes with the permissions those manifests give
// them, and the members registered on the hub as MemberClusters whose kubeconfigs reach them as
// the ServiceAccount of deploy/member-access. The end-to-end tests and `make demo` use it.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	"github.com/fluxfed/fluxfed/e2e/clusters"
	"github.com/fluxfed/fluxfed/e2e/realflux"
	"github.com/fluxfed/fluxfed/e2e/realpods"
	"github.com/fluxfed/fluxfed/hub/gateway"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

// Names of what the manifests install, and of the hub.
const (
	// Namespace is where fluxfed runs and members are registered.
	Namespace = "fluxfed-system"
	// ManagerServiceAccount is the identity of fluxfed's manager on every cluster.
	ManagerServiceAccount = "fluxfed-manager"
	// HubServiceAccount is the identity of the hub on a member (deploy/member-access).
	HubServiceAccount = "fluxfed-hub"
	// HubName is the hub's identity on the members.
	HubName = "e2e-hub"
)

// Options configure a fleet.
type Options struct {
	// Dir holds the clusters' files and logs, the fluxfed binary and the managers' kubeconfigs.
	Dir string
	// Members names the member clusters; default member-a and member-b. The hub is "hub".
	Members []string
	// NodesPerCluster is the number of simulated nodes of each cluster (default 2).
	NodesPerCluster int
	// Detach lets the fleet outlive this program (make demo KEEP=1).
	Detach bool
	// ManagerArgs are added to every manager's command line.
	ManagerArgs []string
	// Logf reports progress; silent when nil.
	Logf func(format string, args ...any)
	// Unregistered leaves the members as a cluster that only runs fluxfed is: without
	// deploy/member-access-any and not registered on the hub, for tests of the registration.
	Unregistered bool
	// RealFlux runs real Flux behind the broker pods of every cluster (e2e/realflux), instead of
	// the stand-ins StartFlux starts: it needs root, flux-core (make flux-core) and a network
	// namespace without eth0 (e2e/cmd/loopback).
	RealFlux bool
	// RealNodes gives every cluster that many real nodes (clusters.Options.RealNodes), which run
	// the pods for real in the images of e2e/realpods, imported into each node; with
	// NodesPerCluster unset, they are the clusters' only nodes. It needs root, containerd, runc
	// and the CNI plugins (make real-pod-deps) and the images (make real-pod-images). Not with
	// RealFlux, which runs Flux behind simulated pods.
	RealNodes int
}

// LeadProbeInterval is how often the fleet's hub greets a lead broker endpoint that did not
// answer again.
const LeadProbeInterval = 2 * time.Second

// Fleet is a running hub and members with fluxfed installed and running.
type Fleet struct {
	// Env holds the clusters; Env.Kubeconfig has a context per cluster.
	Env *clusters.Environment
	// Hub is the hub cluster; Members the members, in Options.Members order.
	Hub     *clusters.Cluster
	Members []*clusters.Cluster
	// Clients reach every cluster, by name, as an administrator.
	Clients map[string]client.Client
	// Binary is the fluxfed binary the managers run.
	Binary string

	logf func(string, ...any)
	// hubArgs are the hub manager's arguments; hubProcess is the process that runs it.
	hubArgs    []string
	hubProcess *clusters.Process
	// Runners run real Flux behind the pods of each cluster, by cluster name (Options.RealFlux).
	Runners map[string]*realflux.Runner
}

// Start brings the fleet up. On error, what was started is stopped.
func Start(ctx context.Context, opts Options) (f *Fleet, err error) {
	if opts.RealNodes > 0 && opts.RealFlux {
		return nil, errors.New("fleet: RealFlux runs Flux behind simulated pods and RealNodes runs the pods for real, Flux in them: set one of the two")
	}
	if len(opts.Members) == 0 {
		opts.Members = []string{"member-a", "member-b"}
	}
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	binary := filepath.Join(opts.Dir, "fluxfed")
	logf("Building fluxfed")
	if err := BuildFluxfed(binary); err != nil {
		return nil, err
	}

	names := append([]string{"hub"}, opts.Members...)
	logf("Starting %d clusters: %v", len(names), names)
	start := time.Now()
	clusterOpts := clusters.Options{
		Names: names, Dir: opts.Dir, NodesPerCluster: opts.NodesPerCluster, Detach: opts.Detach,
		// The CRD exists before the controllers start, as on a cluster where fluxfed has been
		// installed for a while: the garbage collector knows MiniClusters from the start.
		BeforeControllers: installCRD,
	}
	if opts.RealNodes > 0 {
		clusterOpts.RealNodes, clusterOpts.PauseImage = opts.RealNodes, realpods.PauseImage
		for _, ref := range realpods.Images() {
			archive, err := realpods.Archive(ref)
			if err != nil {
				return nil, err
			}
			clusterOpts.RealNodeImages = append(clusterOpts.RealNodeImages, archive)
		}
	}
	env, err := clusters.Start(ctx, clusterOpts)
	if err != nil {
		return nil, err
	}
	logf("Clusters up in %v", time.Since(start).Round(100*time.Millisecond))
	defer func() {
		if err != nil {
			err = errors.Join(err, env.Stop())
		}
	}()
	if err := env.AddFiles(binary); err != nil {
		return nil, err
	}
	if f, err = attach(env, binary); err != nil {
		return nil, err
	}
	f.logf = logf

	memberDirs := []string{"default", "member-access-any"}
	if opts.Unregistered {
		memberDirs = memberDirs[:1]
	}
	logf("Installing fluxfed: deploy/hub on the hub, %v on the members", memberDirs)
	if err := apply(ctx, f.Clients["hub"], "hub"); err != nil {
		return nil, err
	}
	for _, m := range f.Members {
		for _, dir := range memberDirs {
			if err := apply(ctx, f.Clients[m.Name], dir); err != nil {
				return nil, fmt.Errorf("cluster %s: %w", m.Name, err)
			}
		}
	}

	gatewayAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	if err := serveGatewayAt(ctx, f.Clients["hub"], gatewayAddr); err != nil {
		return nil, err
	}

	logf("Starting the managers: fluxfed manager --hub on the hub, fluxfed manager on the members")
	for _, c := range env.Clusters {
		args := []string{"manager", "--leader-elect=false", "--metrics-bind-address=0"}
		if c.Name == "hub" {
			args = append(args, "--gateway-bind-address="+gatewayAddr)
			// Everything here listens on loopback: the hub may dial nothing else.
			args = append(args, "--hub", "--hub-name="+HubName, "--dial-allow=127.0.0.0/8",
				// The stand-in flux (StartFlux) answers at once: the hub asks it often, so
				// that what Flux sees shows in status within seconds.
				"--flux-interval=1s", "--flux-interval-max=4s",
				// Stand-in brokers come and go with the tests: greet a lead broker that did
				// not answer again soon.
				"--lead-probe-interval="+LeadProbeInterval.String())
		}
		args = append(args, opts.ManagerArgs...)
		p, err := f.runManager(ctx, c, args)
		if err != nil {
			return nil, err
		}
		if c.Name == "hub" {
			f.hubArgs, f.hubProcess = args, p
		}
	}

	if opts.RealFlux {
		logf("Running real Flux behind the broker pods of every cluster")
		f.Runners = map[string]*realflux.Runner{}
		for _, c := range env.Clusters {
			r, err := realflux.Start(ctx, c, realflux.Options{Logf: logf})
			if err != nil {
				return nil, errors.Join(fmt.Errorf("cluster %s: %w", c.Name, err), f.closeRunners())
			}
			f.Runners[c.Name] = r
		}
	}

	if opts.Unregistered {
		return f, nil
	}
	logf("Registering the members on the hub")
	for _, m := range f.Members {
		if err := f.Register(ctx, m); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// attach returns the fleet of the clusters of env, whose managers run binary.
func attach(env *clusters.Environment, binary string) (*Fleet, error) {
	f := &Fleet{Env: env, Hub: env.Cluster("hub"), Clients: map[string]client.Client{}, Binary: binary, logf: func(string, ...any) {}}
	if f.Hub == nil {
		return nil, fmt.Errorf("no cluster named hub in %s", env.Dir)
	}
	scheme, err := testenv.Scheme()
	if err != nil {
		return nil, err
	}
	for _, c := range env.Clusters {
		if c.Config == nil {
			return nil, fmt.Errorf("cluster %s has no kubeconfig at %s", c.Name, c.Kubeconfig)
		}
		if f.Clients[c.Name], err = client.New(c.Config, client.Options{Scheme: scheme}); err != nil {
			return nil, err
		}
		if c.Name != "hub" {
			f.Members = append(f.Members, c)
		}
	}
	return f, nil
}

// Load returns the fleet that Start left running in dir (Options.Detach), for another program to
// work with; its Stop stops the clusters and managers.
func Load(dir string) (*Fleet, error) {
	env, err := clusters.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("the clusters of %s: %w", dir, err)
	}
	return attach(env, filepath.Join(dir, "fluxfed"))
}

// StartT starts a fleet for a test and stops it when the test ends, printing the end of every
// manager's log if the test failed.
func StartT(t testing.TB, opts Options) *Fleet {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	f, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("starting the fleet: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, c := range f.Env.Clusters {
				if data, err := os.ReadFile(filepath.Join(c.Dir, "logs", "fluxfed.log")); err == nil {
					t.Logf("--- fluxfed manager on %s (end of log):\n%s", c.Name, tail(data, 60))
				}
			}
		}
		if err := f.Stop(); err != nil {
			t.Errorf("stopping the fleet: %v", err)
		}
	})
	return f
}

// Stop stops real Flux, the managers and the clusters.
func (f *Fleet) Stop() error { return errors.Join(f.closeRunners(), f.Env.Stop()) }

// closeRunners stops real Flux on every cluster: its brokers end as their pods would.
func (f *Fleet) closeRunners() error {
	var errs []error
	for name, r := range f.Runners {
		errs = append(errs, r.Close())
		delete(f.Runners, name)
	}
	return errors.Join(errs...)
}

// BuildFluxfed builds cmd/fluxfed into path.
func BuildFluxfed(path string) error {
	cmd := exec.Command("go", "build", "-o", path, "./cmd/fluxfed")
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building fluxfed: %w\n%s", err, out)
	}
	return nil
}

// installCRD applies deploy/crd to a cluster.
func installCRD(ctx context.Context, _ *clusters.Cluster, cfg *rest.Config) error {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	if err := apply(ctx, c, "crd"); err != nil {
		return err
	}
	// Served, not only stored: the controllers' first discovery must find it.
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	for {
		if err := c.Get(ctx, client.ObjectKey{Name: "miniclusters.flux-framework.org"}, crd); err != nil {
			return err
		}
		conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, raw := range conditions {
			if cond, ok := raw.(map[string]any); ok && cond["type"] == "Established" && cond["status"] == "True" {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// apply server-side applies deploy/<dir> except its Deployment: the managers run as processes.
func apply(ctx context.Context, c client.Client, dir string) error {
	objs, err := testenv.Kustomize(dir)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			continue
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("fluxfed-e2e"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s of deploy/%s: %w", o.GetKind(), o.GetName(), dir, err)
		}
	}
	return nil
}

// serveGatewayAt points the hub's gateway APIService at addr, where the hub process serves it:
// the Service deploy/hub installs selects the manager's pod, which is a process here, so it
// becomes an ExternalName Service of the address, and the APIService takes its port.
func serveGatewayAt(ctx context.Context, c client.Client, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	portNumber, err := strconv.Atoi(port)
	if err != nil {
		return err
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "fluxfed-gateway"}}
	if err := c.Delete(ctx, svc); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("replacing the gateway's Service: %w", err)
	}
	svc.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: host}
	if err := c.Create(ctx, svc); err != nil {
		return fmt.Errorf("the gateway's Service, as the address %s: %w", host, err)
	}
	apiService := &unstructured.Unstructured{}
	apiService.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"})
	apiService.SetName(gateway.APIServiceName)
	patch := fmt.Sprintf(`{"spec":{"service":{"port":%d}}}`, portNumber)
	if err := c.Patch(ctx, apiService, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return fmt.Errorf("pointing APIService %s at port %d: %w", gateway.APIServiceName, portNumber, err)
	}
	return nil
}

// runManager starts fluxfed's manager on c as a process that impersonates the manager's
// ServiceAccount, so that it has exactly the permissions the manifests give it, and waits until
// it is ready.
func (f *Fleet) runManager(ctx context.Context, c *clusters.Cluster, args []string) (*clusters.Process, error) {
	kc, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		return nil, err
	}
	for _, user := range kc.AuthInfos {
		user.Impersonate = "system:serviceaccount:" + Namespace + ":" + ManagerServiceAccount
	}
	path := filepath.Join(c.Dir, "manager.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return nil, err
	}
	probe, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args = append(args, "--kubeconfig="+path, "--health-probe-bind-address="+probe)
	p, err := f.Env.Run(c, "fluxfed", f.Binary, args...)
	if err != nil {
		return nil, fmt.Errorf("starting fluxfed on %s: %w", c.Name, err)
	}
	deadline := time.Now().Add(managerStartTimeout)
	for {
		resp, err := http.Get("http://" + probe + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		if !p.Running() || time.Now().After(deadline) {
			data, _ := os.ReadFile(p.Log)
			return nil, fmt.Errorf("fluxfed on %s did not become ready (within %v, or it exited); its log ends:\n%s", c.Name, managerStartTimeout, tail(data, 30))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// managerStartTimeout bounds a manager's start: a second or two on a quiet machine, longer on 2
// busy cores.
const managerStartTimeout = 3 * time.Minute

// KillHub kills the hub's manager as SIGKILL does: it has no time to finish a reconcile, write a
// status or forget anything in order.
func (f *Fleet) KillHub() error {
	if f.hubProcess == nil {
		return errors.New("the hub's manager is not running")
	}
	p := f.hubProcess
	f.hubProcess = nil
	return f.Env.Kill(f.Hub, p)
}

// StartHub starts the hub's manager again, as it was started first, and waits until it is ready.
func (f *Fleet) StartHub(ctx context.Context) error {
	if f.hubProcess != nil {
		return errors.New("the hub's manager is running")
	}
	p, err := f.runManager(ctx, f.Hub, f.hubArgs)
	if err != nil {
		return err
	}
	f.hubProcess = p
	return nil
}

// Register registers member m on the hub under m's name: a MemberCluster and its kubeconfig
// Secret, a kubeconfig that reaches the member as the hub's ServiceAccount there, with a token
// from the TokenRequest API, inline as the hub requires.
func (f *Fleet) Register(ctx context.Context, m *clusters.Cluster) error {
	return f.RegisterAs(ctx, m.Name, m)
}

// RegisterAs registers member m on the hub under name (a second name for one cluster is a
// duplicate registration, which the hub refuses to use).
func (f *Fleet) RegisterAs(ctx context.Context, name string, m *clusters.Cluster) error {
	cs, err := kubernetes.NewForConfig(m.Config)
	if err != nil {
		return err
	}
	token, err := cs.CoreV1().ServiceAccounts(Namespace).CreateToken(ctx, HubServiceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("a token for the hub on %s: %w", m.Name, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters[m.Name] = &clientcmdapi.Cluster{Server: m.Config.Host, CertificateAuthorityData: m.Config.CAData}
	kc.AuthInfos[HubServiceAccount] = &clientcmdapi.AuthInfo{Token: token.Status.Token}
	kc.Contexts[m.Name] = &clientcmdapi.Context{Cluster: m.Name, AuthInfo: HubServiceAccount}
	kc.CurrentContext = m.Name
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	return f.RegisterKubeconfig(ctx, name, data)
}

// RegisterKubeconfig registers a member on the hub under name with the given kubeconfig.
func (f *Fleet) RegisterKubeconfig(ctx context.Context, name string, kubeconfig []byte) error {
	secret := corev1ac.Secret(name+"-kubeconfig", Namespace).WithData(map[string][]byte{"kubeconfig": kubeconfig})
	if err := f.Clients["hub"].Apply(ctx, secret, client.FieldOwner("fluxfed-e2e"), client.ForceOwnership); err != nil {
		return fmt.Errorf("the kubeconfig Secret of member %s: %w", name, err)
	}
	mc := &fedv1alpha1.MemberCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: fedv1alpha1.MemberClusterSpec{KubeconfigSecretRef: fedv1alpha1.KubeconfigSecretRef{Name: name + "-kubeconfig"},
			// The fleet's members are lent whole: roots may burst into any namespace, which the
			// hub creates (enforcing the default Pod Security level, baseline).
			Namespaces: fedv1alpha1.MemberNamespaces{Allow: fedv1alpha1.NamespaceAllowAny, Create: true}},
	}
	if err := f.Clients["hub"].Create(ctx, mc); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("the MemberCluster %s: %w", name, err)
	}
	return nil
}

// Config returns the admin config of the named cluster.
func (f *Fleet) Config(name string) *rest.Config { return f.Env.Cluster(name).Config }

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// tail returns the last n lines of data.
func tail(data []byte, n int) string {
	end := len(data)
	if end > 0 && data[end-1] == '\n' {
		end-- // the last newline ends the last line
	}
	lines := 0
	for i := end - 1; i >= 0; i-- {
		if data[i] == '\n' {
			lines++
			if lines == n {
				return string(data[i+1:])
			}
		}
	}
	return string(data)
}
