package realflux

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/clusters"
	"github.com/fluxfed/fluxfed/e2e/fluxcore"
)

// Runner runs real Flux behind the simulated pods of one local cluster, as a kubelet and
// kube-proxy would:
//
//   - For every broker pod of a MiniCluster that kwok reports Running, it runs the pod's init
//     containers and then its containers for real, each with the commands the cluster rendered:
//     the provisioner copies the flux view (flux-core, built by e2e/fluxcore, laid out as a view
//     image at /opt/view) and the entrypoint starts a real broker. Each container gets its own
//     host name and mount namespace (sandbox.sh): the pod's volumes at their mount paths, the
//     cluster's /etc/hosts, a termination log. Every broker binds its own loopback address,
//     standing for its pod's address (loopbackOf), as eth0 (the shim of e2e/fluxcore).
//   - When the pod's main container (its default container: the one that runs Flux) ends, the
//     pod ends with its exit code and termination message (clusters.AnnotationExitCode); when
//     the pod is deleted, its containers get SIGTERM and, after the pod's grace period, SIGKILL,
//     and the pod goes with the code they ended with (clusters.AnnotationStopExitCode).
//   - /etc/hosts names the pods of the cluster as the cluster's DNS would (hostname.subdomain.
//     namespace.svc.cluster.local), at their loopback addresses.
//   - A NodePort Service whose selector picks one running pod is forwarded, on every node's
//     address, to that pod's loopback address, as kube-proxy would: the lead broker Service the
//     hub creates reaches the real rank 0.
//   - `kubectl exec` into a running pod runs the command on this machine with FLUX_URI at the
//     pod's broker socket and the real flux first on PATH: the hub's flux commands reach the real
//     instance.
//
// Brokers bind loopback addresses only and dial names that /etc/hosts maps to loopback addresses,
// or node addresses on loopback: nothing leaves the machine. The runner needs root (mount
// namespaces) and a network namespace without an eth0 of its own (e2e/cmd/loopback gives every
// test binary one): there, libzmq finds eth0 through the shim only.
type Runner struct {
	c      *clusters.Cluster
	client client.Client
	opts   Options

	dir, token string
	// ownDir is set when the runner made dir itself, and removes it when it closes.
	ownDir bool
	// The flux-core installation, its cache directory, the shim, the view and the sandbox script.
	prefix, cacheRoot, shim, view, sandbox string
	hostsFile                              string

	mu         sync.Mutex
	endings    []Ending
	pods       map[types.UID]*pod
	nextID     int
	hosts      string
	forwarders map[types.NamespacedName]*forward
	execs      map[types.NamespacedName]bool

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Options configure a Runner.
type Options struct {
	// Dir holds the pods' volumes, roots and logs; it should have a short path, since the brokers'
	// sockets are in it. When "", a directory of its own under the system's temporary directory,
	// which Close removes.
	Dir string
	// Logf reports what happens to pods; silent when nil.
	Logf func(format string, args ...any)
	// Interval is how often the cluster is looked at; 200 ms when 0.
	Interval time.Duration
}

// Ending is how a pod's containers ended, as the runner reported it on the pod.
type Ending struct {
	// Pod is the pod's namespace and name.
	Pod types.NamespacedName
	// Code is its main container's exit code, Message its termination message.
	Code    int
	Message string
	// Stopped is true when the pod was deleted while its containers ran.
	Stopped bool
	// Took is how long the containers ran, from their start to their end.
	Took time.Duration
}

// KillBroker kills the Flux brokers of a pod the runner runs, as a crash would (SIGKILL), and
// returns how many it killed. The container goes on: its entrypoint sees its broker end.
func (r *Runner) KillBroker(name types.NamespacedName) (int, error) {
	p, err := r.podNamed(name)
	if err != nil {
		return 0, err
	}
	killed := 0
	for _, pid := range p.processes() {
		comm, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
		if err == nil && strings.HasPrefix(string(comm), "flux-broker") {
			if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
				killed++
			}
		}
	}
	return killed, nil
}

// podNamed returns the pod of name that the runner runs.
func (r *Runner) podNamed(name types.NamespacedName) (*pod, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pods {
		if p.name == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("the runner does not run pod %s", name)
}

// Flux runs the real flux with args against the broker of a pod the runner runs, as
// `kubectl exec` into the pod does, and returns its standard output.
func (r *Runner) Flux(ctx context.Context, name types.NamespacedName, args ...string) (string, error) {
	p, err := r.podNamed(name)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, fluxcore.Flux(r.prefix), args...)
	cmd.Env = append(os.Environ(), "FLUX_URI=local://"+p.socket())
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), fmt.Errorf("flux %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(exit.Stderr)))
	}
	return string(out), err
}

