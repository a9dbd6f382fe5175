// Package clusters brings up several Kubernetes clusters on one machine for fluxfed's end-to-end
// tests and demos.
//
// The local provider (the default) runs each cluster as plain processes: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok, found through e2e/k8sbin. kwok simulates the
// nodes (NodesPerCluster per cluster, with loopback addresses that differ across clusters) and
// the pods on them: a scheduled pod becomes Running and Ready and stays so until a test sets
// AnnotationExitCode on it. No container runs and no Docker engine is needed. No kube-proxy runs
// either: a Forwarder serves a NodePort on the nodes' addresses where a test needs one.
//
// A local cluster can also run real nodes (Options.RealNodes), beside or instead of kwok's: one
// containerd and one kubelet each, whose pods run for real on bridges in a network namespace of
// the cluster's own with no way off the machine, with a CoreDNS per cluster (realnode.go,
// e2e/realnode).
//
// The kind provider (FLUXFED_E2E_PROVIDER=kind) runs the same Environment on kind clusters instead,
// for machines with a Docker engine.
//
// Either way every cluster gets a kubeconfig of its own, with the CA and an administrator's
// client certificate inline, and the run directory gets a merged kubeconfig with one context per
// cluster, named after it. A state file in the run directory records what was started, so that a
// later program (`go run ./e2e/clusters/cmd/clusters down`) can stop clusters that outlived the
// program that started them.
package clusters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fluxfed/fluxfed/e2e/realnode"
)

// EnvProvider names the environment variable that chooses the provider when Options.Provider is
// empty: ProviderLocal (the default) or ProviderKind.
const EnvProvider = "FLUXFED_E2E_PROVIDER"

// The providers.
const (
	// ProviderLocal runs each cluster as local processes with kwok's simulated nodes.
	ProviderLocal = "local"
	// ProviderKind runs each cluster with kind, which needs a Docker engine and the kind CLI.
	ProviderKind = "kind"
)

// Defaults of Options.
const (
	DefaultNodesPerCluster = 2
	// DefaultTimeout is generous: three clusters come up in seconds on a quiet machine, and can
	// take minutes on 2 cores busy with other test binaries, compilers and API servers.
	DefaultTimeout = 6 * time.Minute
)

// StateFile is the name of the file in the run directory that records the Environment.
const StateFile = "state.json"

// Options say which clusters to bring up, and how.
type Options struct {
	// Names of the clusters, each a DNS label. When empty, Count clusters are named by
	// DefaultNames.
	Names []string
	// Count of clusters when Names is empty; 0 means 3.
	Count int
	// Dir is the run directory: kubeconfigs, the state file, and per cluster its data, key
	// material and logs (<Dir>/<cluster>/logs/<component>.log). Required; StartT defaults it to a
	// temporary directory.
	Dir string
	// NodesPerCluster is the number of simulated nodes (kind: worker nodes) per cluster; 0 means
	// DefaultNodesPerCluster, or none when RealNodes asks for real ones.
	NodesPerCluster int
	// RealNodes is the number of real nodes per local cluster, beside the simulated ones: each a
	// containerd and a kubelet that run the pods' containers for real, on a pod network of bridges
	// in a network namespace of the cluster's own, with a CoreDNS per cluster as the pods' DNS
	// (see realnode.go and e2e/realnode). They carry LabelRealNode. They need root, containerd,
	// runc, the CNI plugins, and the kubelet and CoreDNS of e2e/k8sbin.
	RealNodes int
	// RealNodeImages are image archives (docker-archive or OCI tarballs) imported into every real
	// node before its kubelet starts: the pause image and every image the pods use, under the
	// names the pods give. Nothing is pulled.
	RealNodeImages []string
	// PauseImage is the reference of the pods' sandbox image, one of RealNodeImages; required
	// with RealNodes.
	PauseImage string
	// Provider is ProviderLocal or ProviderKind; empty means $FLUXFED_E2E_PROVIDER, else local.
	Provider string
	// Detach lets the clusters outlive this program; they are stopped by Stop on an Environment
	// that Load returns. Without it, the kernel kills the local processes if this program dies.
	Detach bool
	// Timeout bounds the bring-up of all the clusters; 0 means DefaultTimeout.
	Timeout time.Duration
	// Logf, when set, receives progress messages.
	Logf func(format string, args ...any)
	// BeforeControllers, when set, runs for each cluster once its API server answers and before
	// its controllers start (local clusters): the place to install CustomResourceDefinitions,
	// so that the garbage collector knows them from its start rather than from its next
	// discovery, half a minute later. On kind clusters it runs once the cluster is up.
	BeforeControllers func(ctx context.Context, c *Cluster, cfg *rest.Config) error
}

