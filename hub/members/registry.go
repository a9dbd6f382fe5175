package members

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// Defaults of Options.
const (
	DefaultQPS              = 20
	DefaultBurst            = 40
	DefaultConnectTimeout   = 10 * time.Second
	DefaultSyncTimeout      = 30 * time.Second
	DefaultHealthInterval   = 5 * time.Second
	DefaultHealthTimeout    = 3 * time.Second
	DefaultFailureThreshold = 2
	DefaultRecordInterval   = time.Minute
)

// Options configure how the hub reaches and watches its members.
type Options struct {
	// QPS and Burst limit each member client; ConnectTimeout bounds establishing a connection.
	QPS            float32
	Burst          int
	ConnectTimeout time.Duration
	// SyncTimeout bounds the wait for a member's cache to fill when it is engaged: a member that
	// does not answer is retried at its next health check instead of holding anything up.
	SyncTimeout time.Duration
	// HealthInterval is the period of the health check of every member, and HealthTimeout bounds
	// one check. FailureThreshold checks in a row that fail make a Ready member NotReady.
	HealthInterval   time.Duration
	HealthTimeout    time.Duration
	FailureThreshold int
	// RecordInterval is how often an unchanged member's heartbeat is written to its status.
	RecordInterval time.Duration
	// ClusterOptions build each member's cluster (the hub scopes its cache with them).
	ClusterOptions []cluster.Option
	// RESTOptions are applied to every member's rest.Config after the hub's checks and limits
	// (tests count requests with them).
	RESTOptions []func(*rest.Config) error
	// Dial opens every connection to a member; a net.Dialer when nil. The hub restricts where
	// it may dial with it (AllowDial), and tests refuse anything but loopback.
	Dial Dialer
	// Clock is time.Now when nil.
	Clock func() time.Time
}

