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
	const window, holdMax = time.Second, time.Minute
	ms := time.Millisecond
	// A bulk that never ends: a creation every 100 ms for a minute.
	endless := []gateStep{
		{create: "x0", queued: []string{"x0"}},
		{after: 100 * ms, create: "x1", queued: []string{"x1"}},
		{after: 100 * ms, create: "x2", queued: []string{"x2"}},
		{after: 100 * ms, create: "x3", queued: []string{"x3"}},
	}
	for i := 4; i <= 600; i++ {
		endless = append(endless, gateStep{after: 100 * ms, create: fmt.Sprintf("x%d", i)})
	}
	var rest []string
	for i := 6; i <= 600; i++ {
		rest = append(rest, fmt.Sprintf("x%d", i))
	}
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
		name: "the fifth creation within a window starts a bulk, which is released in order when fewer than five came within a window",
		steps: []gateStep{
			{create: "a", queued: []string{"a"}},
			{after: 10 * ms, create: "b", queued: []string{"b"}},
			{after: 10 * ms, create: "c", queued: []string{"c"}},
			{after: 10 * ms, create: "d", queued: []string{"d"}},
			// Five within a second: when a is a second old, the window holds four.
			{after: 10 * ms, create: "e", timer: 960 * ms},
			{after: 10 * ms, create: "f", timer: 960 * ms},
			{after: 400 * ms, create: "g", timer: 570 * ms},
			// A timer that fires early (the one f set, though g came since) releases nothing.
			{after: 100 * ms, timer: 470 * ms},
			{after: 470 * ms, queued: []string{"e", "f", "g"}},
		},
	}, {
		name: "a steady trickle is never a bulk",
		steps: []gateStep{
			{create: "a", queued: []string{"a"}},
			{after: 250 * ms, create: "b", queued: []string{"b"}},
			{after: 250 * ms, create: "c", queued: []string{"c"}},
			{after: 250 * ms, create: "d", queued: []string{"d"}},
			{after: 250 * ms, create: "e", queued: []string{"e"}},
			{after: 250 * ms, create: "f", queued: []string{"f"}},
			{after: 250 * ms, create: "g", queued: []string{"g"}},
		},
	}, {
		name: "a bulk that does not end is released in waves, each after the longest hold",
		steps: append(endless,
			// x600 came at 60.0 s; x4, held since 0.4 s, has waited a minute at 60.4 s.
			gateStep{after: 400 * ms, queued: []string{"x4"}, timer: 100 * ms},
			gateStep{after: 100 * ms, queued: []string{"x5"}, timer: 100 * ms},
			// At 60.6 s four creations are left within the window: the bulk ended.
			gateStep{after: 100 * ms, queued: rest},
		),
	}, {
		name: "a creation after a bulk ended is queued at once, and a late timer does nothing",
		steps: []gateStep{
			{create: "a", queued: []string{"a"}},
			{create: "b", queued: []string{"b"}},
			{create: "c", queued: []string{"c"}},
			{create: "d", queued: []string{"d"}},
			{create: "e", timer: window},
			{after: window, queued: []string{"e"}},
			{after: ms, create: "f", queued: []string{"f"}},
			{after: time.Hour},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
			var timers []time.Duration
			var fire func()
			g := newBulkGate(window, holdMax)
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
