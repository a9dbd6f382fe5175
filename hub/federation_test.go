package hub_test

// The hub against real API servers: one hub and members in one test process, each an envtest
// API server; the members registered as MemberClusters whose kubeconfig Secrets are written from
// their rest.Config. The MiniCluster reconciler runs on every cluster, as `fluxfed manager` would.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/e2e/netguard"
	"github.com/fluxfed/fluxfed/hub"
	"github.com/fluxfed/fluxfed/hub/members"
	"github.com/fluxfed/fluxfed/internal/testenv"
	"github.com/fluxfed/fluxfed/member"
)

const (
	hubName          = "hub-test"
	membersNamespace = "fluxfed-system"
	wait             = 30 * time.Second
	tick             = 50 * time.Millisecond
)

// memberCluster is one member: its API server, reached by the hub through a TCP proxy that a
// test can cut to make the member unreachable.
type memberCluster struct {
	name  string
	env   *testenv.Env
	proxy *testenv.Proxy
	// requests counts the hub's requests to this member, health checks aside.
	requests atomic.Int64
	// objectReads records the hub's reads of one object on this member ("GET path").
	objectReads requestCount
}

// namesAnObject reports whether an API path names one namespaced object (…/namespaces/NS/RESOURCE/NAME),
// not a list or a watch.
func namesAnObject(path string) bool {
	_, rest, ok := strings.Cut(path, "/namespaces/")
	return ok && len(strings.Split(strings.Trim(rest, "/"), "/")) >= 3
}

// federation is a hub with its members.
type federation struct {
	mu      sync.Mutex
	hub     *testenv.Env
	members map[string]*memberCluster
	reconc  *hub.Reconciler
	mgr     mcmanager.Manager
	stopHub func()
	// killHub stops the hub as SIGKILL would: from that moment no request of the running hub
	// reaches any API server, and nothing it remembers survives.
	killHub func()
	// life is the running hub's; faults fire on the hub's writes to members.
	life     *hubLife
	faults   *faults
	opts     hub.Options
	probes   *fakeProbe
	execs    *fakeExec
	hubCount *requestCount
	deployed bool
	// access is the deploy directory that gives the hub its identity on a member added while
	// deployed: deploy/member-access-any unless a test lends less.
	access string
}

// requestCount records requests as "METHOD path?query": wrap the writes of a client, record any
// one request.
type requestCount struct {
	mu       sync.Mutex
	requests []string
}

// wrap records every request but reads.
func (c *requestCount) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet {
			c.record(req)
		}
		return rt.RoundTrip(req)
	})
}

func (c *requestCount) record(req *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests = append(c.requests, req.Method+" "+req.URL.Path+"?"+req.URL.RawQuery)
}

func (c *requestCount) since(mark int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.requests[mark:]...)
}

func (c *requestCount) mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.requests)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// fakeProbe answers the hub's greetings of the lead broker: envtest runs no pods.
type fakeProbe struct {
	mu      sync.Mutex
	answer  error
	greeted []string
}

func (p *fakeProbe) greet(_ context.Context, address string, port int32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.greeted = append(p.greeted, fmt.Sprintf("%s:%d", address, port))
	return p.answer
}

func (p *fakeProbe) set(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answer = err
}

// fakeExec runs the commands the hub sends to a lead broker's container on this machine, as
// kwok does for simulated pods: envtest runs no pods. A namespace given a directory finds the
// stand-in flux there (standInFlux); any other answers as a container without flux would.
type fakeExec struct {
	mu sync.Mutex
	// flux maps a namespace to the directory of its stand-in flux.
	flux  map[string]string
	calls []string
}

func (e *fakeExec) run(ctx context.Context, namespace, pod, container string, argv []string) ([]byte, error) {
	e.mu.Lock()
	dir, ok := e.flux[namespace]
	e.calls = append(e.calls, namespace+"/"+pod+"/"+container)
	e.mu.Unlock()
	if !ok {
		return nil, errors.New("command terminated with exit code 127: sh: flux: not found")
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin"}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%w: %s", err, stderr.String())
	}
	return out, nil
}