func (o Options) withDefaults() (Options, error) {
	setDefault(&o.QPS, DefaultQPS)
	setDefault(&o.Burst, DefaultBurst)
	setDefault(&o.ConnectTimeout, DefaultConnectTimeout)
	setDefault(&o.SyncTimeout, DefaultSyncTimeout)
	setDefault(&o.HealthInterval, DefaultHealthInterval)
	setDefault(&o.HealthTimeout, DefaultHealthTimeout)
	setDefault(&o.FailureThreshold, DefaultFailureThreshold)
	setDefault(&o.RecordInterval, DefaultRecordInterval)
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.QPS < 0 || o.Burst < 0 || o.ConnectTimeout < 0 || o.SyncTimeout < 0 || o.HealthInterval < 0 ||
		o.HealthTimeout < 0 || o.FailureThreshold < 0 || o.RecordInterval < 0 {
		return o, errors.New("members: every limit, timeout and interval must be positive")
	}
	return o, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Phase is where a member stands for the hub.
type Phase int

const (
	// PhaseUnknown is a member registered but not checked yet (the hub just started, or the
	// kubeconfig changed). Nothing is concluded about its bursts.
	PhaseUnknown Phase = iota
	// PhaseReady is a member that answers, is the only registration of its cluster, and whose
	// cache is filled: the hub may push to it.
	PhaseReady
	// PhaseNotReady is a member that cannot be used; Reason says why.
	PhaseNotReady
	// PhaseNotRegistered is a name no MemberCluster has.
	PhaseNotRegistered
)

// State is what the hub knows of one member right now.
type State struct {
	Phase Phase
	// Reason and Message explain the phase with a fedv1alpha1 reason, for conditions.
	Reason, Message string
	// Cluster is the engaged member cluster when Phase is PhaseReady; nil otherwise.
	Cluster cluster.Cluster
	// Epoch counts the member's returns to Ready. What was pushed under another epoch may have
	// changed while the hub could not see it: a caller re-reads it from the API server.
	Epoch uint64
	// Watched is where Cluster's cache watches; Denied are the namespaces of the wanted scope
	// where the hub's identity on the member may not watch (see Scope).
	Watched Scope
	Denied  []string
}

// Snapshot is what the MemberCluster's status reports.
type Snapshot struct {
	State
	// ClusterID, Version and Nodes are as last observed; Nodes is nil when unknown.
	ClusterID, Version string
	Nodes              *int32
	// LastSeen is when the member last answered a health check; zero if never.
	LastSeen time.Time
	// Wanted is the scope last registered.
	Wanted Scope
	// Fluxfed says whether the member serves the MiniCluster API: nil until the hub asked.
	Fluxfed *bool
	// NamespacesChecked is true once the registered namespaces were looked at: then
	// MissingNamespaces do not exist, and UnlentNamespaces may not be used by the hub and it
	// cannot tell whether they exist.
	NamespacesChecked                   bool
	MissingNamespaces, UnlentNamespaces []string
	// Expiry is when the kubeconfig's credentials expire, zero when the hub cannot tell;
	// ExpiryOf says what expires: "token" or "client certificate".
	Expiry   time.Time
	ExpiryOf string
	// Secret is where the kubeconfig is, "namespace/name".
	Secret string
}

// HealthUserAgent is the user agent of the hub's health checks of its members, so that a member's
// owner can tell them apart in its audit log.
const HealthUserAgent = "fluxfed-hub/member-health"

// Registry is the hub's members: a multicluster-runtime provider whose clusters are the
// MemberClusters of the hub, each health-checked in the background. The MemberCluster reconciler
// (Setup) registers members with Set and owns their status; everything else asks State.
type Registry struct {
	opts Options
	// local reads MemberClusters on the hub: State tells a registered member that the registry
	// has not seen yet from one that does not exist.
	local client.Reader

	mu       sync.Mutex
	members  map[string]*member
	indexers []index
	aware    multicluster.Aware
	started  chan struct{}
	changed  func(name string)
}

type index struct {
	obj     client.Object
	field   string
	extract client.IndexerFunc
}

// member is one registration. Everything here is guarded by Registry.mu.
type member struct {
	name string
	// created orders registrations of the same cluster: the first one is used.
	created metav1.Time
	// recordedID and recordedDuplicate are what the MemberCluster's status says from before
	// (a restart): the registration recorded first keeps its cluster.
	recordedID        string
	recordedDuplicate bool

	// key identifies the kubeconfig in use; a new one restarts everything below.
	key     string
	refusal *State
	gen     uint64
	stop    context.CancelFunc

	// ctx and cfg are the current kubeconfig's, to engage the member again with another scope.
	ctx context.Context
	cfg *rest.Config

	cluster  cluster.Cluster
	stopCl   context.CancelFunc
	engaging bool

	// want is the scope the MemberCluster reconciler asks for; built is the one the engaged
	// cluster was built for, of which watched is what the member allowed and denied the rest.
	want    Scope
	built   Scope
	watched Scope
	denied  []string

	// secret is where the kubeconfig is, "namespace/name", for messages.
	secret string
	// expiry is when the kubeconfig's credentials expire, zero when unknown; expiryOf says
	// what expires ("token", "client certificate").
	expiry   time.Time
	expiryOf string
	// namespaces are those to check on the member; create says the hub may create them.
	namespaces []string
	create     bool
	// crd is what the hub last found of the member's MiniCluster API; spaces of its namespaces.
	crd    crdState
	spaces namespaceReport
	// engageErr is the last reason engaging failed, logged once until it changes.
	engageErr string

	state     State
	fails     int
	duplicate bool
	clusterID string
	version   string
	nodes     *int32
	lastSeen  time.Time
	infoAt    time.Time
}

// NewRegistry returns an empty registry, to be the provider of a multicluster manager and set
// up on it with Setup.
func NewRegistry(opts Options) (*Registry, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Registry{opts: opts, members: map[string]*member{}, started: make(chan struct{})}, nil
}

// Start runs the registry as the manager's provider: members are engaged with aware from now on.
func (r *Registry) Start(ctx context.Context, aware multicluster.Aware) error {
	r.mu.Lock()
	if r.aware != nil {
		r.mu.Unlock()
		return errors.New("members: the registry is already started")
	}
	r.aware = aware
	close(r.started)
	r.mu.Unlock()
	<-ctx.Done()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.members {
		r.disconnect(m)
	}
	return nil
}

// Get returns the engaged cluster of a member (multicluster.Provider).
func (r *Registry) Get(_ context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m, ok := r.members[string(name)]; ok && m.state.Phase == PhaseReady {
		return m.cluster, nil
	}
	return nil, multicluster.ErrClusterNotFound
}

// IndexField indexes a field on every member's cache, present and future (multicluster.Provider).
func (r *Registry) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	r.mu.Lock()
	r.indexers = append(r.indexers, index{obj: obj, field: field, extract: extract})
	var clusters []cluster.Cluster
	for _, m := range r.members {
		if m.cluster != nil {
			clusters = append(clusters, m.cluster)
		}
	}
	r.mu.Unlock()
	var errs []error
	for _, cl := range clusters {
		errs = append(errs, cl.GetFieldIndexer().IndexField(ctx, obj, field, extract))
	}
	return errors.Join(errs...)
}

