// Package testenv is test support for the tests of every package: it starts a real
// kube-apiserver and etcd (controller-runtime's envtest) with fluxfed's CRDs installed
// (MiniCluster, and the hub's MemberCluster), for tests that need an API server rather than a
// fake client, and gives them kubeconfigs, a TCP proxy a test can cut, a server that never
// answers and the stacks of the goroutines still running.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/k8sbin"
)

// Env is a running API server with fluxfed's CRDs installed.
type Env struct {
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Client is a controller-runtime client with the Kubernetes and fluxfed types registered.
	Client client.Client
	// Scheme holds the Kubernetes and fluxfed types.
	Scheme *k8sruntime.Scheme

	control *envtest.Environment
}

// RepoRoot returns the root of the fluxfed source tree, found from this file's location so that
// tests work from any package directory.
func RepoRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("testenv: cannot locate the source tree")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Scheme returns a scheme with the Kubernetes built-in types and fluxfed's API.
func Scheme() (*k8sruntime.Scheme, error) {
	s := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := fluxv1alpha2.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := fedv1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// Start starts an API server for the test and stops it when the test ends. It fails the test,
// saying how to build the binaries, when kube-apiserver or etcd cannot be found.
func Start(t testing.TB) *Env {
	t.Helper()
	return StartN(t, 1)[0]
}

// StartN starts n API servers at once (each takes seconds, mostly waiting) and stops them when
// the test ends.
func StartN(t testing.TB, n int) []*Env {
	t.Helper()
	envs := make([]*Env, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { envs[i], errs[i] = start() })
	}
	wg.Wait()
	for _, e := range envs {
		if e != nil {
			t.Cleanup(func() {
				if err := e.control.Stop(); err != nil {
					t.Errorf("stopping the API server: %v", err)
				}
			})
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return envs
}

// Timeouts of the API servers the tests start. A quiet machine starts etcd and kube-apiserver in
// seconds; one whose 2 cores run other test binaries, API servers and compilers at once can take
// a minute (envtest's default of 20 s failed `make test` there). A hung start still ends, within
// the package's go test -timeout.
const (
	// StartTimeout bounds each start of etcd, and of kube-apiserver until it reports healthy.
	StartTimeout = 3 * time.Minute
	// StopTimeout bounds each one's exit after SIGTERM.
	StopTimeout = time.Minute
	// CRDTimeout bounds the wait for fluxfed's CRDs to be served.
	CRDTimeout = 2 * time.Minute
)

// outputTail is how much of etcd's and kube-apiserver's output is kept, and outputLines how many
// of its last lines a failed start quotes.
const (
	outputTail  = 64 << 10
	outputLines = 8
)

// start starts one API server with fluxfed's CRDs installed.
func start() (*Env, error) { return startWith(nil) }

// startWith starts one API server with fluxfed's CRDs installed and the extra kube-apiserver
// flags of apiServerFlags. When it fails, the error quotes the end of etcd's and
// kube-apiserver's output.
func startWith(apiServerFlags map[string]string) (*Env, error) {
	dir, err := k8sbin.Dir("kube-apiserver", "etcd")
	if err != nil {
		return nil, err
	}
	scheme, err := Scheme()
	if err != nil {
		return nil, fmt.Errorf("building the scheme: %w", err)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: dir,
		CRDDirectoryPaths: []string{
			filepath.Join(RepoRoot(), "deploy", "crd"),
			filepath.Join(RepoRoot(), "deploy", "hub", "fluxfed.io_memberclusters.yaml"),
		},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		env.ControlPlaneStartTimeout = StartTimeout
	}
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_STOP_TIMEOUT") == "" {
		env.ControlPlaneStopTimeout = StopTimeout
	}
	env.CRDInstallOptions.MaxTime = CRDTimeout
	etcdOut, apiServerOut := &tailBuffer{max: outputTail}, &tailBuffer{max: outputTail}
	env.ControlPlane.Etcd = &envtest.Etcd{Out: etcdOut, Err: etcdOut}
	apiServer := env.ControlPlane.GetAPIServer()
	apiServer.Out, apiServer.Err = apiServerOut, apiServerOut
	// Without it kube-apiserver picks the address of the default route's interface, and fails
	// where there is none: in the loopback-only network namespace `make test` runs tests in.
	apiServer.Configure().Set("advertise-address", "127.0.0.1")
	for name, value := range apiServerFlags {
		apiServer.Configure().Set(name, value)
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting etcd and kube-apiserver from %s (each may take %v to start): %w\n"+
			"etcd's output ends:\n%s\nkube-apiserver's output ends:\n%s\n"+
			"On a busy machine, raise the limit with KUBEBUILDER_CONTROLPLANE_START_TIMEOUT (e.g. 10m)",
			dir, env.ControlPlaneStartTimeout, err, etcdOut.String(), apiServerOut.String())
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("building a client: %w", err), env.Stop())
	}
	return &Env{Config: cfg, Client: c, Scheme: scheme, control: env}, nil
}

