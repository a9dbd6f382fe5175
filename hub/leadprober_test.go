package hub

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/bursting"
)

// TestTheLeadProberWakesARootOnlyWhenItsGreetingChanges: each round greets every root greeted
// half an interval ago or more; a root whose endpoint starts or stops answering is woken at once,
// the others are left alone, however many rounds pass.
func TestTheLeadProberWakesARootOnlyWhenItsGreetingChanges(t *testing.T) {
	const interval = 10 * time.Second
	now := time.Unix(1_000_000, 0)
	var mu sync.Mutex
	answering := map[int32]bool{30001: true, 30002: true, 30003: false}
	greeted := map[int32]int{}
	r := &Reconciler{opts: Options{ProbeInterval: interval, ProbeTimeout: time.Second,
		Clock: func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		Probe: func(_ context.Context, address string, port int32) error {
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, "127.0.0.1", address)
			greeted[port]++
			if !answering[port] {
				return errors.New("connection refused")
			}
			return nil
		}}}
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[mcreconcile.Request]())
	defer queue.ShutDown()
	ctx := context.Background()
	require.NoError(t, r.wakes.Start(ctx, queue))

	// Three roots, greeted by their reconciles a full interval ago: two answered, one did not.
	roots := map[int32]types.NamespacedName{}
	for i, port := range []int32{30001, 30002, 30003} {
		key := types.NamespacedName{Namespace: "research", Name: "root-" + string(rune('a'+i))}
		roots[port] = key
		l := lead{endpoint: bursting.Endpoint{Address: "127.0.0.1", Port: port}, reason: fluxv1alpha2.ReasonAddressAssigned}
		var err error
		if !answering[port] {
			err = errors.New("no Flux broker answered at 127.0.0.1:30003")
		}
		r.memory.of(types.UID(key.Name)).setProbe(probeResult{root: key, lead: l, err: err, at: now.Add(-interval)})
	}
	// A root with no endpoint to greet any more is not greeted.
	gone := r.memory.of("pending")
	gone.setProbe(probeResult{root: types.NamespacedName{Namespace: "research", Name: "pending"}, at: now.Add(-interval)})
	gone.forgetProbe()

	round := func(advance time.Duration) []types.NamespacedName {
		mu.Lock()
		now = now.Add(advance)
		mu.Unlock()
		r.probeRound(ctx)
		var woken []types.NamespacedName
		for queue.Len() > 0 {
			req, _ := queue.Get()
			woken = append(woken, req.NamespacedName)
			queue.Done(req)
		}
		return woken
	}

	require.Empty(t, round(0), "nothing changed: nobody is woken")
	require.Equal(t, map[int32]int{30001: 1, 30002: 1, 30003: 1}, greeted)

	require.Empty(t, round(interval/4), "greeted a quarter interval ago: not due")
	require.Equal(t, map[int32]int{30001: 1, 30002: 1, 30003: 1}, greeted)

	mu.Lock()
	answering[30002], answering[30003] = false, true
	mu.Unlock()
	require.ElementsMatch(t, []types.NamespacedName{roots[30002], roots[30003]}, round(interval),
		"the one that stopped answering and the one that started are woken")
	for port, answers := range map[int32]bool{30001: true, 30002: false, 30003: true} {
		m, _ := r.memory.peek(types.UID(roots[port].Name))
		last, ok := m.lastProbe()
		require.True(t, ok)
		require.Equal(t, answers, last.err == nil, "port %d", port)
		require.Equal(t, now, last.at, "the greeting is recorded with its time, for the reconcile to use")
	}

	for range 3 {
		require.Empty(t, round(interval), "settled: greeted every round, woken never")
	}
	require.Equal(t, map[int32]int{30001: 5, 30002: 5, 30003: 5}, greeted)

	// A reconcile that greets a new endpoint while the prober greets the old one keeps its own.
	m, _ := r.memory.peek(types.UID(roots[30001].Name))
	old, _ := m.lastProbe()
	moved := probeResult{root: roots[30001], lead: lead{endpoint: bursting.Endpoint{Address: "127.0.0.1", Port: 30009}, reason: fluxv1alpha2.ReasonAddressAssigned}, at: now}
	m.setProbe(moved)
	m.updateProbe(old, probeResult{root: old.root, lead: old.lead, at: now.Add(time.Second)})
	got, _ := m.lastProbe()
	require.Equal(t, int32(30009), got.lead.endpoint.Port, "the prober's answer about the old endpoint is dropped")
}
