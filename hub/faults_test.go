package hub_test

// Ownership under faults: the hub killed, or a reply lost, right after each write it makes on a
// member, and records of ownership written by someone else. Whatever happens, the federation
// ends as its spec says: nothing leaked, nothing duplicated, nothing of the hub's refused as
// someone else's, nothing of someone else's touched.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hub"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// errKilled is what every request of a killed hub gets.
var errKilled = errors.New("the hub was killed")

// hubLife is one run of the hub: once it is killed, none of its requests reaches an API server.
type hubLife struct{ killed atomic.Bool }

func (l *hubLife) kill()      { l.killed.Store(true) }
func (l *hubLife) dead() bool { return l != nil && l.killed.Load() }

func (l *hubLife) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if l.dead() {
			return nil, errKilled
		}
		return rt.RoundTrip(req)
	})
}

// faultKind is what happens right after a write that a member committed.
type faultKind int

const (
	noFault faultKind = iota
	// loseReply: the hub gets an error instead of the member's answer.
	loseReply
	// killHub: the hub dies before it hears the answer.
	killHub
)

func (k faultKind) String() string {
	return map[faultKind]string{noFault: "none", loseReply: "reply lost", killHub: "hub killed"}[k]
}

// faults counts the hub's writes to members and strikes after the one it is armed for.
type faults struct {
	mu     sync.Mutex
	kind   faultKind
	target faultTarget
	seen   map[string]int
	writes []faultTarget
	struck chan string
}

// faultTarget names a write: which one (writeOf) and how many of the same came before it, plus
// one.
type faultTarget struct {
	write string
	n     int
}

func newFaults() *faults { return &faults{struck: make(chan string, 1)} }

// arm makes the write target fail as kind says, and forgets the writes counted so far.
func (fs *faults) arm(kind faultKind, target faultTarget) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.kind, fs.target, fs.seen, fs.writes = kind, target, map[string]int{}, nil
}

// counted returns the writes counted since the last arm, in order.
func (fs *faults) counted() []faultTarget {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return slices.Clone(fs.writes)
}

// writeOf names a write by member, method and object, without the namespace, which each run of
// the workload has its own of: "member-a POST secrets", "member-b PATCH miniclusters/burst-b".
func writeOf(member string, req *http.Request) string {
	path := req.URL.Path
	if _, rest, ok := strings.Cut(path, "/namespaces/"); ok {
		if _, object, ok := strings.Cut(rest, "/"); ok {
			path = object
		} else {
			path = "namespaces"
		}
	} else {
		path = path[strings.LastIndex(path, "/")+1:]
	}
	return member + " " + req.Method + " " + path
}

// strike counts a write that member committed, and returns the error the hub gets instead of
// the answer when it is the armed one (killing life first, for killHub).
func (fs *faults) strike(member string, req *http.Request, life *hubLife) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.seen == nil {
		fs.seen = map[string]int{}
	}
	write := writeOf(member, req)
	fs.seen[write]++
	this := faultTarget{write, fs.seen[write]}
	fs.writes = append(fs.writes, this)
	if fs.kind == noFault || this != fs.target {
		return nil
	}
	kind := fs.kind
	fs.kind = noFault
	if kind == killHub {
		life.kill()
	}
	fs.struck <- write
	return fmt.Errorf("fault injected (%s) after the member committed %s %s", kind, req.Method, req.URL.Path)
}

// conflicts records every burst message of the roots of namespace that says Conflict, as the
// hub writes them, until the test ends.
func (f *federation) conflicts(t *testing.T, namespace string) func() []string {
	return f.burstMessages(t, namespace, fluxv1alpha2.ReasonConflict)
}

