package member

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// gateStep is one step of a bulk gate's life: a creation after a wait, or a wait and a timer.
type gateStep struct {
	after  time.Duration // on the test's clock, since the step before
	create string        // a MiniCluster created now; empty: the release timer fires now
	queued []string      // what the queue received at this step, in order
	timer  time.Duration // if not zero, the release timer this step set
}

func TestTheBulkGate(t *testing.T) {
	const pause, holdMax = 500 * time.Millisecond, 10 * time.Second
	ms := time.Millisecond
	tests := []struct {
		name  string
		steps []gateStep
	}{{
		name: "a few creations are queued at once",
		steps: []gateStep{
			{create: "a", queued: []string{"a"}},
			{after: 10 * ms, create: "b", queued: []string{"b"}},
			{after: 10 * ms, create: "c", queued: []string{"c"}},
			{after: 10 * ms, create: "d", queued: []string{"d"}},
		},
	}, {
		name: "the fifth creation within a pause starts a bulk, which is released in order when it pauses",
		steps: []gateStep{
			{create: "a", queued: []string{"a"}},
			{after: 10 * ms, create: "b", queued: []string{"b"}},
			{after: 10 * ms, create: "c", queued: []string{"c"}},
			{after: 10 * ms, create: "d", queued: []string{"d"}},
			{after: 10 * ms, create: "e", timer: pause},
			{after: 10 * ms, create: "f", timer: pause},
			{after: 400 * ms, create: "g", timer: pause},
			// The timer set for f fires, but g came since.
			{after: 100 * ms, timer: 400 * ms},
			{after: 400 * ms, queued: []string{"e", "f", "g"}},
		},
	}, {
		name: "creations a pause apart are never a bulk",
		steps: []gateStep{
			{create: "a", queued: []string{"a"}},
			{after: 10 * ms, create: "b", queued: []string{"b"}},
			{after: 10 * ms, create: "c", queued: []string{"c"}},
			{after: 10 * ms, create: "d", queued: []string{"d"}},
			{after: 500 * ms, create: "e", queued: []string{"e"}},
			{after: 500 * ms, create: "f", queued: []string{"f"}},
		},
	}, {
		name: "a bulk that does not pause is released in waves, each after the longest hold",
		steps: append([]gateStep{
			{create: "a", queued: []string{"a"}},
			{after: 10 * ms, create: "b", queued: []string{"b"}},
			{after: 10 * ms, create: "c", queued: []string{"c"}},
			{after: 10 * ms, create: "d", queued: []string{"d"}},
			{after: 10 * ms, create: "e0", timer: pause},
		}, append(creationsEvery(400*ms, 25, "e"),
			// e24 came 9.6 s after e0: the timer it set fires when e0 has waited 10 s.
			gateStep{after: 400 * ms, queued: []string{"e0"}, timer: 100 * ms},
			// The bulk paused for 500 ms: everything else goes.
			gateStep{after: 100 * ms, queued: creationNames(1, 25, "e")},
		)...),
	}, {
		name: "a creation after a released bulk is queued at once, and a late timer does nothing",
		steps: []gateStep{
			{create: "a", queued: []string{"a"}},
			{create: "b", queued: []string{"b"}},
			{create: "c", queued: []string{"c"}},
			{create: "d", queued: []string{"d"}},
			{create: "e", timer: pause},
			{after: pause, queued: []string{"e"}},
			{after: ms, create: "f", queued: []string{"f"}},
			// A timer with nothing held does nothing.
			{after: time.Hour},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
			var timers []time.Duration
			var fire func()
			g := newBulkGate(pause, holdMax)
			g.now = func() time.Time { return now }
			g.afterFunc = func(d time.Duration, f func()) timer {
				fire = f
				timers = append(timers, d)
				// Never fires by itself: the test fires it.
				return recordTimer{&timers}
			}
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			for i, step := range tt.steps {
				now = now.Add(step.after)
				timers = timers[:0]
				if step.create != "" {
					g.created(request(step.create), q)
				} else if fire != nil {
					fire()
				}
				assert.Equal(t, step.queued, drain(q), "step %d: queued", i)
				if step.timer != 0 {
					require.NotEmpty(t, timers, "step %d: no timer was set", i)
					assert.Equal(t, step.timer, timers[len(timers)-1], "step %d: timer", i)
				}
			}
		})
	}
}

// recordTimer records when it is reset to.
type recordTimer struct{ timers *[]time.Duration }

func (r recordTimer) Reset(d time.Duration) bool {
	*r.timers = append(*r.timers, d)
	return true
}

// creationsEvery returns n-1 creations of prefix1 … prefix(n-1), each the interval after the
// one before.
func creationsEvery(interval time.Duration, n int, prefix string) []gateStep {
	var steps []gateStep
	for i := 1; i < n; i++ {
		steps = append(steps, gateStep{after: interval, create: fmt.Sprintf("%s%d", prefix, i)})
	}
	return steps
}

func creationNames(from, to int, prefix string) []string {
	var names []string
	for i := from; i < to; i++ {
		names = append(names, fmt.Sprintf("%s%d", prefix, i))
	}
	return names
}

func request(name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: name}}
}

// drain returns the names the queue holds, in order, and empties it.
func drain(q workqueue.TypedRateLimitingInterface[reconcile.Request]) []string {
	var names []string
	for q.Len() > 0 {
		req, _ := q.Get()
		q.Done(req)
		names = append(names, req.Name)
	}
	return names
}