// Environment is a set of running clusters.
type Environment struct {
	// Provider is the provider that brought the clusters up.
	Provider string `json:"provider"`
	// Dir is the run directory.
	Dir string `json:"dir"`
	// Kubeconfig is the path of the merged kubeconfig: one context per cluster, named after the
	// cluster, the first cluster's current.
	Kubeconfig string `json:"kubeconfig"`
	// Clusters in the order of Options.Names.
	Clusters []*Cluster `json:"clusters"`
	// Files are what programs working with the clusters added to the run directory (binaries,
	// stand-ins' state), recorded with AddFiles; RemoveFiles removes them with the rest.
	Files []string `json:"files,omitempty"`

	mu      sync.Mutex // guards what bring-up records in the clusters, and the state file
	stopped bool
	detach  bool
	logf    func(format string, args ...any)
}

// Cluster is one running cluster.
type Cluster struct {
	// Name of the cluster, also the name of its context, cluster and user in the kubeconfigs.
	Name string `json:"name"`
	// Dir holds the cluster's files.
	Dir string `json:"dir"`
	// Kubeconfig is the path of the cluster's own kubeconfig, which the hub accepts as a member's.
	Kubeconfig string `json:"kubeconfig"`
	// Config reaches the API server as an administrator.
	Config *rest.Config `json:"-"`
	// NodeAddresses are the InternalIP addresses of the cluster's nodes, in node name order.
	NodeAddresses []string `json:"nodeAddresses,omitempty"`
	// Processes of a local cluster, in the order they were started.
	Processes []*Process `json:"processes,omitempty"`
	// KindName is the name of a kind cluster, unique on the Docker host.
	KindName string `json:"kindName,omitempty"`
	// KubeletBackend is kwok's server, where the kubelet port of every node of a local cluster
	// is forwarded to while a program serves it (Start, then ServeKubelets).
	KubeletBackend string `json:"kubeletBackend,omitempty"`

	// index orders the clusters and picks their address ranges.
	index int
	// kubelet serves the nodes' kubelet endpoint of a local cluster while this process runs.
	kubelet *Forwarder

	// Sandbox holds the network namespace and the cgroup of the cluster's real nodes.
	Sandbox *realnode.Sandbox `json:"sandbox,omitempty"`
	// RealNodes are the names of the cluster's real nodes, which are also their addresses.
	RealNodes []string `json:"realNodes,omitempty"`
	// realProxies carry the real nodes' connections to the API server and the API server's to
	// their kubelets, while this process runs.
	realProxies []*Forwarder
}

// closeKubelet stops serving the nodes' kubelet endpoint, if this process serves it.
func (c *Cluster) closeKubelet() {
	if c.kubelet != nil {
		_ = c.kubelet.Close() // its connections end with it, which is the point
		c.kubelet = nil
	}
	for _, f := range c.realProxies {
		_ = f.Close() // likewise
	}
	c.realProxies = nil
}

// ReleaseKubelets stops serving the nodes' kubelet endpoint of every local cluster in this
// program, so that another program can take it over with ServeKubelets: the endpoint, and with
// it exec into pods, lives only as long as the program that serves it.
func (env *Environment) ReleaseKubelets() {
	env.mu.Lock()
	defer env.mu.Unlock()
	for _, c := range env.Clusters {
		c.closeKubelet()
	}
}

// ServeKubelets serves the nodes' kubelet endpoint of every local cluster from this program, for
// clusters that outlived the program that started them (Options.Detach, then Load), until Stop
// or ReleaseKubelets.
func (env *Environment) ServeKubelets() error {
	env.mu.Lock()
	defer env.mu.Unlock()
	for _, c := range env.Clusters {
		if c.Sandbox != nil && c.realProxies == nil {
			if err := c.serveRealNodes(); err != nil {
				return err
			}
		}
		if c.kubelet != nil || c.KubeletBackend == "" {
			continue
		}
		simulated := slices.DeleteFunc(slices.Clone(c.NodeAddresses), func(a string) bool { return slices.Contains(c.RealNodes, a) })
		f, err := ForwardNodePort(simulated, kubeletPort, c.KubeletBackend)
		if err != nil {
			return fmt.Errorf("cluster %s: serving the nodes' kubelet endpoint: %w", c.Name, err)
		}
		c.kubelet = f
	}
	return nil
}