// burstMessages records every burst message of the roots of namespace that contains substr, as
// the hub writes them, until the test ends.
func (f *federation) burstMessages(t *testing.T, namespace, substr string) func() []string {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	wc, err := client.NewWithWatch(f.hub.Config, client.Options{Scheme: f.hub.Scheme})
	require.NoError(t, err)
	w, err := wc.Watch(ctx, &fluxv1alpha2.MiniClusterList{}, client.InNamespace(namespace))
	require.NoError(t, err)
	var mu sync.Mutex
	var seen []string
	go func() {
		for e := range w.ResultChan() {
			mc, ok := e.Object.(*fluxv1alpha2.MiniCluster)
			if !ok {
				continue
			}
			for _, b := range mc.Status.Bursts {
				if strings.Contains(b.Message, substr) {
					mu.Lock()
					seen = append(seen, mc.Name+"/"+b.Name+": "+b.Message)
					mu.Unlock()
				}
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// proven reports whether obj carries a proof of the hub's: the tests' planted objects do not.
func proven(obj client.Object) bool { return obj.GetAnnotations()[fluxv1alpha2.AnnotationProof] != "" }

// pushedOf lists what the hub made on every member in namespace, by "member Kind name".
func (f *federation) pushedOf(t require.TestingT, namespace string) map[string]client.Object {
	out := map[string]client.Object{}
	for name, m := range f.members {
		var children fluxv1alpha2.MiniClusterList
		var secrets corev1.SecretList
		sel := client.MatchingLabels{fluxv1alpha2.LabelOriginHub: hubName}
		require.NoError(t, m.env.Client.List(context.Background(), &children, client.InNamespace(namespace), sel))
		require.NoError(t, m.env.Client.List(context.Background(), &secrets, client.InNamespace(namespace), sel))
		// What carries the hub's labels but no proof is someone else's, planted: not the hub's.
		for i := range children.Items {
			if proven(&children.Items[i]) {
				out[name+" MiniCluster "+children.Items[i].Name] = &children.Items[i]
			}
		}
		for i := range secrets.Items {
			if proven(&secrets.Items[i]) {
				out[name+" Secret "+secrets.Items[i].Name] = &secrets.Items[i]
			}
		}
	}
	return out
}

// requireAsSpecified checks that the federation of root (nil: deleted) is exactly as its spec
// says: on the members, a child and its CURVE Secret for each burst that runs, made for this
// root, of the burst's size, and nothing else of the hub's in namespace; on the root, every burst
// applied and status.pushed naming exactly those objects with their UIDs.
func (f *federation) requireAsSpecified(c require.TestingT, namespace string, root *fluxv1alpha2.MiniCluster) {
	want := map[string]int32{}
	if root != nil {
		for _, b := range root.Spec.Flux.Bursting.Clusters {
			if b.Cluster != "" && b.Size > 0 {
				want[b.Cluster+" MiniCluster "+b.Name] = b.Size
				want[b.Cluster+" Secret "+b.Name+names.CurveSecretSuffix] = b.Size
			}
		}
	}
	got := f.pushedOf(c, namespace)
	require.ElementsMatch(c, sets.List(sets.KeySet(want)), sets.List(sets.KeySet(got)), "what the hub keeps on the members")
	if root == nil {
		return
	}
	var pushed []string
	for _, p := range root.Status.Pushed {
		obj, ok := got[p.Cluster+" "+p.Kind+" "+p.Name]
		require.True(c, ok, "status.pushed names %s %s on %s, which is not there", p.Kind, p.Name, p.Cluster)
		require.Equal(c, string(obj.GetUID()), p.UID, "status.pushed has the UID of %s %s", p.Kind, p.Name)
		pushed = append(pushed, p.Cluster+" "+p.Kind+" "+p.Name)
	}
	require.ElementsMatch(c, sets.List(sets.KeySet(want)), pushed, "status.pushed")
	for key, obj := range got {
		origin, ok := fluxv1alpha2.OriginOf(obj)
		require.True(c, ok)
		require.Equal(c, root.UID, origin.UID, "%s was made for this root", key)
		if mc, ok := obj.(*fluxv1alpha2.MiniCluster); ok {
			require.Equal(c, want[key], mc.Spec.Size, "%s has its burst's size", key)
		}
	}
	for _, b := range root.Spec.Flux.Bursting.Clusters {
		s := burstStatus(root, b.Name)
		require.NotNil(c, s, "burst %s is reported", b.Name)
		require.Equal(c, fluxv1alpha2.BurstApplied, s.Phase, "burst %s: %s", b.Name, s.Message)
	}
}

// faultStep is one change of the fault workload.
type faultStep struct {
	name string
	do   func(t *testing.T, f *federation, root *fluxv1alpha2.MiniCluster)
}

// faultWorkload creates a root that bursts onto both members, resizes a burst, moves the other
// burst to the first member, and deletes the root: every kind of write the hub makes on a
// member (namespace, child and Secret creates, applies and the claims before them, deletes).
var faultWorkload = []faultStep{
	{"create", func(t *testing.T, f *federation, root *fluxv1alpha2.MiniCluster) {
		require.NoError(t, f.hub.Client.Create(context.Background(), root))
	}},
	{"resize", func(t *testing.T, f *federation, root *fluxv1alpha2.MiniCluster) {
		f.edit(t, root, func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Flux.Bursting.Clusters[0].Size = 3 })
	}},
	{"move", func(t *testing.T, f *federation, root *fluxv1alpha2.MiniCluster) {
		f.edit(t, root, func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Flux.Bursting.Clusters[1].Cluster = "member-a" })
	}},
	{"delete", func(t *testing.T, f *federation, root *fluxv1alpha2.MiniCluster) {
		require.NoError(t, f.hub.Client.Delete(context.Background(), root))
	}},
}

// runFaultWorkload runs faultWorkload in a namespace of its own, the fault armed at the write
// target; after a kill it starts the hub again, with nothing of the dead one's memory. It
// returns the write the fault struck on ("" if that write did not happen in this run) and how
// long after the fault the federation was as specified again.
func (f *federation) runFaultWorkload(t *testing.T, kind faultKind, target faultTarget) (string, time.Duration) {
	t.Helper()
	ns := f.namespace(t)
	conflicts := f.conflicts(t, ns)
	root := newRoot(ns, "faulty",
		fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 2, MaxSize: 3},
		fluxv1alpha2.Burst{Name: "burst-b", Cluster: "member-b", Size: 1})
	f.faults.arm(kind, target)
	var struck string
	var recovery time.Duration
	var struckAt time.Time
	for _, step := range faultWorkload {
		step.do(t, f, root)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			if struck == "" {
				select {
				case struck = <-f.faults.struck:
					struckAt = time.Now()
					if kind == killHub {
						f.killHub()
						f.startHub(t)
					}
				default:
				}
			}
			current := &fluxv1alpha2.MiniCluster{}
			err := f.hub.Client.Get(context.Background(), client.ObjectKeyFromObject(root), current)
			if step.name == "delete" {
				require.True(c, apierrors.IsNotFound(err), "the root is gone")
				current = nil
			} else {
				require.NoError(c, err)
			}
			f.requireAsSpecified(c, ns, current)
		}, 2*wait, tick, "after step %s, with the fault (%s) at %v (%s)", step.name, kind, target, struck)
		if struck != "" && recovery == 0 {
			recovery = time.Since(struckAt)
		}
	}
	require.Empty(t, conflicts(), "no false Conflict")
	return struck, recovery
}