// AddUser provisions a user of the API server, authenticated by a client certificate, in the
// given groups (none: a user without any permission), and returns its config.
func (e *Env) AddUser(name string, groups ...string) (*rest.Config, error) {
	user, err := e.control.ControlPlane.AddUser(envtest.User{Name: name, Groups: groups}, rest.CopyConfig(e.Config))
	if err != nil {
		return nil, err
	}
	return user.Config(), nil
}

// Kubeconfig returns a kubeconfig that reaches the API server as an administrator, with the
// credentials inline, as fluxfed expects a member's kubeconfig to be.
func (e *Env) Kubeconfig() ([]byte, error) {
	return Kubeconfig(e.Config)
}

// Kubeconfig returns a kubeconfig with cfg's server and credentials inline.
func Kubeconfig(cfg *rest.Config) ([]byte, error) {
	const name = "envtest"
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
	}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	return clientcmd.Write(*kc)
}

// RunControllers runs kube-controller-manager against the API server with only the named
// controllers (for example "garbagecollector", which envtest lacks, so that deleting an owner
// deletes what it owns). It stops when the test ends; its log is kept in the test's temp dir and
// printed if the test fails.
func (e *Env) RunControllers(t testing.TB, controllers ...string) {
	t.Helper()
	dir, err := k8sbin.Dir("kube-controller-manager")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := e.Kubeconfig()
	if err != nil {
		t.Fatalf("writing a kubeconfig: %v", err)
	}
	tmp := t.TempDir()
	kubeconfigPath := filepath.Join(tmp, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(tmp, "kube-controller-manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, "kube-controller-manager"),
		"--kubeconfig="+kubeconfigPath,
		"--authentication-kubeconfig="+kubeconfigPath,
		"--authorization-kubeconfig="+kubeconfigPath,
		"--controllers="+strings.Join(controllers, ","),
		"--leader-elect=false",
		"--secure-port=0",
		"--concurrent-gc-syncs=5",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting kube-controller-manager: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logFile.Close()
		if t.Failed() {
			if data, err := os.ReadFile(logPath); err == nil {
				t.Logf("kube-controller-manager log:\n%s", data)
			}
		}
	})
}

// tailBuffer keeps the last max bytes written to it; etcd and kube-apiserver write to it from the
// goroutines that copy their output.
type tailBuffer struct {
	max  int
	mu   sync.Mutex
	data []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.data = append(b.data, p...)
	if over := len(b.data) - b.max; over > 0 {
		b.data = append(b.data[:0], b.data[over:]...)
	}
	return len(p), nil
}

// String returns the last lines it kept, indented, or says there was nothing.
func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	text := strings.TrimRight(string(b.data), "\n")
	if text == "" {
		return "  (nothing)"
	}
	lines := strings.Split(text, "\n")
	return "  " + strings.Join(lines[max(0, len(lines)-outputLines):], "\n  ")
}