// AddFiles records paths (files or directories) that a program put in the run directory for
// these clusters, so that RemoveFiles, and `clusters down`, remove them too.
func (env *Environment) AddFiles(paths ...string) error {
	return env.update(func() {
		for _, p := range paths {
			if !slices.Contains(env.Files, p) {
				env.Files = append(env.Files, p)
			}
		}
	})
}

// provider brings a cluster up to the point where its kubeconfig reaches a serving API server, and
// tears it down; the rest (waiting until it is usable, merging kubeconfigs) is shared.
type provider interface {
	// prepare checks that the provider can bring clusters up as opts say, before anything starts.
	prepare(opts Options) error
	// up starts c and writes c.Kubeconfig. It records what it starts in c as it goes (through
	// env.addProcess) so that a failure half-way can be cleaned up.
	up(ctx context.Context, env *Environment, c *Cluster) error
	// down stops c; it must work on a Cluster loaded from the state file.
	down(c *Cluster) error
	// nodeCount is how many nodes a cluster has when asked for perCluster.
	nodeCount(perCluster int) int
}

// DefaultNames returns n cluster names: hub, member-a, member-b, ... (member-<n> past member-z).
func DefaultNames(n int) []string {
	names := make([]string, 0, n)
	if n > 0 {
		names = append(names, "hub")
	}
	for i := 1; i < n; i++ {
		if i <= 26 {
			names = append(names, "member-"+string(rune('a'+i-1)))
		} else {
			names = append(names, fmt.Sprintf("member-%d", i))
		}
	}
	return names
}

// maxClusters and maxNodes keep every cluster's and node's addresses inside the cluster's own
// /16 of 127/8 and of 10/8, and node numbers below the fallback pod range (see
// addressPlan).
const (
	maxClusters = 150
	maxNodes    = 200
)

func (o *Options) complete() error {
	if len(o.Names) == 0 {
		if o.Count == 0 {
			o.Count = 3
		}
		o.Names = DefaultNames(o.Count)
	}
	if len(o.Names) > maxClusters {
		return fmt.Errorf("%d clusters asked for; at most %d", len(o.Names), maxClusters)
	}
	seen := map[string]bool{}
	for _, name := range o.Names {
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			return fmt.Errorf("cluster name %q: %v", name, errs)
		}
		if seen[name] {
			return fmt.Errorf("cluster name %q appears twice", name)
		}
		seen[name] = true
	}
	if o.NodesPerCluster == 0 && o.RealNodes == 0 {
		o.NodesPerCluster = DefaultNodesPerCluster
	}
	if o.NodesPerCluster < 0 || o.RealNodes < 0 || o.NodesPerCluster+o.RealNodes < 1 || o.NodesPerCluster+o.RealNodes > maxNodes {
		return fmt.Errorf("%d nodes per cluster asked for (%d simulated, %d real); between 1 and %d", o.NodesPerCluster+o.RealNodes, o.NodesPerCluster, o.RealNodes, maxNodes)
	}
	if o.Provider == "" {
		o.Provider = os.Getenv(EnvProvider)
	}
	if o.Provider == "" {
		o.Provider = ProviderLocal
	}
	if o.Provider != ProviderLocal && o.Provider != ProviderKind {
		return fmt.Errorf("provider %q: want %q or %q (from %s or Options.Provider)", o.Provider, ProviderLocal, ProviderKind, EnvProvider)
	}
	if o.RealNodes > 0 && o.Provider != ProviderLocal {
		return fmt.Errorf("real nodes (Options.RealNodes) are for the %s provider; %s clusters' nodes are real already", ProviderLocal, o.Provider)
	}
	if o.RealNodes > 0 && o.PauseImage == "" {
		return errors.New("real nodes need a pause image: set Options.PauseImage to its reference, and put its archive in Options.RealNodeImages")
	}
	if o.Dir == "" {
		return errors.New("no run directory (Options.Dir)")
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return fmt.Errorf("run directory: %w", err)
	}
	o.Dir = dir
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return nil
}