// TestOwnershipSurvivesAKillOrALostReplyAfterEveryWrite runs the fault workload once without a
// fault, to see the hub's writes to members, then once for each of those writes with the hub
// killed right after the member committed it, and once with the reply lost instead. (A write of
// the first run may not happen in another. Every kind of write must have been struck.) Every run must end as the spec
// says; the time each took to get there after the fault is printed.
func TestOwnershipSurvivesAKillOrALostReplyAfterEveryWrite(t *testing.T) {
	f := startFederation(t, hub.Options{SweepInterval: time.Second}, "member-a", "member-b")
	f.runFaultWorkload(t, noFault, faultTarget{})
	writes := f.faults.counted()
	var names []string
	for _, w := range writes {
		names = append(names, fmt.Sprintf("%s (%d)", w.write, w.n))
	}
	t.Logf("the workload makes %d writes on members:\n  %s", len(writes), strings.Join(names, "\n  "))

	for _, kind := range []faultKind{killHub, loseReply} {
		var report []string
		var worst time.Duration
		kinds := sets.New[string]()
		for i, target := range writes {
			struck, took := f.runFaultWorkload(t, kind, target)
			if struck == "" {
				report = append(report, fmt.Sprintf("%2d  %-45s (not made in this run)", i+1, names[i]))
				continue
			}
			worst = max(worst, took)
			kinds.Insert(writeKind(struck))
			report = append(report, fmt.Sprintf("%2d  %-45s %v", i+1, names[i], took.Round(10*time.Millisecond)))
		}
		t.Logf("%s after each write: as specified again within %v of the fault\n  %s", kind, worst.Round(10*time.Millisecond),
			strings.Join(report, "\n  "))
		// Every kind of write the workload makes was struck. (A Secret is never patched: it is
		// created, and its fields are claimed as applied only before an apply changes it.)
		made := sets.New[string]()
		for _, w := range writes {
			made.Insert(writeKind(w.write))
		}
		require.True(t, made.IsSuperset(sets.New("POST namespaces", "POST miniclusters", "POST secrets", "PATCH miniclusters",
			"DELETE miniclusters", "DELETE secrets")), "the workload makes every kind of write: %v", sets.List(made))
		for _, want := range sets.List(made) {
			require.True(t, kinds.Has(want), "%s struck after %s; it struck after %v", kind, want, sets.List(kinds))
		}
	}
}