// Endings returns how the pods the runner ran ended, in the order they did.
func (r *Runner) Endings() []Ending {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.endings)
}

type forward struct {
	backend string
	f       *clusters.Forwarder
}

// Start starts running real Flux behind the pods of c, until Close.
func Start(ctx context.Context, c *clusters.Cluster, opts Options) (*Runner, error) {
	// Asked over netlink, in this process's network namespace (/sys/class/net shows the one
	// sysfs was mounted in).
	if _, err := net.InterfaceByName("eth0"); err == nil {
		return nil, errors.New("real Flux runs where no eth0 exists (e2e/cmd/loopback makes such a network namespace): here libzmq would bind this machine's eth0")
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Interval == 0 {
		opts.Interval = 200 * time.Millisecond
	}
	prefix, err := fluxcore.Prefix()
	if err != nil {
		return nil, err
	}
	shim, err := fluxcore.Shim()
	if err != nil {
		return nil, err
	}
	dir, ownDir := opts.Dir, opts.Dir == ""
	if ownDir {
		if dir, err = os.MkdirTemp("", "ffr"); err != nil {
			return nil, err
		}
	}
	token := make([]byte, 6)
	if _, err := rand.Read(token); err != nil {
		return nil, err
	}
	r := &Runner{c: c, opts: opts, dir: dir, ownDir: ownDir, token: hex.EncodeToString(token), prefix: prefix,
		cacheRoot: filepath.Dir(shim), shim: shim, view: filepath.Join(dir, "view"), sandbox: filepath.Join(dir, "sandbox.sh"),
		hostsFile: filepath.Join(dir, "hosts"), pods: map[types.UID]*pod{}, forwarders: map[types.NamespacedName]*forward{},
		execs: map[types.NamespacedName]bool{}}
	if r.client, err = client.New(c.Config, client.Options{}); err != nil {
		return nil, err
	}
	if err := makeView(prefix, r.view); err != nil {
		return nil, fmt.Errorf("laying out the flux view: %w", err)
	}
	if err := os.WriteFile(r.sandbox, sandboxScript, 0o755); err != nil {
		return nil, err
	}
	if err := r.writeHosts(nil); err != nil {
		return nil, err
	}
	ctx, r.cancel = context.WithCancel(ctx)
	r.wg.Go(func() { r.loop(ctx) })
	return r, nil
}

// Close stops every pod the runner runs (SIGTERM, then SIGKILL after their grace periods), the
// forwarders, and the runner.
func (r *Runner) Close() error {
	r.cancel()
	r.wg.Wait()
	r.mu.Lock()
	pods := slices.Collect(maps.Values(r.pods))
	fwds := slices.Collect(maps.Values(r.forwarders))
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Go(func() {
			p.stop()
			<-p.ended
		})
	}
	wg.Wait()
	var errs []error
	for _, f := range fwds {
		errs = append(errs, f.f.Close())
	}
	if r.ownDir {
		errs = append(errs, os.RemoveAll(r.dir))
	}
	return errors.Join(errs...)
}

