// Package chaos kills the hub at random moments while roots are created, resized, moved and
// deleted on a fleet (e2e/fleet), and reports whether the federation stays as its specs say:
// objects leaked on members, bursts with more than one child, Conflicts reported for what is the
// hub's own, and how long the fleet takes to be consistent again. `make chaos` runs it with 100
// kills (e2e/cmd/chaos); an e2e test runs a few.
package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/e2e/fleet"
	"github.com/fluxfed/fluxfed/internal/text"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// Options configure a run.
type Options struct {
	// Kills is how many times the hub is killed.
	Kills int
	// Roots is how many roots the workload keeps changing (root-0 ... root-N-1, each created and
	// deleted again and again under its name).
	Roots int
	// Seed makes the run's choices repeatable (the moments still depend on the machine).
	Seed uint64
	// Namespace holds the roots on the hub and, by default, their children on the members.
	Namespace string
	// Uptime bounds how long the hub runs between kills: each kill comes at a moment drawn
	// uniformly between a tenth of it and all of it after the hub was ready.
	Uptime time.Duration
	// Change is the mean time between two changes of the workload.
	Change time.Duration
	// SettleEvery is how many kills go by between two settle checks: the workload pauses, the
	// hub runs, and the fleet must become consistent within SettleTimeout.
	SettleEvery   int
	SettleTimeout time.Duration
	// Logf reports progress; silent when nil.
	Logf func(format string, args ...any)
}

