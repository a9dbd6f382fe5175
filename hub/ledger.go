package hub

import (
	"cmp"
	"slices"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// A ledger is the hub's index of the objects it created, or is about to create, on members for
// one root: where to look for them. It proves nothing: whoever may write the root's status may
// write its status.pushed, where the ledger is persisted. What proves that an object is the
// hub's is the proof it carries (proof.go), checked before anything is changed or deleted; an
// entry whose object does not carry it is dropped, never acted on.
//
// Every object is entered before it is created, and the entry is persisted in status.pushed
// before the create is sent (Reconciler.intend), so that a hub that dies at any moment after a
// create finds the object again. The entry gets the object's UID once the hub has seen it.
//
// A ledger is safe for concurrent use: the members of a root are pushed to at once.
type ledger struct {
	mu      sync.Mutex
	entries map[ledgerKey]ledgerEntry
}

type ledgerKey struct {
	cluster, kind, namespace, name string
}

type ledgerEntry struct {
	// uid is the object's UID as the hub last saw it; empty before that.
	uid string
	// persisted is true when the entry is in the root's status.pushed, as last read or written.
	persisted bool
}

// newLedger returns the ledger recorded in a root's status.
func newLedger(pushed []fluxv1alpha2.PushedObject) *ledger {
	l := &ledger{entries: make(map[ledgerKey]ledgerEntry, len(pushed))}
	for _, p := range pushed {
		l.entries[pushedKey(p)] = ledgerEntry{uid: p.UID, persisted: true}
	}
	return l
}

// keyOf returns the ledger key of obj on member: its kind is a child MiniCluster or a Secret.
func keyOf(member string, obj client.Object) ledgerKey {
	return ledgerKey{member, kindOf(obj), obj.GetNamespace(), obj.GetName()}
}

func pushedKey(p fluxv1alpha2.PushedObject) ledgerKey {
	return ledgerKey{p.Cluster, p.Kind, p.Namespace, p.Name}
}

// intend enters the objects keys name, which the hub is about to create, and reports whether
// one of them is not persisted yet: the root's status must name it before it is created.
func (l *ledger) intend(keys []ledgerKey) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	unpersisted := false
	for _, k := range keys {
		e, ok := l.entries[k]
		if !ok {
			l.entries[k] = ledgerEntry{}
		}
		unpersisted = unpersisted || !e.persisted
	}
	return unpersisted
}

// record notes obj on member, as the hub created or found it with its proof.
func (l *ledger) record(member string, obj client.Object) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := keyOf(member, obj)
	e := l.entries[k]
	e.uid = string(obj.GetUID())
	l.entries[k] = e
}

// drop forgets p: its object is gone, or is not the hub's.
func (l *ledger) drop(p fluxv1alpha2.PushedObject) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.entries, pushedKey(p))
}

// persist notes that the root's status.pushed now holds the entries of pushed.
func (l *ledger) persist(pushed []fluxv1alpha2.PushedObject) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range pushed {
		k := pushedKey(p)
		if e, ok := l.entries[k]; ok {
			e.persisted = true
			l.entries[k] = e
		}
	}
}

// on returns the entries on member.
func (l *ledger) on(member string) []fluxv1alpha2.PushedObject {
	var out []fluxv1alpha2.PushedObject
	for _, p := range l.list() {
		if p.Cluster == member {
			out = append(out, p)
		}
	}
	return out
}

// clusters returns the members the entries are on, sorted.
func (l *ledger) clusters() []string {
	var out []string
	for _, p := range l.list() {
		out = append(out, p.Cluster)
	}
	return slices.Compact(out)
}

// list returns the entries in a stable order, as status.pushed.
func (l *ledger) list() []fluxv1alpha2.PushedObject {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]fluxv1alpha2.PushedObject, 0, len(l.entries))
	for k, e := range l.entries {
		out = append(out, fluxv1alpha2.PushedObject{Cluster: k.cluster, Kind: k.kind, Namespace: k.namespace, Name: k.name, UID: e.uid})
	}
	slices.SortFunc(out, func(a, b fluxv1alpha2.PushedObject) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Namespace, b.Namespace),
			cmp.Compare(a.Name, b.Name), cmp.Compare(a.Kind, b.Kind))
	})
	return out
}

// ledgerOf returns root's ledger: the one kept since the last reconcile, else the one its status
// records (after a restart of the hub).
func (r *Reconciler) ledgerOf(root *fluxv1alpha2.MiniCluster) *ledger {
	return r.memory.of(root.UID).ledgerOr(root.Status.Pushed)
}
