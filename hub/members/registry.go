package members

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
)

// This file is the Registry itself: the hub's members as a multicluster-runtime provider, what it
// keeps of each member, and registering (Set) and forgetting (Remove) them.

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