func (o *Options) complete() {
	if o.Roots == 0 {
		o.Roots = 6
	}
	if o.Namespace == "" {
		o.Namespace = "chaos"
	}
	if o.Uptime == 0 {
		o.Uptime = 3 * time.Second
	}
	if o.Change == 0 {
		o.Change = 300 * time.Millisecond
	}
	if o.SettleEvery == 0 {
		o.SettleEvery = 10
	}
	if o.SettleTimeout == 0 {
		o.SettleTimeout = 3 * time.Minute
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

// Report is what a run found.
type Report struct {
	// Kills and Changes count what was done to the fleet.
	Kills, Changes int
	// Settles are the settle checks, in order; the last one follows the last kill.
	Settles []Settle
	// Conflicts are the distinct Conflict messages the hub reported on a root at any moment:
	// every object in the way of a root here is the hub's own, so each one is false.
	Conflicts []string
	// Cleanup is the check after every root was deleted: nothing of the hub's may be left.
	Cleanup Settle
	// Took is how long the run took.
	Took time.Duration
}

// Settle is one check of the fleet: consistent, or what was still wrong at its timeout.
type Settle struct {
	// After is the number of kills before the check.
	After int
	// Consistent is true when the fleet was as the specs say within the timeout; Took is how
	// long that took from the moment the workload paused.
	Consistent bool
	Took       time.Duration
	// What was wrong at the last look: objects of the hub's on a member that no root wants
	// (Leaked), bursts with a child on more than one member or namespace (Duplicated), objects
	// a root wants that are missing or not reported as running (Missing).
	Leaked, Duplicated, Missing []string
}

// Failed reports whether the run found something wrong.
func (r Report) Failed() bool {
	if len(r.Conflicts) > 0 || !r.Cleanup.Consistent {
		return true
	}
	for _, s := range r.Settles {
		if !s.Consistent {
			return true
		}
	}
	return false
}

// String is the report as `make chaos` prints it.
func (r Report) String() string {
	var b strings.Builder
	consistent := 0
	// An object found leaked at several checks is one object leaked.
	leaked, duplicated := map[string]bool{}, map[string]bool{}
	var took []time.Duration
	for _, s := range append(slices.Clone(r.Settles), r.Cleanup) {
		for _, l := range s.Leaked {
			leaked[l] = true
		}
		for _, d := range s.Duplicated {
			duplicated[d] = true
		}
	}
	for _, s := range r.Settles {
		if s.Consistent {
			consistent++
			took = append(took, s.Took)
		}
	}
	fmt.Fprintf(&b, "%d kills of the hub, %d changes to the roots, in %v\n", r.Kills, r.Changes, r.Took.Round(time.Second))
	fmt.Fprintf(&b, "settle checks consistent: %d of %d", consistent, len(r.Settles))
	if len(took) > 0 {
		slices.Sort(took)
		fmt.Fprintf(&b, "; time to consistent after the workload paused: median %v, max %v",
			took[len(took)/2].Round(10*time.Millisecond), took[len(took)-1].Round(10*time.Millisecond))
	}
	fmt.Fprintf(&b, "\nobjects leaked: %d, bursts duplicated: %d, false Conflicts: %d\n", len(leaked), len(duplicated), len(r.Conflicts))
	fmt.Fprintf(&b, "after deleting every root: %s\n", r.Cleanup.summary())
	for i, s := range append(slices.Clone(r.Settles), r.Cleanup) {
		if s.Consistent {
			continue
		}
		when := fmt.Sprintf("after %d kills", s.After)
		if i == len(r.Settles) {
			when = "after deleting every root"
		}
		fmt.Fprintf(&b, "%s, not consistent within the timeout:\n", when)
		for _, l := range [][]string{s.Leaked, s.Duplicated, s.Missing} {
			for _, line := range l {
				fmt.Fprintf(&b, "  %s\n", line)
			}
		}
	}
	for _, c := range r.Conflicts {
		fmt.Fprintf(&b, "false Conflict: %s\n", c)
	}
	return b.String()
}

func (s Settle) summary() string {
	if s.Consistent {
		return fmt.Sprintf("nothing left on the members, %v after the deletes", s.Took.Round(10*time.Millisecond))
	}
	return text.Count(len(s.Leaked), "object", "objects") + " left"
}

// run is one run's state.
type run struct {
	f    *fleet.Fleet
	opts Options
	// rand draws the kills' moments; work draws the changes (one goroutine each).
	rand, work *rand.Rand
	hub        client.Client
	// members are the fleet's member names.
	members []string

	mu        sync.Mutex
	conflicts map[string]bool
}

// Run runs the chaos on f and returns what it found; an error means the run itself could not go
// on (the fleet broke), not that the federation was found inconsistent.
func Run(ctx context.Context, f *fleet.Fleet, opts Options) (Report, error) {
	opts.complete()
	start := time.Now()
	r := &run{f: f, opts: opts, rand: rand.New(rand.NewPCG(opts.Seed, 1)), work: rand.New(rand.NewPCG(opts.Seed, 2)),
		hub: f.Clients["hub"], conflicts: map[string]bool{}}
	for _, m := range f.Members {
		r.members = append(r.members, m.Name)
	}
	var report Report
	if err := r.hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opts.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return report, err
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if err := r.watchConflicts(watchCtx); err != nil {
		return report, err
	}

	for report.Kills < opts.Kills {
		// The workload changes the roots while the hub runs and is killed, SettleEvery times.
		workCtx, pause := context.WithCancel(ctx)
		changes := make(chan int, 1)
		go func() { changes <- r.changes(workCtx) }()
		var err error
		for n := 0; n < opts.SettleEvery && report.Kills < opts.Kills && err == nil; n++ {
			uptime := time.Duration(float64(opts.Uptime) * (0.1 + 0.9*r.rand.Float64()))
			select {
			case <-ctx.Done():
				err = ctx.Err()
			case <-time.After(uptime):
			}
			if err == nil {
				err = r.killAndRestart(ctx)
				report.Kills++
			}
		}
		pause()
		report.Changes += <-changes
		if err != nil {
			return report, err
		}
		s, err := r.settle(ctx, report.Kills)
		if err != nil {
			return report, err
		}
		opts.Logf("after %d kills: %s", report.Kills, s.line())
		report.Settles = append(report.Settles, s)
	}

	// Every root goes: nothing of the hub's may be left on the members.
	for i := range opts.Roots {
		if err := client.IgnoreNotFound(r.hub.Delete(ctx, &fluxv1alpha2.MiniCluster{ObjectMeta: metav1.ObjectMeta{
			Namespace: opts.Namespace, Name: rootName(i)}})); err != nil {
			return report, err
		}
	}
	cleanup, err := r.settle(ctx, report.Kills)
	if err != nil {
		return report, err
	}
	report.Cleanup = cleanup
	stopWatch()
	r.mu.Lock()
	for c := range r.conflicts {
		report.Conflicts = append(report.Conflicts, c)
	}
	r.mu.Unlock()
	sort.Strings(report.Conflicts)
	report.Took = time.Since(start)
	return report, nil
}

func (s Settle) line() string {
	if s.Consistent {
		return fmt.Sprintf("consistent in %v", s.Took.Round(10*time.Millisecond))
	}
	return fmt.Sprintf("NOT consistent: %d leaked, %d duplicated, %d missing", len(s.Leaked), len(s.Duplicated), len(s.Missing))
}

// killAndRestart kills the hub's manager and starts it again at once.
func (r *run) killAndRestart(ctx context.Context) error {
	if err := r.f.KillHub(); err != nil {
		return fmt.Errorf("killing the hub: %w", err)
	}
	if err := r.f.StartHub(ctx); err != nil {
		return fmt.Errorf("starting the hub again: %w", err)
	}
	return nil
}

func rootName(i int) string { return fmt.Sprintf("root-%d", i) }

// changes changes the roots until ctx ends, and returns how many changes it made. A change that
// the API server refuses (a conflict with the controllers' writes) is simply not counted.
func (r *run) changes(ctx context.Context) int {
	n := 0
	for {
		wait := time.Duration(float64(r.opts.Change) * 2 * r.work.Float64())
		select {
		case <-ctx.Done():
			return n
		case <-time.After(wait):
		}
		if r.change(ctx) == nil {
			n++
		}
	}
}

// change makes one random change: creates a root that is not there, or resizes, moves or
// deletes one that is.
func (r *run) change(ctx context.Context) error {
	name := rootName(r.work.IntN(r.opts.Roots))
	root := &fluxv1alpha2.MiniCluster{}
	err := r.hub.Get(ctx, client.ObjectKey{Namespace: r.opts.Namespace, Name: name}, root)
	switch {
	case apierrors.IsNotFound(err):
		return r.hub.Create(ctx, r.newRoot(name))
	case err != nil:
		return err
	case !root.DeletionTimestamp.IsZero():
		return errors.New("being deleted")
	}
	switch r.work.IntN(10) {
	case 0:
		return r.hub.Delete(ctx, root)
	case 1, 2, 3:
		return r.edit(ctx, root, func(mc *fluxv1alpha2.MiniCluster) {
			b := &mc.Spec.Flux.Bursting.Clusters[r.work.IntN(2)]
			b.Size = r.work.Int32N(b.Reserved() + 1)
		})
	case 4, 5, 6:
		return r.edit(ctx, root, func(mc *fluxv1alpha2.MiniCluster) {
			b := &mc.Spec.Flux.Bursting.Clusters[r.work.IntN(2)]
			b.Cluster = r.members[r.work.IntN(len(r.members))]
		})
	default:
		return r.edit(ctx, root, func(mc *fluxv1alpha2.MiniCluster) {
			b := &mc.Spec.Flux.Bursting.Clusters[r.work.IntN(2)]
			b.Namespace = []string{"", r.opts.Namespace + "-b"}[r.work.IntN(2)]
		})
	}
}

// newRoot is a root of two brokers with two bursts of up to two brokers each, named after it:
// the children of roots of one namespace share the member namespaces.
func (r *run) newRoot(name string) *fluxv1alpha2.MiniCluster {
	return v1alpha2test.MiniCluster(name).Namespace(r.opts.Namespace).Size(2).
		Image("ghcr.io/converged-computing/metric-lammps:latest").Command("lmp -in in.reaxc.hns").
		Bursts(fluxv1alpha2.Burst{Name: name + "-a", Cluster: r.members[0], Size: 1 + r.work.Int32N(2), MaxSize: 2},
			fluxv1alpha2.Burst{Name: name + "-b", Cluster: r.members[len(r.members)-1], Size: r.work.Int32N(3), MaxSize: 2}).Obj()
}

func (r *run) edit(ctx context.Context, root *fluxv1alpha2.MiniCluster, change func(*fluxv1alpha2.MiniCluster)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		mc := &fluxv1alpha2.MiniCluster{}
		if err := r.hub.Get(ctx, client.ObjectKeyFromObject(root), mc); err != nil {
			return err
		}
		change(mc)
		return r.hub.Update(ctx, mc)
	})
}