// ListClusters returns the members the hub may push to now, sorted.
func (r *Registry) ListClusters() []multicluster.ClusterName {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []multicluster.ClusterName
	for name, m := range r.members {
		if m.state.Phase == PhaseReady {
			out = append(out, multicluster.ClusterName(name))
		}
	}
	slices.Sort(out)
	return out
}

// State returns what the hub knows of member name now.
func (r *Registry) State(ctx context.Context, name string) State {
	r.mu.Lock()
	m, ok := r.members[name]
	var s State
	if ok {
		s = m.state
	}
	r.mu.Unlock()
	if ok {
		return s
	}
	// Not seen yet by the MemberCluster reconciler (the hub just started), or not registered.
	mc := &fedv1alpha1.MemberCluster{}
	switch err := r.local.Get(ctx, client.ObjectKey{Name: name}, mc); {
	case err == nil:
		return State{Phase: PhaseUnknown, Reason: fedv1alpha1.ReasonConnecting, Message: fmt.Sprintf("the hub has not checked member %s yet", name)}
	case apierrors.IsNotFound(err):
		return State{Phase: PhaseNotRegistered, Message: fmt.Sprintf("no MemberCluster %s is registered on the hub", name)}
	default:
		return State{Phase: PhaseUnknown, Reason: fedv1alpha1.ReasonConnecting, Message: fmt.Sprintf("reading MemberCluster %s: %v", name, err)}
	}
}

// Snapshot returns what the status of member name reports; ok is false for an unknown member.
func (r *Registry) Snapshot(name string) (Snapshot, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.members[name]
	if !ok {
		return Snapshot{}, false
	}
	snap := Snapshot{State: m.state, ClusterID: m.clusterID, Version: m.version, Nodes: m.nodes, LastSeen: m.lastSeen, Wanted: m.want,
		NamespacesChecked: m.spaces.checked, MissingNamespaces: slices.Clone(m.spaces.missing), UnlentNamespaces: slices.Clone(m.spaces.unlent),
		Expiry: m.expiry, ExpiryOf: m.expiryOf, Secret: m.secret}
	if m.crd != crdUnknown {
		served := m.crd == crdServed
		snap.Fluxfed = &served
	}
	return snap, true
}