// writeKind names a write as writeOf does ("member-a PATCH secrets/burst-a-curve") by its method
// and resource ("PATCH secrets").
func writeKind(write string) string {
	fields := strings.Fields(write)
	resource, _, _ := strings.Cut(fields[2], "/")
	return fields[1] + " " + resource
}

// TestAStatusThatCannotBeWrittenHoldsBackEveryCreate denies the hub's status writes in one
// namespace, as an admission policy of the hub's administrators might: the hub cannot record
// what it is about to create, so it creates nothing there, and leaks nothing when the root goes.
// Once the policy is lifted the root bursts.
func TestAStatusThatCannotBeWrittenHoldsBackEveryCreate(t *testing.T) {
	f := startFederation(t, hub.Options{}, "member-a", "member-b")
	ctx := context.Background()
	ns := f.namespace(t)
	policy := denyStatusWrites(t, f, ns)
	root := newRoot(ns, "unrecorded", fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 1})
	require.NoError(t, f.hub.Client.Create(ctx, root))
	// The member reconciler on the hub makes the root's CURVE Secret; the hub would push next.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, f.hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: names.CurveSecretName(root)}, &corev1.Secret{}))
	}, wait, tick)
	time.Sleep(2 * time.Second)
	require.Empty(t, f.pushedOf(t, ns), "nothing is created that could not be recorded first")

	policy()
	require.EventuallyWithT(t, func(c *assert.CollectT) { f.requireAsSpecified(c, ns, f.root(c, root)) }, wait, tick)
	require.NoError(t, f.hub.Client.Delete(ctx, root))
	require.EventuallyWithT(t, func(c *assert.CollectT) { f.requireAsSpecified(c, ns, nil) }, wait, tick)
}

// denyStatusWrites makes the hub's API server refuse updates of miniclusters/status in
// namespace, with a ValidatingAdmissionPolicy, and returns what lifts the refusal.
func denyStatusWrites(t *testing.T, f *federation, namespace string) func() {
	t.Helper()
	ctx := context.Background()
	name := "deny-status-" + namespace
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{fluxv1alpha2.GroupName}, APIVersions: []string{"*"},
						Resources: []string{"miniclusters/status"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "status writes are denied in this namespace"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: namespace}}},
		},
	}
	require.NoError(t, f.hub.Client.Create(ctx, policy))
	require.NoError(t, f.hub.Client.Create(ctx, binding))
	// The API server takes up a new policy within a second or so: wait until it refuses. Only
	// the policy's refusal counts: the reconcilers write the new probe's status too, and a
	// Conflict with them would pass for it while the policy is not in force yet.
	probe := newRoot(namespace, "probe")
	require.NoError(t, f.hub.Client.Create(ctx, probe))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		current := f.root(c, probe)
		current.Status.BurstSummary = "0/0"
		require.ErrorContains(c, f.hub.Client.Status().Update(ctx, current), "status writes are denied in this namespace")
	}, wait, tick)
	require.NoError(t, f.hub.Client.Delete(ctx, probe))
	return func() {
		require.NoError(t, f.hub.Client.Delete(ctx, binding))
		require.NoError(t, f.hub.Client.Delete(ctx, policy))
	}
}