// standInFlux makes the commands run in namespace's lead broker find a flux that prints, for
// the commands the hub runs, what the files uptime, status, drain and jobs of the returned
// directory hold (the test writes them in flux-core's formats), and records the drains and
// undrains it is asked for in the file commands.
func (e *fakeExec) standInFlux(t testing.TB, namespace string) string {
	t.Helper()
	dir := t.TempDir()
	script := `#!/bin/sh
d='` + dir + `'
case "$1 $2 $3" in
"uptime  ") cat "$d/uptime" ;;
"resource status -n") cat "$d/status" ;;
"resource drain -n") cat "$d/drain" ;;
"jobs -A --json") cat "$d/jobs" ;;
"resource drain "*|"resource undrain "*) printf '%s\n' "$*" >>"$d/commands" ;;
*) echo "flux: unexpected command $*" >&2; exit 1 ;;
esac
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "flux"), []byte(script), 0o755))
	e.mu.Lock()
	defer e.mu.Unlock()
	e.flux[namespace] = dir
	return dir
}

// startFederation starts a hub and the named members, registers the members and runs the hub,
// all as administrators.
func startFederation(t testing.TB, opts hub.Options, memberNames ...string) *federation {
	t.Helper()
	return startFederationAs(t, false, opts, memberNames...)
}

// startFederationAs is startFederation; with deployed, the hub runs with exactly the permissions
// deploy/hub gives it, and reaches each member as the ServiceAccount of deploy/member-access.
func startFederationAs(t testing.TB, deployed bool, opts hub.Options, memberNames ...string) *federation {
	t.Helper()
	envs := testenv.StartN(t, 1+len(memberNames))
	f := &federation{hub: envs[0], members: map[string]*memberCluster{}, probes: &fakeProbe{},
		execs: &fakeExec{flux: map[string]string{}}, hubCount: &requestCount{}, deployed: deployed, faults: newFaults()}
	ctx := context.Background()
	require.NoError(t, f.hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: membersNamespace}}))
	if deployed {
		require.NoError(t, f.hub.ApplyDeploy(ctx, "hub"))
	}
	for i, name := range memberNames {
		f.addMemberOn(t, name, envs[1+i])
	}

	opts.Name = hubName
	opts.MembersNamespace = membersNamespace
	if opts.Probe == nil {
		opts.Probe = f.probes.greet
	}
	if opts.LeadAddressAllow == nil {
		// The roots' expose.address is 127.0.0.1: envtest runs no pods.
		opts.LeadAddressAllow = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	}
	if opts.Exec == nil {
		opts.Exec = f.execs.run
	}
	// Anything the hub dials outside 127.0.0.0/8 is refused, and fails the test binary.
	opts.Dial = (&netguard.Dialer{}).DialContext
	setDefault(&opts.SweepInterval, time.Hour)
	setDefault(&opts.RetryBase, 100*time.Millisecond)
	setDefault(&opts.RetryMax, 2*time.Second)
	setDefault(&opts.MemberTimeout, 3*time.Second)
	setDefault(&opts.Members.ConnectTimeout, 2*time.Second)
	setDefault(&opts.Members.SyncTimeout, 5*time.Second)
	setDefault(&opts.Members.HealthInterval, 250*time.Millisecond)
	setDefault(&opts.Members.HealthTimeout, time.Second)
	opts.Members.RESTOptions = append(opts.Members.RESTOptions, func(cfg *rest.Config) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		life := f.life
		for _, m := range f.members {
			if cfg.Host == m.proxy.URL() {
				cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
					return roundTripFunc(func(req *http.Request) (*http.Response, error) {
						if life.dead() {
							return nil, errKilled
						}
						// The health checks are the one cost of a member that does not change.
						health := req.UserAgent() == members.HealthUserAgent
						if !health {
							m.requests.Add(1)
							if req.Method == http.MethodGet && namesAnObject(req.URL.Path) {
								m.objectReads.record(req)
							}
						}
						resp, err := rt.RoundTrip(req)
						if err != nil || health || req.Method == http.MethodGet || resp.StatusCode >= 300 {
							return resp, err
						}
						// A write the member committed: a fault may strike now.
						if fault := f.faults.strike(m.name, req, life); fault != nil {
							_ = resp.Body.Close()
							return nil, fault
						}
						return resp, nil
					})
				})
			}
		}
		return nil
	})
	f.opts = opts
	f.startHub(t)
	for _, name := range memberNames {
		f.waitMemberReady(t, name)
	}
	return f
}

// startHub runs the hub's manager (with the MiniCluster reconciler) until the test ends or
// stopHub is called.
func (f *federation) startHub(t testing.TB) {
	t.Helper()
	life := &hubLife{}
	f.mu.Lock()
	f.life = life
	f.mu.Unlock()
	cfg := rest.CopyConfig(f.hub.Config)
	cfg.Wrap(f.hubCount.wrap)
	cfg.Wrap(life.wrap)
	if f.deployed {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:fluxfed-system:fluxfed-manager"}
	}
	mgrCtx, cancel := context.WithCancel(context.Background())
	mgr, r, err := hub.NewManager(cfg, manager.Options{
		Scheme:                 f.hub.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{ByObject: member.CacheByObject()},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	}, f.opts)
	require.NoError(t, err)
	require.NoError(t, member.Setup(mgr.GetLocalManager(), member.Options{}))
	f.reconc, f.mgr = r, mgr
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	var once sync.Once
	stop := func(kill bool) {
		once.Do(func() {
			if kill {
				life.kill()
			}
			cancel()
			if err := <-done; err != nil && !kill {
				t.Fatalf("the hub did not stop: %v; still running:\n%s", err, testenv.Goroutines())
			}
		})
	}
	f.stopHub = func() { stop(false) }
	f.killHub = func() { stop(true) }
	t.Cleanup(f.stopHub)
}

// waitMemberReady waits until the MemberCluster of name is Ready and the hub may push to it.
func (f *federation) waitMemberReady(t testing.TB, name string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, meta.IsStatusConditionTrue(f.memberCluster(c, name).Status.Conditions, fedv1alpha1.ConditionReady))
		_, err := f.mgr.GetCluster(context.Background(), multicluster.ClusterName(name))
		require.NoError(c, err)
	}, wait, tick, "member %s was never ready", name)
}

// memberCluster reads the MemberCluster of name.
func (f *federation) memberCluster(t require.TestingT, name string) *fedv1alpha1.MemberCluster {
	mc := &fedv1alpha1.MemberCluster{}
	require.NoError(t, f.hub.Client.Get(context.Background(), client.ObjectKey{Name: name}, mc))
	return mc
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// addMember starts a member cluster and registers it. Its proxy is cut before its API server
// stops, so that the hub's open watches do not hold up the shutdown.
func (f *federation) addMember(t testing.TB, name string) *memberCluster {
	t.Helper()
	return f.addMemberOn(t, name, testenv.Start(t))
}

// addMemberOn is addMember on an API server already started.
func (f *federation) addMemberOn(t testing.TB, name string, env *testenv.Env) *memberCluster {
	t.Helper()
	m := &memberCluster{name: name, env: env}
	m.proxy = testenv.StartProxy(t, m.env.Config.Host)
	runMemberReconciler(t, m.env.Config, m.env)
	f.mu.Lock()
	f.members[name] = m
	f.mu.Unlock()
	cfg := m.env.Config
	if f.deployed {
		cfg = m.env.HubIdentity(t, cmp.Or(f.access, "member-access-any"))
	}
	f.register(t, name, cfg)
	return m
}

// runMemberReconciler runs the MiniCluster reconciler on a member, as `fluxfed manager` does.
func runMemberReconciler(t testing.TB, cfg *rest.Config, env *testenv.Env) {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{ByObject: member.CacheByObject()},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	require.NoError(t, err)
	require.NoError(t, member.Setup(mgr, member.Options{}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}

// register writes (or rewrites) the kubeconfig Secret of a member: cfg's credentials, dialled
// through the member's proxy.
func (f *federation) register(t testing.TB, name string, cfg *rest.Config) {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	if m, ok := f.members[name]; ok {
		cfg.Host = m.proxy.URL()
	}
	kc, err := testenv.Kubeconfig(cfg)
	require.NoError(t, err)
	f.registerKubeconfig(t, name, kc)
}

// registerKubeconfig writes the kubeconfig Secret of member name and its MemberCluster.
func (f *federation) registerKubeconfig(t testing.TB, name string, kc []byte) {
	t.Helper()
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: membersNamespace}}
	_, err := ctrl.CreateOrUpdate(ctx, f.hub.Client, secret, func() error {
		secret.Data = map[string][]byte{members.DefaultKubeconfigKey: kc}
		return nil
	})
	require.NoError(t, err)
	mc := &fedv1alpha1.MemberCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: fedv1alpha1.MemberClusterSpec{KubeconfigSecretRef: fedv1alpha1.KubeconfigSecretRef{Name: secret.Name},
			// The test members are lent whole: every namespace, created by the hub.
			Namespaces: fedv1alpha1.MemberNamespaces{Allow: fedv1alpha1.NamespaceAllowAny, Create: true}},
	}
	if err := f.hub.Client.Create(ctx, mc); !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

// namespace creates a namespace on the hub (and nowhere else: the hub creates it on members).
func (f *federation) namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "research-"}}
	require.NoError(t, f.hub.Client.Create(context.Background(), ns))
	return ns.Name
}

// newRoot returns a root of size 2 (maxSize 4) exposed at 127.0.0.1, with the given bursts.
func newRoot(ns, name string, bursts ...fluxv1alpha2.Burst) *fluxv1alpha2.MiniCluster {
	return v1alpha2test.MiniCluster(name).Namespace(ns).Size(2).MaxSize(4).
		Image("ghcr.io/converged-computing/metric-lammps:latest").Command("lmp -in in.reaxc.hns").
		Expose("127.0.0.1").Bursts(bursts...).Obj()
}

// burstOntoBoth creates, in a namespace of its own, a root that bursts burst-a (3 brokers) onto
// member-a and burst-b (2) onto member-b, and waits until both children are applied.
func (f *federation) burstOntoBoth(t testing.TB, name string) (string, *fluxv1alpha2.MiniCluster) {
	t.Helper()
	ns := f.namespace(t)
	root := newRoot(ns, name,
		fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 3},
		fluxv1alpha2.Burst{Name: "burst-b", Cluster: "member-b", Size: 2})
	require.NoError(t, f.hub.Client.Create(context.Background(), root))
	f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstApplied)
	f.waitBurst(t, root, "burst-b", fluxv1alpha2.BurstApplied)
	return ns, root
}

// child reads a child from a member's API server; nil when it does not exist.
func (m *memberCluster) child(t require.TestingT, ns, name string) *fluxv1alpha2.MiniCluster {
	mc := &fluxv1alpha2.MiniCluster{}
	err := m.env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, mc)
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return mc
}

func (f *federation) root(t require.TestingT, root *fluxv1alpha2.MiniCluster) *fluxv1alpha2.MiniCluster {
	mc := &fluxv1alpha2.MiniCluster{}
	require.NoError(t, f.hub.Client.Get(context.Background(), client.ObjectKeyFromObject(root), mc))
	return mc
}

// burstStatus returns the status of one burst of root.
func burstStatus(mc *fluxv1alpha2.MiniCluster, name string) *fluxv1alpha2.BurstStatus {
	for i := range mc.Status.Bursts {
		if mc.Status.Bursts[i].Name == name {
			return &mc.Status.Bursts[i]
		}
	}
	return nil
}

// waitBurst waits until the burst's phase is phase.
func (f *federation) waitBurst(t testing.TB, root *fluxv1alpha2.MiniCluster, name string, phase fluxv1alpha2.BurstPhase) *fluxv1alpha2.BurstStatus {
	t.Helper()
	var got *fluxv1alpha2.BurstStatus
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got = burstStatus(f.root(c, root), name)
		require.NotNil(c, got, "no status for burst %s", name)
		require.Equal(c, phase, got.Phase, "burst %s: %s", name, got.Message)
	}, wait, tick)
	return got
}

func TestMain(m *testing.M) {
	// The managers' logs go to stderr only when asked: FLUXFED_TEST_LOG=1.
	if os.Getenv("FLUXFED_TEST_LOG") != "" {
		ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(logr.Discard())
	}
	netguard.Main(m)
}

// edit changes the root's spec as a user would, retrying on conflicts with the controllers'
// status writes.
func (f *federation) edit(t *testing.T, root *fluxv1alpha2.MiniCluster, change func(*fluxv1alpha2.MiniCluster)) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		mc := &fluxv1alpha2.MiniCluster{}
		if err := f.hub.Client.Get(context.Background(), client.ObjectKeyFromObject(root), mc); err != nil {
			return err
		}
		change(mc)
		return f.hub.Client.Update(context.Background(), mc)
	}))
}