func (r *Runner) loop(ctx context.Context) {
	ticker := time.NewTicker(r.opts.Interval)
	defer ticker.Stop()
	for {
		if err := r.sync(ctx); err != nil && ctx.Err() == nil {
			r.opts.Logf("realflux %s: %v", r.c.Name, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// sync brings the real processes, /etc/hosts, the forwarders and the exec rules in line with the
// cluster.
func (r *Runner) sync(ctx context.Context) error {
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.HasLabels{fluxv1alpha2.LabelMiniCluster}); err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	var errs []error
	var live []*corev1.Pod
	for i := range pods.Items {
		pd := &pods.Items[i]
		if !isBroker(pd) {
			continue
		}
		if pd.Status.PodIP != "" && pd.Spec.Hostname != "" {
			live = append(live, pd)
		}
		errs = append(errs, r.syncPod(ctx, pd))
	}
	errs = append(errs, r.writeHosts(live), r.syncForwarders(ctx, pods.Items))
	return errors.Join(errs...)
}

// isBroker reports whether pd runs brokers: a pod of a MiniCluster's broker Job, whose default
// container runs Flux.
func isBroker(pd *corev1.Pod) bool {
	mc := pd.Labels[fluxv1alpha2.LabelMiniCluster]
	return mc != "" && pd.Labels[batchv1.JobNameLabel] == mc && pd.Annotations["kubectl.kubernetes.io/default-container"] != ""
}

// syncPod starts a pod that kwok made Running, and stops one being deleted.
func (r *Runner) syncPod(ctx context.Context, pd *corev1.Pod) error {
	r.mu.Lock()
	p, running := r.pods[pd.UID]
	r.mu.Unlock()
	real := pd.Annotations[clusters.AnnotationRealContainers] != ""
	switch {
	case pd.DeletionTimestamp != nil && running:
		go p.stop()
	case pd.DeletionTimestamp != nil && real && pd.Annotations[clusters.AnnotationStopExitCode] == "":
		// A pod this runner does not run any more (it was started again): nothing of it runs.
		return r.annotate(ctx, pd, map[string]string{clusters.AnnotationStopExitCode: "137"})
	case pd.DeletionTimestamp == nil && !running && pd.Status.Phase == corev1.PodRunning &&
		pd.Annotations[clusters.AnnotationExitCode] == "":
		if real {
			return r.annotate(ctx, pd, map[string]string{clusters.AnnotationExitCode: "137",
				clusters.AnnotationTerminationMessage: "the real-Flux runner that ran this pod is gone"})
		}
		return r.startPod(ctx, pd)
	case running && !r.hasExecRule(client.ObjectKeyFromObject(pd)):
		return r.execRule(ctx, p)
	}
	return nil
}

func (r *Runner) hasExecRule(name types.NamespacedName) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.execs[name]
}

// startPod marks pd as run for real, and runs it.
func (r *Runner) startPod(ctx context.Context, pd *corev1.Pod) error {
	address, err := loopbackOf(pd.Status.PodIP)
	if err != nil {
		return err
	}
	if err := r.annotate(ctx, pd, map[string]string{clusters.AnnotationRealContainers: "true"}); err != nil {
		return err
	}
	r.mu.Lock()
	r.nextID++
	p := &pod{r: r, name: client.ObjectKeyFromObject(pd), uid: pd.UID, id: r.nextID, address: address,
		hostname: pd.Spec.Hostname, spec: *pd.Spec.DeepCopy(), meta: *pd.DeepCopy(),
		main: pd.Annotations["kubectl.kubernetes.io/default-container"], running: map[string]*exec.Cmd{}, ended: make(chan struct{})}
	p.dir = filepath.Join(r.dir, strconv.Itoa(p.id))
	r.pods[pd.UID] = p
	r.mu.Unlock()
	r.opts.Logf("realflux %s: pod %s runs for real at %s (%s)", r.c.Name, p.name, address, p.dir)
	go r.runPod(p)
	return nil
}

// runPod runs p to its end and reports how it ended on the pod, as its kubelet would.
func (r *Runner) runPod(p *pod) {
	ctx := context.Background()
	start := time.Now()
	code, msg := p.run(ctx)
	stopping := p.isStopping()
	r.mu.Lock()
	r.endings = append(r.endings, Ending{Pod: p.name, Code: code, Message: msg, Stopped: stopping, Took: time.Since(start)})
	r.mu.Unlock()
	key := clusters.AnnotationExitCode
	if stopping {
		key = clusters.AnnotationStopExitCode
	}
	r.opts.Logf("realflux %s: pod %s ended with %d (stopped: %v): %s", r.c.Name, p.name, code, stopping, firstLine(msg))
	values := map[string]string{key: strconv.Itoa(code)}
	if msg != "" {
		values[clusters.AnnotationTerminationMessage] = msg
	}
	pd := &corev1.Pod{}
	err := r.client.Get(ctx, p.name, pd)
	if err == nil && pd.UID == p.uid {
		if pd.DeletionTimestamp != nil && key == clusters.AnnotationExitCode {
			// Deleted as it ended by itself: the deletion's stage reports the end.
			delete(values, key)
			values[clusters.AnnotationStopExitCode] = strconv.Itoa(code)
		}
		err = r.annotate(ctx, pd, values)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		r.opts.Logf("realflux %s: reporting the end of pod %s: %v", r.c.Name, p.name, err)
	}
	close(p.ended)
	r.mu.Lock()
	delete(r.pods, p.uid)
	delete(r.execs, p.name)
	r.mu.Unlock()
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// annotate merges values into pd's annotations.
func (r *Runner) annotate(ctx context.Context, pd *corev1.Pod, values map[string]string) error {
	patch := client.MergeFrom(pd.DeepCopy())
	if pd.Annotations == nil {
		pd.Annotations = map[string]string{}
	}
	maps.Copy(pd.Annotations, values)
	if err := r.client.Patch(ctx, pd, patch); err != nil {
		return fmt.Errorf("annotating pod %s/%s: %w", pd.Namespace, pd.Name, err)
	}
	return nil
}

// writeHosts rewrites the cluster's /etc/hosts, in place (the containers bind the file itself),
// when what it names changed.
func (r *Runner) writeHosts(pods []*corev1.Pod) error {
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost\n")
	slices.SortFunc(pods, func(a, c *corev1.Pod) int { return strings.Compare(a.Namespace+"/"+a.Name, c.Namespace+"/"+c.Name) })
	for _, pd := range pods {
		address, err := loopbackOf(pd.Status.PodIP)
		if err != nil {
			continue
		}
		names := []string{pd.Spec.Hostname}
		if pd.Spec.Subdomain != "" {
			fqdn := pd.Spec.Hostname + "." + pd.Spec.Subdomain + "." + pd.Namespace + ".svc"
			names = []string{fqdn + ".cluster.local", fqdn, pd.Spec.Hostname}
		}
		fmt.Fprintf(&b, "%s\t%s\n", address, strings.Join(names, " "))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if b.String() == r.hosts {
		return nil
	}
	f, err := os.OpenFile(r.hostsFile, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(b.String()); err != nil {
		_ = f.Close()
		return err
	}
	r.hosts = b.String()
	return f.Close()
}

// syncForwarders forwards every NodePort Service that selects one pod the runner runs to that
// pod's loopback address, and stops forwarding the others.
func (r *Runner) syncForwarders(ctx context.Context, pods []corev1.Pod) error {
	var services corev1.ServiceList
	if err := r.client.List(ctx, &services); err != nil {
		return fmt.Errorf("listing Services: %w", err)
	}
	want := map[types.NamespacedName]string{}
	wantSvc := map[types.NamespacedName]*corev1.Service{}
	for i := range services.Items {
		svc := &services.Items[i]
		if svc.Spec.Type != corev1.ServiceTypeNodePort || len(svc.Spec.Selector) == 0 || len(svc.Spec.Ports) == 0 || svc.Spec.Ports[0].NodePort == 0 {
			continue
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		var backends []string
		for j := range pods {
			pd := &pods[j]
			r.mu.Lock()
			_, running := r.pods[pd.UID]
			r.mu.Unlock()
			if pd.Namespace != svc.Namespace || !sel.Matches(labels.Set(pd.Labels)) || !running || pd.DeletionTimestamp != nil {
				continue
			}
			address, err := loopbackOf(pd.Status.PodIP)
			if err != nil {
				continue
			}
			port := svc.Spec.Ports[0].TargetPort.IntValue()
			if port == 0 {
				port = int(svc.Spec.Ports[0].Port)
			}
			backends = append(backends, address+":"+strconv.Itoa(port))
		}
		if len(backends) == 1 {
			key := client.ObjectKeyFromObject(svc)
			want[key], wantSvc[key] = backends[0], svc
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for key, fw := range r.forwarders {
		if want[key] != fw.backend {
			errs = append(errs, fw.f.Close())
			delete(r.forwarders, key)
		}
	}
	for key, backend := range want {
		if _, ok := r.forwarders[key]; ok {
			continue
		}
		f, err := r.c.ForwardNodePort(wantSvc[key], backend)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.forwarders[key] = &forward{backend: backend, f: f}
	}
	return errors.Join(errs...)
}

// execRule makes `kubectl exec` into p run on this machine with FLUX_URI at p's broker socket.
func (r *Runner) execRule(ctx context.Context, p *pod) error {
	env := map[string]string{"FLUX_URI": "local://" + p.socket(), "PATH": filepath.Join(r.prefix, "bin") + ":" + defaultPath}
	if err := r.c.ExecLocally(ctx, p.name.Namespace, p.name.Name, "/", env); err != nil {
		return err
	}
	r.mu.Lock()
	r.execs[p.name] = true
	r.mu.Unlock()
	return nil
}
