package hub

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/flux"
	"github.com/fluxfed/fluxfed/internal/metrics"
)

// rootMemory is what the hub keeps of one root from one reconcile to the next. All of it can be
// rebuilt from the root's status and the members (after a restart of the hub it is), so that
// forgetting a root is dropping its record, once.
type rootMemory struct {
	mu sync.Mutex
	// probe is the last greeting of the root's lead broker.
	probe *probeResult
	// lead is the lead broker endpoint the children were last given: a root read from a cache
	// that has not caught up with the last status write would report none.
	lead *fluxv1alpha2.LeadBrokerStatus
	// synced is, per member, the member's epoch when everything was last pushed there: after the
	// member was out of sight, the next push reads it live.
	synced map[string]uint64
	// ledger is the root's ledger, as recorded in its status and since; nil until first used.
	ledger *ledger
	// flux is what the root's Flux instance said; nil until the hub first asked it.
	flux *fluxWatch
	// cleanupPending is what the deletion of the root last waited for, as its CleanupPending
	// event told.
	cleanupPending string
	// verdicts are the member owners' policies' last verdicts on the root's bursts, by burst
	// (push.go).
	verdicts map[string]verdict
}

// memory holds the record of every root by UID.
type memory struct{ roots sync.Map }

// of returns root uid's record, made empty the first time.
func (m *memory) of(uid types.UID) *rootMemory {
	if v, ok := m.roots.Load(uid); ok {
		return v.(*rootMemory)
	}
	v, _ := m.roots.LoadOrStore(uid, &rootMemory{synced: map[string]uint64{}})
	return v.(*rootMemory)
}

// peek returns root uid's record if the hub has one.
func (m *memory) peek(uid types.UID) (*rootMemory, bool) {
	v, ok := m.roots.Load(uid)
	if !ok {
		return nil, false
	}
	return v.(*rootMemory), true
}

// forget drops everything the hub kept of root and its series, and stops the follower of its
// Flux instance.
func (r *Reconciler) forget(root *fluxv1alpha2.MiniCluster) {
	if m, ok := r.memory.peek(root.UID); ok {
		m.mu.Lock()
		w := m.flux
		m.mu.Unlock()
		if w != nil {
			w.stopFollowing()
		}
	}
	r.memory.roots.Delete(root.UID)
	r.status.Forget(client.ObjectKeyFromObject(root))
	metrics.ForgetRoot(root.Namespace, root.Name)
}

// lastProbe returns the last greeting of the root's lead broker, if any.
func (m *rootMemory) lastProbe() (probeResult, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.probe == nil {
		return probeResult{}, false
	}
	return *m.probe, true
}

func (m *rootMemory) setProbe(p probeResult) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.probe = &p
}

// updateProbe records next in place of last, unless another greeting was recorded since (a
// reconcile that greeted a new endpoint): the lead prober's answer about an older one must not
// take its place.
func (m *rootMemory) updateProbe(last, next probeResult) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.probe != nil && m.probe.at.Equal(last.at) && m.probe.lead.endpoint == last.lead.endpoint && m.probe.lead.reason == last.lead.reason {
		m.probe = &next
	}
}

// forgetProbe drops the last greeting: the root has no endpoint to greet.
func (m *rootMemory) forgetProbe() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.probe = nil
}

func (m *rootMemory) lastLead() (*fluxv1alpha2.LeadBrokerStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lead, m.lead != nil
}

func (m *rootMemory) setLead(l *fluxv1alpha2.LeadBrokerStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lead = l
}

// waitsFor records what the deletion of the root waits for now, and reports whether that is
// news: the first wait, or a different one.
func (m *rootMemory) waitsFor(pending string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	news := m.cleanupPending != pending
	m.cleanupPending = pending
	return news
}

// syncedEpoch returns member's epoch when everything was last pushed there (0: never).
func (m *rootMemory) syncedEpoch(member string) (uint64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.synced[member]
	return e, ok
}

func (m *rootMemory) setSynced(member string, epoch uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.synced[member] = epoch
}

// ledgerOr returns the root's ledger, made from pushed the first time.
func (m *rootMemory) ledgerOr(pushed []fluxv1alpha2.PushedObject) *ledger {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ledger == nil {
		m.ledger = newLedger(pushed)
	}
	return m.ledger
}

// fluxWatch returns the watch of the root's Flux instance, made the first time.
func (m *rootMemory) fluxWatch() *fluxWatch {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.flux == nil {
		m.flux = &fluxWatch{waiting: map[string]time.Time{}, leaving: map[string]time.Time{}, idle: flux.Idle{}}
	}
	return m.flux
}

// asked reports whether the hub asked the root's Flux instance since it started.
func (m *rootMemory) asked() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.flux != nil
}

// probeResult is the last greeting of a root's lead broker: the root, the lead greeted (its
// endpoint, and where that came from), what the greeting found and when.
type probeResult struct {
	root types.NamespacedName
	lead lead
	err  error
	at   time.Time
}

// fluxWatch is what the hub knows of one root's Flux instance.
type fluxWatch struct {
	// asking is held while the instance is asked: never more than one exec at a time per root.
	asking sync.Mutex

	mu sync.Mutex
	// view is the last answer, nil before the first; err why the last ask failed.
	view *flux.View
	err  error
	// at is when it was last asked, and interval how long until it is asked again: doubled,
	// up to FluxIntervalMax, each time the answer did not change.
	at       time.Time
	interval time.Duration
	// waiting holds, per burst, since when its pods ran while Flux did not see its brokers
	// all online; leaving, since when Flux saw more of its ranks online than it has brokers.
	waiting, leaving map[string]time.Time
	// idle tracks the ranks that run no job; sizes the brokers each burst was given, under
	// on-demand scaling.
	idle  flux.Idle
	sizes map[string]int32
	// stale is set when a scaling step changed the instance since view was read: no step is
	// decided on it again.
	stale bool
	// follower follows the instance's events (fluxstream.go); nil when none runs. woken is set
	// when it told of a change since the last ask: the next reconcile asks. followAt is when
	// another may start after the last one ended, followRetry how long that wait was.
	follower    *follower
	woken       bool
	followAt    time.Time
	followRetry time.Duration
}

// verdict is a member owner's policy's verdict on a burst (nil: allowed), and what it was given.
type verdict struct {
	key verdictKey
	err error
}

// verdictKey is what a verdict depends on: the child, made from the root's spec and its lead
// broker's endpoint, and the MemberCluster's spec.
type verdictKey struct {
	root     int64
	endpoint string
	member   int64
}

// judge returns the verdict on the burst of that name for key: the last one if it was given the same, else
// check's, which is kept.
func (m *rootMemory) judge(name string, key verdictKey, check func() error) error {
	m.mu.Lock()
	v, ok := m.verdicts[name]
	m.mu.Unlock()
	if ok && v.key == key {
		return v.err
	}
	err := check()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.verdicts == nil {
		m.verdicts = map[string]verdict{}
	}
	m.verdicts[name] = verdict{key: key, err: err}
	return err
}
