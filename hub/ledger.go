package hub

import (
	"cmp"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// A ledger is the hub's record of the objects it created on members for one root: its proof of
// ownership. Labels and annotations can be written by anyone who may write an object on a
// member, so a child or Secret that carries the root's origin is not enough: it is the root's
// only when its UID, given by the member's API server when the hub created it, is recorded. The
// ledger is persisted in the root's status.pushed, which only the hub writes, and kept in memory
// between reconciles, so that an object created just before a failed status write stays known.
//
// A ledger is safe for concurrent use: the members of a root are pushed to at once.
type ledger struct {
	mu      sync.Mutex
	entries map[ledgerKey]string
}

type ledgerKey struct {
	cluster, kind, namespace, name string
}

// newLedger returns the ledger recorded in a root's status.
func newLedger(pushed []fluxv1alpha2.PushedObject) *ledger {
	l := &ledger{entries: make(map[ledgerKey]string, len(pushed))}
	for _, p := range pushed {
		l.entries[ledgerKey{p.Cluster, p.Kind, p.Namespace, p.Name}] = p.UID
	}
	return l
}

// keyOf returns the ledger key of obj on member: its kind is a child MiniCluster or a Secret.
func keyOf(member string, obj metav1.Object) ledgerKey {
	kind := "MiniCluster"
	if _, ok := obj.(*corev1.Secret); ok {
		kind = "Secret"
	}
	return ledgerKey{member, kind, obj.GetNamespace(), obj.GetName()}
}

// owns reports whether obj on member is the object the hub created: its UID is recorded.
func (l *ledger) owns(member string, obj metav1.Object) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	uid, ok := l.entries[keyOf(member, obj)]
	return ok && uid != "" && uid == string(obj.GetUID())
}

// record notes that the hub created obj on member (or keeps it: recording an owned object
// again changes nothing). An object of the same name recorded before, now gone, is replaced.
func (l *ledger) record(member string, obj metav1.Object) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries[keyOf(member, obj)] = string(obj.GetUID())
}

// drop forgets p, once it is deleted or known to be gone, unless another UID was recorded for
// its name since.
func (l *ledger) drop(p fluxv1alpha2.PushedObject) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := ledgerKey{p.Cluster, p.Kind, p.Namespace, p.Name}
	if uid, ok := l.entries[key]; ok && uid == p.UID {
		delete(l.entries, key)
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

// list returns the entries in a stable order, as status.pushed.
func (l *ledger) list() []fluxv1alpha2.PushedObject {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]fluxv1alpha2.PushedObject, 0, len(l.entries))
	for k, uid := range l.entries {
		out = append(out, fluxv1alpha2.PushedObject{Cluster: k.cluster, Kind: k.kind, Namespace: k.namespace, Name: k.name, UID: uid})
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
	if l, ok := r.ledgers.Load(root.UID); ok {
		return l.(*ledger)
	}
	l, _ := r.ledgers.LoadOrStore(root.UID, newLedger(root.Status.Pushed))
	return l.(*ledger)
}