// watchConflicts records every burst message that says Conflict on the roots, until ctx ends.
func (r *run) watchConflicts(ctx context.Context) error {
	wc, err := client.NewWithWatch(r.f.Config("hub"), client.Options{Scheme: r.hub.Scheme()})
	if err != nil {
		return err
	}
	w, err := wc.Watch(ctx, &fluxv1alpha2.MiniClusterList{}, client.InNamespace(r.opts.Namespace))
	if err != nil {
		return err
	}
	go func() {
		defer w.Stop()
		for e := range w.ResultChan() {
			mc, ok := e.Object.(*fluxv1alpha2.MiniCluster)
			if !ok {
				continue
			}
			for _, b := range mc.Status.Bursts {
				if strings.Contains(b.Message, fluxv1alpha2.ReasonConflict) {
					r.mu.Lock()
					r.conflicts[mc.Name+"/"+b.Name+": "+b.Message] = true
					r.mu.Unlock()
				}
			}
		}
	}()
	return nil
}

// settle waits, with the workload paused, until the fleet is consistent or SettleTimeout passed.
func (r *run) settle(ctx context.Context, kills int) (Settle, error) {
	start := time.Now()
	for {
		s, err := r.check(ctx)
		if err != nil {
			return s, err
		}
		s.After, s.Took = kills, time.Since(start)
		if s.Consistent || s.Took > r.opts.SettleTimeout {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// check compares what the members hold of the hub's with what the roots' specs want.
func (r *run) check(ctx context.Context) (Settle, error) {
	var s Settle
	var roots fluxv1alpha2.MiniClusterList
	if err := r.hub.List(ctx, &roots, client.InNamespace(r.opts.Namespace)); err != nil {
		return s, err
	}
	// want holds every object the live roots want: "member kind namespace/name" -> root UID.
	want := map[string]string{}
	for i := range roots.Items {
		root := &roots.Items[i]
		pushed := map[string]string{}
		for _, p := range root.Status.Pushed {
			pushed[p.Cluster+" "+p.Kind+" "+p.Namespace+"/"+p.Name] = p.UID
		}
		for _, b := range root.Spec.Flux.Bursting.Clusters {
			st := burstStatus(root, b.Name)
			switch {
			case b.Cluster == "" || b.Size == 0:
				continue
			case !root.DeletionTimestamp.IsZero():
				continue
			case st == nil || st.Cluster != b.Cluster || st.Size != b.Size:
				s.Missing = append(s.Missing, fmt.Sprintf("root %s: burst %s is not reported at its spec yet", root.Name, b.Name))
			case !running(st.Phase):
				s.Missing = append(s.Missing, fmt.Sprintf("root %s: burst %s is %s: %s", root.Name, b.Name, st.Phase, st.Message))
			}
			ns := b.Namespace
			if ns == "" {
				ns = root.Namespace
			}
			for _, key := range []string{b.Cluster + " MiniCluster " + ns + "/" + b.Name, b.Cluster + " Secret " + ns + "/" + b.Name + names.CurveSecretSuffix} {
				want[key] = string(root.UID)
				if _, ok := pushed[key]; !ok {
					s.Missing = append(s.Missing, fmt.Sprintf("root %s: status.pushed does not name %s", root.Name, key))
				}
			}
		}
	}
	// got holds what the members hold of the hub's for roots of this namespace.
	got := map[string]client.Object{}
	children := map[string][]string{}
	for _, m := range r.members {
		objects, err := r.hubObjects(ctx, m)
		if err != nil {
			return s, err
		}
		for _, obj := range objects {
			kind := "MiniCluster"
			if _, ok := obj.(*corev1.Secret); ok {
				kind = "Secret"
			}
			key := m + " " + kind + " " + obj.GetNamespace() + "/" + obj.GetName()
			got[key] = obj
			if kind == "MiniCluster" {
				origin, _ := fluxv1alpha2.OriginOf(obj)
				burst := string(origin.UID) + " " + origin.Name + "/" + obj.GetName()
				children[burst] = append(children[burst], key)
			}
		}
	}
	for key, obj := range got {
		origin, _ := fluxv1alpha2.OriginOf(obj)
		if uid, ok := want[key]; !ok || uid != string(origin.UID) {
			s.Leaked = append(s.Leaked, fmt.Sprintf("%s (root %s, uid %s) is wanted by no root", key, origin.Name, origin.UID))
		}
	}
	for burst, keys := range children {
		if len(keys) > 1 {
			slices.Sort(keys)
			s.Duplicated = append(s.Duplicated, fmt.Sprintf("burst %s has %d children: %s", burst, len(keys), strings.Join(keys, ", ")))
		}
	}
	for key := range want {
		if _, ok := got[key]; !ok {
			s.Missing = append(s.Missing, key+" is missing")
		}
	}
	slices.Sort(s.Leaked)
	slices.Sort(s.Missing)
	slices.Sort(s.Duplicated)
	s.Consistent = len(s.Leaked) == 0 && len(s.Duplicated) == 0 && len(s.Missing) == 0
	return s, nil
}

// hubObjects lists the children and CURVE Secrets the hub made on member for roots of the run's
// namespace, those being deleted aside.
func (r *run) hubObjects(ctx context.Context, member string) ([]client.Object, error) {
	c := r.f.Clients[member]
	sel := client.MatchingLabels{fluxv1alpha2.LabelOriginHub: fleet.HubName, fluxv1alpha2.LabelOriginNamespace: r.opts.Namespace}
	var children fluxv1alpha2.MiniClusterList
	var secrets corev1.SecretList
	if err := c.List(ctx, &children, sel); err != nil {
		return nil, fmt.Errorf("listing the children on %s: %w", member, err)
	}
	if err := c.List(ctx, &secrets, sel); err != nil {
		return nil, fmt.Errorf("listing the Secrets on %s: %w", member, err)
	}
	var out []client.Object
	for i := range children.Items {
		out = append(out, &children.Items[i])
	}
	for i := range secrets.Items {
		out = append(out, &secrets.Items[i])
	}
	return slices.DeleteFunc(out, func(o client.Object) bool { return !o.GetDeletionTimestamp().IsZero() }), nil
}

func burstStatus(root *fluxv1alpha2.MiniCluster, name string) *fluxv1alpha2.BurstStatus {
	for i := range root.Status.Bursts {
		if root.Status.Bursts[i].Name == name {
			return &root.Status.Bursts[i]
		}
	}
	return nil
}

// running reports whether a burst in phase p runs as its spec says, as far as its pods go (no
// Flux runs in the fleet's simulated pods, so Joined is not waited for).
func running(p fluxv1alpha2.BurstPhase) bool {
	return p == fluxv1alpha2.BurstApplied || p == fluxv1alpha2.BurstReady || p == fluxv1alpha2.BurstJoined
}