// newProvider returns an unprepared provider, which can stop clusters but not start them.
func newProvider(name string) (provider, error) {
	switch name {
	case ProviderLocal:
		return &localProvider{}, nil
	case ProviderKind:
		return &kindProvider{}, nil
	}
	return nil, fmt.Errorf("unknown provider %q", name)
}

// Start brings up the clusters in parallel and returns once every one serves its API, has the
// default ServiceAccount in namespace default (so pods can be created) and all its nodes Ready.
// On failure it stops whatever it started and returns an error that quotes the end of the log
// of a component that exited. Call Stop when done.
func Start(ctx context.Context, opts Options) (*Environment, error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	if err := prepareDir(opts.Dir, opts.Names); err != nil {
		return nil, err
	}
	prov, err := newProvider(opts.Provider)
	if err != nil {
		return nil, err
	}
	if err := prov.prepare(opts); err != nil {
		return nil, err
	}
	env := &Environment{
		Provider:   opts.Provider,
		Dir:        opts.Dir,
		Kubeconfig: filepath.Join(opts.Dir, "kubeconfig"),
		logf:       opts.Logf,
		detach:     opts.Detach,
	}
	for i, name := range opts.Names {
		dir := filepath.Join(opts.Dir, name)
		env.Clusters = append(env.Clusters, &Cluster{Name: name, Dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig"), index: i})
	}
	if err := env.save(); err != nil {
		return nil, err
	}

	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	start := time.Now()
	errs := make([]error, len(env.Clusters))
	var wg sync.WaitGroup
	for i, c := range env.Clusters {
		wg.Go(func() {
			if err := env.bringUp(ctx, prov, c, opts.NodesPerCluster); err != nil {
				errs[i] = fmt.Errorf("cluster %s: %w", c.Name, err)
				cancel() // the others need not finish
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		// The clusters cancelled by the failure only repeat the context's error.
		var first []error
		for _, e := range errs {
			if e != nil && !errors.Is(e, context.Canceled) {
				first = append(first, e)
			}
		}
		if len(first) > 0 {
			err = errors.Join(first...)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w\nthe clusters did not come up within %v; on a busy machine give them longer (Options.Timeout, or clusters up -timeout)", err, opts.Timeout)
		}
		if stopErr := env.stop(prov); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stopping after the failure: %w", stopErr))
		}
		return nil, err
	}
	if err := env.writeMergedKubeconfig(); err != nil {
		return nil, errors.Join(err, env.stop(prov))
	}
	if err := env.save(); err != nil {
		return nil, errors.Join(err, env.stop(prov))
	}
	env.logf("%d clusters up in %s; kubeconfig %s", len(env.Clusters), time.Since(start).Round(100*time.Millisecond), env.Kubeconfig)
	return env, nil
}

// prepareDir creates the run directory and refuses one in use by clusters that are still running
// or holding the data of earlier clusters with the same names.
func prepareDir(dir string, names []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating the run directory: %w", err)
	}
	if old, err := Load(dir); err == nil && old.Running() {
		return fmt.Errorf("%s holds running clusters; stop them first (go run ./e2e/clusters/cmd/clusters down -dir %s)", dir, dir)
	}
	for _, name := range names {
		entries, err := os.ReadDir(filepath.Join(dir, name))
		if err == nil && len(entries) > 0 {
			return fmt.Errorf("%s is left from an earlier run; remove it (or run `clusters down -dir %s`)", filepath.Join(dir, name), dir)
		}
	}
	return nil
}

// bringUp starts one cluster and waits until it is usable.
func (env *Environment) bringUp(ctx context.Context, prov provider, c *Cluster, nodes int) error {
	start := time.Now()
	env.logf("Starting cluster %s", c.Name)
	if err := os.MkdirAll(filepath.Join(c.Dir, "logs"), 0o755); err != nil {
		return err
	}
	if err := prov.up(ctx, env, c); err != nil {
		return err
	}
	if err := env.waitUsable(ctx, c, prov.nodeCount(nodes)); err != nil {
		return err
	}
	env.logf("Cluster %s is up in %s at %s (nodes %v)", c.Name, time.Since(start).Round(100*time.Millisecond), c.Config.Host, c.NodeAddresses)
	return nil
}

// Cluster returns the cluster named name, or nil.
func (env *Environment) Cluster(name string) *Cluster {
	for _, c := range env.Clusters {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Running reports whether any process of the Environment still runs (always false for kind,
// whose clusters this package cannot see without Docker).
func (env *Environment) Running() bool {
	env.mu.Lock()
	defer env.mu.Unlock()
	for _, c := range env.Clusters {
		for _, p := range c.Processes {
			if p.Running() && p.ours() {
				return true
			}
		}
	}
	return false
}

// Stop stops every cluster: each local process by its PID, with its process group; each kind
// cluster with kind. The files stay for diagnosis (the state file then records stopped
// processes); RemoveFiles removes them. Stop may be called more than once.
func (env *Environment) Stop() error {
	prov, err := newProvider(env.Provider)
	if err != nil {
		return err
	}
	return env.stop(prov)
}

func (env *Environment) stop(prov provider) error {
	env.mu.Lock()
	if env.stopped {
		env.mu.Unlock()
		return nil
	}
	env.stopped = true
	env.mu.Unlock()

	errs := make([]error, len(env.Clusters))
	var wg sync.WaitGroup
	for i, c := range env.Clusters {
		wg.Go(func() {
			if err := prov.down(c); err != nil {
				errs[i] = fmt.Errorf("stopping cluster %s: %w", c.Name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// RemoveFiles removes what Start wrote in the run directory (each cluster's directory, the merged
// kubeconfig, the state file), what AddFiles recorded, and the directory itself if nothing else
// is left in it. Call it after Stop.
func (env *Environment) RemoveFiles() error {
	var errs []error
	for _, c := range env.Clusters {
		errs = append(errs, os.RemoveAll(c.Dir))
	}
	for _, f := range env.Files {
		errs = append(errs, os.RemoveAll(f))
	}
	for _, f := range []string{env.Kubeconfig, filepath.Join(env.Dir, StateFile)} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if entries, err := os.ReadDir(env.Dir); err == nil && len(entries) == 0 {
		errs = append(errs, os.Remove(env.Dir))
	}
	return errors.Join(errs...)
}

// Load returns the Environment recorded in the state file of the run directory dir, with a
// rest.Config for every cluster whose kubeconfig exists. Its Stop stops the clusters even when
// another program started them.
func Load(dir string) (*Environment, error) {
	path := filepath.Join(dir, StateFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	env := &Environment{logf: func(string, ...any) {}}
	if err := json.Unmarshal(data, env); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	for i, c := range env.Clusters {
		c.index = i
		if cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err == nil {
			guard(cfg)
			c.Config = cfg
		}
	}
	return env, nil
}

// save writes the state file, atomically so that a reader never sees half of it.
func (env *Environment) save() error {
	env.mu.Lock()
	defer env.mu.Unlock()
	return env.saveLocked()
}

func (env *Environment) saveLocked() error {
	data, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the state: %w", err)
	}
	path := filepath.Join(env.Dir, StateFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing the state: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing the state: %w", err)
	}
	return nil
}

// update changes the Environment under its lock and writes the state file.
func (env *Environment) update(change func()) error {
	env.mu.Lock()
	defer env.mu.Unlock()
	change()
	return env.saveLocked()
}

// Run starts a program that works against cluster c, for example a fluxfed manager, as one of
// the cluster's processes: its output goes to the cluster's logs/<component>.log, it is
// recorded in the state file, and it is stopped with the cluster, before its API server, by
// Stop or by `clusters down`. It outlives this program if the clusters do (Options.Detach).
func (env *Environment) Run(c *Cluster, component, path string, args ...string) (*Process, error) {
	spec := procSpec{component: component, path: path, args: args, log: filepath.Join(c.Dir, "logs", component+".log")}
	if err := os.MkdirAll(filepath.Dir(spec.log), 0o755); err != nil {
		return nil, err
	}
	p, err := startProcess(spec, env.detach)
	if err != nil {
		return nil, err
	}
	if err := env.addProcess(c, p); err != nil {
		_ = p.stop(stopGrace)
		return nil, err
	}
	return p, nil
}

// Kill ends a process that Run started as SIGKILL does, with no time to clean up (its process
// group too), waits until it is gone, and forgets it.
func (env *Environment) Kill(c *Cluster, p *Process) error {
	if err := p.kill(); err != nil {
		return err
	}
	env.dropProcess(c, p)
	return nil
}

// addProcess records a process of c in the state file as soon as it started.
func (env *Environment) addProcess(c *Cluster, p *Process) error {
	env.mu.Lock()
	defer env.mu.Unlock()
	c.Processes = append(c.Processes, p)
	return env.saveLocked()
}

// dropProcess forgets a process that exited before it was ready and is being replaced.
func (env *Environment) dropProcess(c *Cluster, p *Process) {
	env.mu.Lock()
	defer env.mu.Unlock()
	c.Processes = slices.DeleteFunc(c.Processes, func(q *Process) bool { return q == p })
	_ = env.saveLocked() // the process is gone; a stale entry is harmless
}

// exited returns an error for the first process of c that is no longer running.
func (env *Environment) exited(c *Cluster) error {
	env.mu.Lock()
	defer env.mu.Unlock()
	for _, p := range c.Processes {
		if p.exited() {
			return exitError(p)
		}
	}
	return nil
}

// writeMergedKubeconfig writes the kubeconfig with a context per cluster.
func (env *Environment) writeMergedKubeconfig() error {
	var kcs []namedKubeconfig
	for _, c := range env.Clusters {
		kc, err := clientcmd.LoadFromFile(c.Kubeconfig)
		if err != nil {
			return fmt.Errorf("reading the kubeconfig of %s: %w", c.Name, err)
		}
		kcs = append(kcs, namedKubeconfig{Name: c.Name, Config: kc})
	}
	merged, err := merge(kcs)
	if err != nil {
		return err
	}
	return writeKubeconfig(env.Kubeconfig, merged)
}

// StartT starts clusters for a test and stops them when the test ends. Dir defaults to a
// temporary directory and Logf to t.Logf. When the test failed, every component's log is kept
// (see KeepForDiagnosis) and the end of the log of each component that exited is logged.
func StartT(t testing.TB, opts Options) *Environment {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	env, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("starting clusters: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			env.keepLogs(t)
		}
		if err := env.Stop(); err != nil {
			t.Errorf("stopping clusters: %v", err)
		}
	})
	return env
}

// keepLogs keeps the log of every component of a failed test where the test's temporary
// directory does not remove it, and logs where, with the end of the log of each component that
// exited: a running component's log is read there, so that its chatter does not bury the test's
// own failure at the end of the output.
func (env *Environment) keepLogs(t testing.TB) {
	t.Helper()
	env.mu.Lock()
	defer env.mu.Unlock()
	dir, err := KeepForDiagnosis(t)
	if err != nil {
		t.Logf("cannot keep the clusters' logs: %v", err)
	}
	for _, c := range env.Clusters {
		for _, p := range c.Processes {
			if dir != "" {
				if err := copyFile(p.Log, filepath.Join(dir, c.Name, p.Component+".log")); err != nil {
					t.Logf("cannot keep the log of %s in cluster %s: %v", p.Component, c.Name, err)
				}
			}
			if !p.Running() {
				t.Logf("cluster %s, %s exited (%s):\n%s", c.Name, p.Component, p.Log, tail(p.Log, 10))
			}
		}
	}
	if dir != "" {
		t.Logf("the clusters' logs are kept in %s", dir)
	}
}

// KeepForDiagnosis returns a new directory, named for the test and the time, under
// $FLUXFED_FAILED_DIR or else <temporary directory>/fluxfed-failed, for what a failed test keeps
// to be read after it: what t.TempDir holds is removed when the test ends.
func KeepForDiagnosis(t testing.TB) (string, error) {
	root := os.Getenv("FLUXFED_FAILED_DIR")
	if root == "" {
		root = filepath.Join(os.TempDir(), "fluxfed-failed")
	}
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == os.PathSeparator || r == ' ' {
			return '_'
		}
		return r
	}, t.Name())
	dir := filepath.Join(root, name+"-"+time.Now().UTC().Format("20060102T150405"))
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	return os.MkdirTemp(root, filepath.Base(dir)+"-")
}

// copyFile copies the file from to the path to, making its directory.
func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o644)
}