// TestAForgedRecordNeverLeadsToAWriteOrDelete writes, as a hub user who may write a root's
// status (a wildcard role grants that), the UIDs of someone else's objects into the root's
// status.pushed, and, as a hub administrator might by mistake, into a MemberCluster's
// status.orphans; then restarts the hub, deletes the root and sweeps. The objects are never
// written or deleted.
func TestAForgedRecordNeverLeadsToAWriteOrDelete(t *testing.T) {
	f := startFederation(t, hub.Options{}, "member-a", "member-b")
	ctx := context.Background()
	ns := f.namespace(t)
	a := f.members["member-a"]
	require.NoError(t, a.env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	payroll := someoneElses(t, a, ns, "payroll", nil, nil)
	password := someoneElsesSecret(t, a, ns, "db-password", nil, nil)
	// One of them even carries the labels the hub puts on what it pushes for the root.
	forgedLabels := map[string]string{fluxv1alpha2.LabelOriginHub: hubName, fluxv1alpha2.LabelOriginNamespace: ns, fluxv1alpha2.LabelOriginName: "forger"}
	labelled := someoneElsesSecret(t, a, ns, "burst-b-curve", forgedLabels, nil)

	root := newRoot(ns, "forger", fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 1})
	require.NoError(t, f.hub.Client.Create(ctx, root))
	f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstApplied)
	conflicts := f.conflicts(t, ns)

	forged := f.root(t, root)
	for _, obj := range []client.Object{payroll, password, labelled} {
		kind := "MiniCluster"
		if _, ok := obj.(*corev1.Secret); ok {
			kind = "Secret"
		}
		forged.Status.Pushed = append(forged.Status.Pushed, fluxv1alpha2.PushedObject{
			Cluster: "member-a", Kind: kind, Namespace: ns, Name: obj.GetName(), UID: string(obj.GetUID())})
	}
	require.NoError(t, f.hub.Client.Status().Update(ctx, forged), "a hub user with write access to miniclusters/status")
	mcl := f.memberCluster(t, "member-a")
	mcl.Status.Orphans = append(mcl.Status.Orphans, fedv1alpha1.OrphanObject{Kind: "MiniCluster", Namespace: ns, Name: payroll.Name, UID: string(payroll.UID)},
		fedv1alpha1.OrphanObject{Kind: "Secret", Namespace: ns, Name: password.Name, UID: string(password.UID)})
	require.NoError(t, f.hub.Client.Status().Update(ctx, mcl))

	// A restarted hub starts from what the statuses say.
	f.stopHub()
	f.startHub(t)
	f.waitMemberReady(t, "member-a")
	// Moving the burst to a size that keeps it, and the restarted hub's reconcile, read the
	// forged entries; the hub drops them without acting on them.
	f.edit(t, root, func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Logging.Quiet = !mc.Spec.Logging.Quiet })
	require.EventuallyWithT(t, func(c *assert.CollectT) { f.requireAsSpecified(c, ns, f.root(c, root)) }, wait, tick)
	deleted, err := f.reconc.Sweep(ctx)
	require.NoError(t, err)
	require.Empty(t, deleted)
	require.NoError(t, f.hub.Client.Delete(ctx, root))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, apierrors.IsNotFound(f.hub.Client.Get(ctx, client.ObjectKeyFromObject(root), &fluxv1alpha2.MiniCluster{})))
	}, wait, tick)
	deleted, err = f.reconc.Sweep(ctx)
	require.NoError(t, err)
	require.Empty(t, deleted)
	require.Empty(t, f.memberCluster(t, "member-a").Status.Orphans, "the forged orphans are dropped")
	for _, obj := range []client.Object{payroll, password, labelled} {
		requireUntouched(t, a, obj)
	}
	require.Empty(t, conflicts())
}

// TestARootCreatedAgainUnderItsNameReplacesWhatTheEarlierOneLeft deletes a root while the hub is
// down and without its cleanup (its finalizer taken off by hand), creates a root of the same name
// and starts the hub: the children the earlier root left are deleted, the new root's are created,
// and no burst is ever reported Conflict.
func TestARootCreatedAgainUnderItsNameReplacesWhatTheEarlierOneLeft(t *testing.T) {
	f := startFederation(t, hub.Options{}, "member-a", "member-b")
	// What the earlier root and its children made (on the hub its CURVE Secret and lead broker
	// Service, on the members the children's Jobs and ConfigMaps) goes with them, as on a real
	// cluster.
	f.hub.RunControllers(t, "garbagecollector")
	for _, m := range f.members {
		m.env.RunControllers(t, "garbagecollector")
	}
	ctx := context.Background()
	ns := f.namespace(t)
	conflicts := f.conflicts(t, ns)
	replaced := f.burstMessages(t, ns, "was left by an earlier root")
	first := newRoot(ns, "again",
		fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 1},
		fluxv1alpha2.Burst{Name: "burst-b", Cluster: "member-b", Size: 1})
	require.NoError(t, f.hub.Client.Create(ctx, first))
	require.EventuallyWithT(t, func(c *assert.CollectT) { f.requireAsSpecified(c, ns, f.root(c, first)) }, wait, tick)
	left := f.pushedOf(t, ns)

	f.stopHub()
	f.edit(t, first, func(mc *fluxv1alpha2.MiniCluster) { mc.Finalizers = nil })
	require.NoError(t, f.hub.Client.Delete(ctx, first))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := f.hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: names.CurveSecretName(first)}, &corev1.Secret{})
		require.True(c, apierrors.IsNotFound(err), "the earlier root's own objects are collected")
		var services corev1.ServiceList
		require.NoError(c, f.hub.Client.List(ctx, &services, client.InNamespace(ns)))
		require.Empty(c, services.Items)
	}, wait, tick)
	second := newRoot(ns, "again",
		fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 2},
		fluxv1alpha2.Burst{Name: "burst-b", Cluster: "member-b", Size: 1})
	require.EventuallyWithT(t, func(c *assert.CollectT) { require.NoError(c, f.hub.Client.Create(ctx, second)) }, wait, tick)
	f.startHub(t)
	require.EventuallyWithT(t, func(c *assert.CollectT) { f.requireAsSpecified(c, ns, f.root(c, second)) }, wait, tick)
	for key, obj := range f.pushedOf(t, ns) {
		require.NotEqual(t, left[key].GetUID(), obj.GetUID(), "%s was made again for the new root", key)
	}
	require.Empty(t, conflicts(), "what an earlier root of the name left is no Conflict")
	require.NotEmpty(t, replaced(), "the bursts waited while the earlier root's children were deleted")
	t.Logf("while the earlier root's children went: %s", replaced()[0])
}