// notifyOn sets the function told whenever a member's state or identity changes; the
// MemberCluster reconciler enqueues the member with it.
func (r *Registry) notifyOn(fn func(name string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changed = fn
}

// Registration is what the MemberCluster reconciler tells the registry of one member.
type Registration struct {
	Name    string
	Created metav1.Time
	// RecordedID and RecordedDuplicate come from the MemberCluster's status.
	RecordedID        string
	RecordedDuplicate bool
	// Kubeconfig is the Secret's kubeconfig, nil when it cannot be read; Refusal then (or when
	// Check refused it) says why, with a fedv1alpha1 reason.
	Kubeconfig []byte
	Refusal    *State
	// Scope is where the hub's roots burst into on the member, as its policy allows.
	Scope Scope
	// Secret is the Secret of the kubeconfig, "namespace/name", named in messages.
	Secret string
	// Namespaces are the member namespaces whose existence the health check reports on: those
	// roots burst into and those spec.namespaces lists; CreateNamespaces says the hub may create
	// them, so that a missing one is no lack.
	Namespaces       []string
	CreateNamespaces bool
}

// Set registers a member, or updates it: a changed kubeconfig (rotation) reconnects, a refused or
// missing one disconnects. It returns at once; connecting and checking happen in the background.
func (r *Registry) Set(reg Registration) {
	key, cfg, refusal := r.configure(reg)

	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.members[reg.Name]
	if !ok {
		m = &member{name: reg.Name, state: State{Phase: PhaseUnknown, Reason: fedv1alpha1.ReasonConnecting, Message: "the hub has not checked the member yet"}}
		r.members[reg.Name] = m
	}
	m.created, m.recordedID, m.recordedDuplicate = reg.Created, reg.RecordedID, reg.RecordedDuplicate
	m.want, m.secret = reg.Scope, reg.Secret
	if !slices.Equal(m.namespaces, reg.Namespaces) || m.create != reg.CreateNamespaces {
		// Looked at again at the next health check.
		m.namespaces, m.create, m.spaces = slices.Clone(reg.Namespaces), reg.CreateNamespaces, namespaceReport{}
	}
	if ok && key == m.key {
		r.rescope(m)
		return
	}
	r.disconnect(m)
	m.key, m.refusal, m.fails, m.duplicate = key, refusal, 0, false
	m.clusterID, m.version, m.nodes, m.infoAt = "", "", nil, time.Time{}
	m.crd, m.spaces, m.engageErr, m.expiry, m.expiryOf = crdUnknown, namespaceReport{}, "", time.Time{}, ""
	if cfg != nil {
		m.expiry, m.expiryOf = credentialsExpiry(cfg)
	}
	if refusal != nil {
		r.setState(m, *refusal)
		return
	}
	r.setState(m, State{Phase: PhaseUnknown, Reason: fedv1alpha1.ReasonConnecting, Message: "the hub is connecting to the member"})
	m.gen++
	ctx, cancel := context.WithCancel(context.Background())
	m.stop, m.ctx, m.cfg = cancel, ctx, cfg
	go r.watch(ctx, m, m.gen, cfg)
}

// rescope engages member m again, with a cluster that watches the scope wanted now, when that is
// not the scope its cluster was built for; the cluster in use serves until the new one is
// filled. Callers hold r.mu.
func (r *Registry) rescope(m *member) {
	if m.cluster == nil || m.engaging || m.ctx == nil || m.built.Equal(m.want) {
		return
	}
	m.engaging = true
	go r.engage(m.ctx, m, m.gen, m.cfg)
}

// configure checks a registration's kubeconfig and builds the member's rest.Config: the
// key identifies what was set, the refusal says why nothing can be built.
func (r *Registry) configure(reg Registration) (string, *rest.Config, *State) {
	if reg.Refusal != nil {
		return "refused:" + reg.Refusal.Reason + ":" + reg.Refusal.Message, nil, reg.Refusal
	}
	cfg, err := Check(reg.Kubeconfig)
	if err == nil {
		err = r.limit(cfg)
	}
	if err != nil {
		s := &State{Phase: PhaseNotReady, Reason: fedv1alpha1.ReasonKubeconfigRefused, Message: err.Error()}
		return "refused:" + s.Message, nil, s
	}
	return "kubeconfig:" + hash(reg.Kubeconfig), cfg, nil
}

// limit gives a member's rest.Config the hub's limits and dialer, then the extra options.
func (r *Registry) limit(cfg *rest.Config) error {
	if err := Limits(r.opts.QPS, r.opts.Burst, r.opts.ConnectTimeout)(cfg); err != nil {
		return err
	}
	if r.opts.Dial != nil {
		cfg.Dial = withTimeout(r.opts.Dial, r.opts.ConnectTimeout)
	}
	for _, opt := range r.opts.RESTOptions {
		if err := opt(cfg); err != nil {
			return err
		}
	}
	return nil
}

// Remove forgets a member: its checks stop and it is disengaged. Its children stay where they are.
func (r *Registry) Remove(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m, ok := r.members[name]; ok {
		r.disconnect(m)
		delete(r.members, name)
	}
}

// disconnect stops a member's checks and disengages its cluster. Callers hold r.mu.
func (r *Registry) disconnect(m *member) {
	if m.stop != nil {
		m.stop()
		m.stop = nil
	}
	r.disengage(m)
	m.gen++
}

// disengage stops the member's cluster: every controller's watches of it end. Callers hold r.mu.
func (r *Registry) disengage(m *member) {
	if m.stopCl != nil {
		m.stopCl()
	}
	m.cluster, m.stopCl, m.engaging = nil, nil, false
	m.built, m.watched, m.denied = Scope{}, Scope{}, nil
}

// setState sets a member's state and tells the reconciler when its phase or reason changed.
// Callers hold r.mu.
func (r *Registry) setState(m *member, s State) {
	if s.Phase == PhaseReady {
		s.Cluster, s.Watched, s.Denied = m.cluster, m.watched, m.denied
	}
	moved := s.Phase != m.state.Phase || s.Reason != m.state.Reason
	if s.Phase == PhaseReady && m.state.Phase != PhaseReady {
		m.state.Epoch++
	}
	s.Epoch = m.state.Epoch
	m.state = s
	if moved && r.changed != nil {
		r.changed(m.name)
	}
}

// watch checks member m every HealthInterval until ctx ends.
func (r *Registry) watch(ctx context.Context, m *member, gen uint64, cfg *rest.Config) {
	health := rest.CopyConfig(cfg)
	health.UserAgent = HealthUserAgent
	cs, err := kubernetes.NewForConfig(health)
	if err != nil {
		r.mu.Lock()
		if m.gen == gen {
			r.setState(m, State{Phase: PhaseNotReady, Reason: fedv1alpha1.ReasonKubeconfigRefused, Message: err.Error()})
		}
		r.mu.Unlock()
		return
	}
	ticker := time.NewTicker(r.opts.HealthInterval)
	defer ticker.Stop()
	for {
		r.mu.Lock()
		info := m.infoAt.IsZero() || r.opts.Clock().Sub(m.infoAt) >= r.opts.RecordInterval
		// A member without the MiniCluster API is asked again at every check, so that it is used
		// as soon as its owner installed fluxfed; one with it, with the rest of the information
		// (once a RecordInterval), as are the namespaces.
		ask := asking{info: info, crd: info || m.crd != crdServed}
		if info || !m.spaces.checked {
			ask.namespaces, ask.create = slices.Clone(m.namespaces), m.create
			ask.spaces = true
		}
		r.mu.Unlock()
		result := r.check(ctx, cs, ask)
		if ctx.Err() != nil {
			return
		}
		r.record(ctx, m, gen, cfg, result)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// asking is what one health check asks besides the cluster ID: info (version and nodes), crd
// (whether the member serves the MiniCluster API), spaces (the namespaces).
type asking struct {
	info, crd, spaces bool
	namespaces        []string
	create            bool
}

// checkResult is one health check.
type checkResult struct {
	err error
	// denied is true when the member refused the credentials (401) or what they may do (403):
	// definitive, no threshold; unauthorized tells the first.
	denied, unauthorized bool
	clusterID            string
	// crd is what was found of the MiniCluster API, crdUnknown when not asked.
	crd crdState
	// spaces is what was found of the namespaces, when asked.
	spaces *namespaceReport
	// info is true when version and nodes were read.
	info    bool
	version string
	nodes   *int32
}

// check reads the member's kube-system namespace, whose UID identifies the cluster; with info,
// also its version and node count. A member may not let the hub list nodes: then nodes is nil.
func (r *Registry) check(ctx context.Context, cs kubernetes.Interface, ask asking) checkResult {
	ctx, cancel := context.WithTimeout(ctx, r.opts.HealthTimeout)
	defer cancel()
	ns, err := cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		unauthorized := apierrors.IsUnauthorized(err)
		return checkResult{err: err, denied: unauthorized || apierrors.IsForbidden(err), unauthorized: unauthorized}
	}
	res := checkResult{clusterID: string(ns.UID)}
	if ask.crd {
		served, err := servesMiniClusters(ctx, cs)
		if err != nil {
			return checkResult{err: err}
		}
		res.crd = crdMissing
		if served {
			res.crd = crdServed
		}
	}
	if ask.spaces && res.crd != crdMissing {
		// A failure here says nothing of the member's health: the namespaces are looked at
		// again at the next check.
		if rep, err := checkNamespaces(ctx, cs, ask.namespaces, ask.create); err == nil {
			res.spaces = &rep
		}
	}
	if !ask.info {
		return res
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return checkResult{err: fmt.Errorf("reading the version: %w", err)}
	}
	res.info, res.version = true, v.GitVersion
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
	if err == nil {
		n := int32(len(nodes.Items))
		if nodes.RemainingItemCount != nil {
			n += int32(*nodes.RemainingItemCount)
		}
		res.nodes = &n
	}
	return res
}

// record applies a health check's result to member m, if it is still for the same kubeconfig.
func (r *Registry) record(ctx context.Context, m *member, gen uint64, cfg *rest.Config, res checkResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m.gen != gen {
		return
	}
	now := r.opts.Clock()
	if res.err != nil {
		m.fails++
		switch {
		case res.unauthorized:
			r.setState(m, State{Phase: PhaseNotReady, Reason: fedv1alpha1.ReasonCredentialsRefused, Message: refusedMessage(m, now)})
		case res.denied:
			r.setState(m, State{Phase: PhaseNotReady, Reason: fedv1alpha1.ReasonAccessDenied, Message: fmt.Sprintf(
				"the member accepted the hub's credentials but forbids what the health check reads: %v; "+
					"the hub's role on the member needs get on namespace kube-system (deploy/member-access)", res.err)})
		case m.fails >= r.opts.FailureThreshold:
			r.setState(m, State{Phase: PhaseNotReady, Reason: fedv1alpha1.ReasonUnreachable, Message: fmt.Sprintf(
				"the member's API server did not answer %d health checks in a row: %v", m.fails, res.err)})
		}
		return
	}
	m.fails, m.lastSeen = 0, now
	idChanged := m.clusterID != res.clusterID
	m.clusterID = res.clusterID
	if res.info {
		if m.version != res.version || !equalPtr(m.nodes, res.nodes) {
			idChanged = true
		}
		m.version, m.nodes, m.infoAt = res.version, res.nodes, now
	}
	if first := r.firstOf(m); first != "" {
		m.duplicate = true
		r.disengage(m)
		r.setState(m, State{Phase: PhaseNotReady, Reason: fedv1alpha1.ReasonDuplicateCluster, Message: fmt.Sprintf(
			"this is cluster %s, which MemberCluster %s registers already; this registration is never used: delete it", m.clusterID, first)})
		return
	}
	m.duplicate = false
	if res.crd != crdUnknown && res.crd != m.crd {
		m.crd, idChanged = res.crd, true
	}
	if res.spaces != nil && !res.spaces.equal(m.spaces) {
		m.spaces, idChanged = *res.spaces, true
	}
	switch {
	case m.crd == crdMissing:
		// Nothing can be pushed there, and a cache of MiniClusters would never fill: the
		// member is not engaged (an engaged one stays so, as through an outage) until the
		// MiniCluster API is served.
		r.setState(m, State{Phase: PhaseNotReady, Reason: fedv1alpha1.ReasonFluxfedMissing, Message: fluxfedMissing()})
	case m.cluster != nil:
		r.setState(m, State{Phase: PhaseReady, Reason: fedv1alpha1.ReasonConnected, Message: "the member answers the hub's health checks"})
		if res.info && len(m.denied) > 0 {
			// The member's owner may have granted the hub a namespace since: ask again.
			m.built = Scope{}
		}
		r.rescope(m)
	case !m.engaging:
		m.engaging = true
		go r.engage(ctx, m, gen, cfg)
	}
	if idChanged && r.changed != nil {
		r.changed(m.name)
	}
}

// refusedMessage says that member m refused the hub's credentials (401), when its token expired
// if it did, and how to give the hub new ones.
func refusedMessage(m *member, now time.Time) string {
	msg := "the member did not accept the hub's credentials (401 Unauthorized)"
	switch {
	case !m.expiry.IsZero() && !now.Before(m.expiry):
		msg += fmt.Sprintf(": the kubeconfig's %s expired at %s", m.expiryOf, m.expiry.UTC().Format(time.RFC3339))
	case !m.expiry.IsZero():
		msg += fmt.Sprintf(": the kubeconfig's %s, valid until %s, was revoked or is not the member's", m.expiryOf, m.expiry.UTC().Format(time.RFC3339))
	default:
		msg += ": they expired, were revoked, or are not the member's"
	}
	return msg + "; " + renewHint(m.secret)
}

// firstOf returns the member, other than m, that registers m's cluster first; "" when m is the
// first. A member in use is never displaced by one that is not; otherwise the first is the one
// whose status recorded the cluster (and not as a duplicate), then the oldest, then the first by
// name, which gives the same answer after a restart as before it.
func (r *Registry) firstOf(m *member) string {
	for _, o := range r.members {
		if o == m || o.refusal != nil {
			continue
		}
		id := o.clusterID
		if id == "" {
			id = o.recordedID
		}
		if id != m.clusterID {
			continue
		}
		oReady, mReady := o.state.Phase == PhaseReady, m.state.Phase == PhaseReady
		if (oReady && !mReady) || (oReady == mReady && registeredBefore(o, m)) {
			return o.name
		}
	}
	return ""
}

// registeredBefore orders two registrations of one cluster.
func registeredBefore(a, b *member) bool {
	aDup, bDup := a.duplicate || a.recordedDuplicate, b.duplicate || b.recordedDuplicate
	aRec, bRec := a.recordedID != "" && a.recordedID == a.clusterID, b.recordedID != "" && b.recordedID == b.clusterID
	switch {
	case aDup != bDup:
		return bDup
	case aRec != bRec:
		return aRec
	case !a.created.Equal(&b.created):
		return a.created.Before(&b.created)
	}
	return a.name < b.name
}

// engage builds member m's cluster for the scope it wants, fills its cache, and engages it with
// the manager's controllers in place of the cluster it had, if any (a new scope). A member whose
// cache does not fill within SyncTimeout is tried again at its next check.
func (r *Registry) engage(ctx context.Context, m *member, gen uint64, cfg *rest.Config) {
	log := ctrl.Log.WithName("members").WithValues("member", m.name)
	fail := func(err error, stop context.CancelFunc) {
		if stop != nil {
			stop()
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if m.gen != gen {
			return
		}
		m.engaging = false
		// Tried again at every health check: said once, until the reason changes.
		if msg := err.Error(); msg != m.engageErr {
			m.engageErr = msg
			log.Info("Could not engage the member; the hub tries again at each health check and logs again only if the reason changes",
				"reason", msg)
		}
	}
	select {
	case <-r.started:
	case <-ctx.Done():
		return
	}
	r.mu.Lock()
	indexers := slices.Clone(r.indexers)
	aware := r.aware
	want, allowed := m.want, m.watched
	r.mu.Unlock()

	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fail(fmt.Errorf("building the member's client: %w", err), nil)
		return
	}
	watched, denied, err := access(ctx, cs, want, allowed)
	if err != nil {
		fail(err, nil)
		return
	}
	r.mu.Lock()
	if m.gen == gen && m.cluster != nil && watched.Equal(m.watched) {
		// The member allows what it allowed before: the cluster in use watches the same.
		changed := !slices.Equal(m.denied, denied)
		m.built, m.denied, m.engaging = want, denied, false
		if m.state.Phase == PhaseReady {
			m.state.Denied = denied
		}
		if changed && r.changed != nil {
			r.changed(m.name)
		}
		r.rescope(m)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	cl, err := cluster.New(cfg, append(slices.Clone(r.opts.ClusterOptions), watched.option())...)
	if err != nil {
		fail(fmt.Errorf("building the member's cluster: %w", err), nil)
		return
	}
	for _, ix := range indexers {
		if err := cl.GetFieldIndexer().IndexField(ctx, ix.obj, ix.field, ix.extract); err != nil {
			fail(fmt.Errorf("indexing %s: %w", ix.field, err), nil)
			return
		}
	}
	clCtx, stop := context.WithCancel(ctx)
	go func() {
		if err := cl.Start(clCtx); err != nil {
			log.Error(err, "Running the member's cache")
		}
	}()
	// The cache is filled before the cluster is engaged: the cluster it replaces serves until
	// then, and the controllers' watches start on a full cache.
	syncCtx, cancel := context.WithTimeout(clCtx, r.opts.SyncTimeout)
	synced := fill(syncCtx, cl)
	cancel()
	if !synced {
		fail(fmt.Errorf("the member's cache did not fill within %v", r.opts.SyncTimeout), stop)
		return
	}
	if err := aware.Engage(clCtx, multicluster.ClusterName(m.name), cl); err != nil {
		fail(err, stop)
		r.mu.Lock()
		defer r.mu.Unlock()
		if m.gen == gen && m.cluster != nil {
			// The controllers may have left the cluster in use for the one that failed: it is
			// engaged again from the start.
			r.disengage(m)
			r.setState(m, State{Phase: PhaseUnknown, Reason: fedv1alpha1.ReasonConnecting, Message: "the hub is connecting to the member again"})
		}
		return
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if m.gen != gen || m.duplicate {
		stop()
		return
	}
	if m.stopCl != nil {
		m.stopCl()
	}
	rescoped := m.cluster != nil
	m.cluster, m.stopCl, m.engaging = cl, stop, false
	m.built, m.watched, m.denied = want, watched, denied
	m.engageErr = ""
	log.Info("Engaged the member", "namespaces", watchedNames(watched), "denied", denied)
	r.setState(m, State{Phase: PhaseReady, Reason: fedv1alpha1.ReasonConnected, Message: "the member answers the hub's health checks"})
	if rescoped && r.changed != nil {
		r.changed(m.name)
	}
	// The scope wanted may have changed while this one was built.
	r.rescope(m)
}

// fill starts the informers of the kinds the hub watches on a member (those its scheme knows)
// and waits for them to sync.
func fill(ctx context.Context, cl cluster.Cluster) bool {
	for _, obj := range []client.Object{&fluxv1alpha2.MiniCluster{}, &corev1.Secret{}} {
		if _, err := apiutil.GVKForObject(obj, cl.GetScheme()); err != nil {
			continue
		}
		if _, err := cl.GetCache().GetInformer(ctx, obj); err != nil {
			return false
		}
	}
	return cl.GetCache().WaitForCacheSync(ctx)
}

// watchedNames is a scope for logs.
func watchedNames(s Scope) any {
	if s.All {
		return "all"
	}
	return s.Namespaces
}

func equalPtr(a, b *int32) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}