// TestTheOwnershipKeyIsKeptAndNeverReplaced follows the hub's key: created on the first start,
// put back when deleted while the hub runs, never overwritten when it holds no usable key (the
// hub then pushes nothing), and, replaced by another while the hub was stopped, it recognises
// nothing it created before, as docs/security.md says.
func TestTheOwnershipKeyIsKeptAndNeverReplaced(t *testing.T) {
	f := startFederation(t, hub.Options{SweepInterval: time.Second}, "member-a", "member-b")
	ctx := context.Background()
	ns := f.namespace(t)
	root := newRoot(ns, "keyed", fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 1})
	require.NoError(t, f.hub.Client.Create(ctx, root))
	f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstApplied)

	keyName := client.ObjectKey{Namespace: membersNamespace, Name: hub.DefaultOwnershipKeySecret}
	key := &corev1.Secret{}
	require.NoError(t, f.hub.Client.Get(ctx, keyName, key))
	require.Len(t, key.Data["key"], 32)
	require.True(t, ptr.Deref(key.Immutable, false), "a key is never changed in place")
	original := key.Data["key"]

	// Deleted while the hub runs: put back, with the same key, at the next sweep.
	require.NoError(t, f.hub.Client.Delete(ctx, key))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		back := &corev1.Secret{}
		require.NoError(c, f.hub.Client.Get(ctx, keyName, back))
		require.Equal(c, original, back.Data["key"])
	}, wait, tick)

	// setKey replaces the key while the hub is stopped, then starts it and changes the root.
	setKey := func(data []byte) {
		f.stopHub()
		require.NoError(t, f.hub.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: keyName.Namespace, Name: keyName.Name}}))
		require.NoError(t, f.hub.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: keyName.Namespace, Name: keyName.Name},
			Data: map[string][]byte{"key": data}}))
		f.startHub(t)
		f.waitMemberReady(t, "member-a")
		f.edit(t, root, func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Logging.Quiet = !mc.Spec.Logging.Quiet })
	}
	childQuiet := func(c require.TestingT) bool { return f.members["member-a"].child(c, ns, "burst-a").Spec.Logging.Quiet }

	// A key too short to be one: never overwritten, and nothing is pushed with it.
	setKey([]byte("short"))
	time.Sleep(2 * time.Second)
	require.NotEqual(t, f.root(t, root).Spec.Logging.Quiet, childQuiet(t), "nothing is pushed without a usable key")
	require.NoError(t, f.hub.Client.Get(ctx, keyName, key))
	require.Equal(t, "short", string(key.Data["key"]), "the Secret is left for its administrator to mend")

	// Another key: everything the hub created before is no longer recognised as its own.
	setKey([]byte(strings.Repeat("k", 32)))
	failed := f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstFailed)
	require.Contains(t, failed.Message, fluxv1alpha2.ReasonConflict)

	// The original key back: the child is the hub's again, and is updated.
	setKey(original)
	f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstApplied)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, f.root(c, root).Spec.Logging.Quiet, childQuiet(c))
	}, wait, tick)
}
