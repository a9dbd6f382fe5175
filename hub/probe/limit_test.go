package probe

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// countingGreet counts its greetings per endpoint and fails each with a numbered error.
type countingGreet struct {
	mu     sync.Mutex
	counts map[string]int
}

var errGreeting = errors.New("greeting")

func (g *countingGreet) greet(_ context.Context, address string, port int32) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.counts == nil {
		g.counts = map[string]int{}
	}
	g.counts[net.JoinHostPort(address, strconv.Itoa(int(port)))]++
	return errGreeting
}

func (g *countingGreet) count(endpoint string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.counts[endpoint]
}

func TestLimiterGreetsAnEndpointOncePerInterval(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	g := &countingGreet{}
	greet := NewLimiter(10*time.Second, clock.Now).Limit(g.greet)
	ctx := context.Background()

	steps := []struct {
		advance time.Duration
		address string
		port    int32
		want    int // greetings of the endpoint so far
	}{
		{address: "127.0.2.1", port: 30001, want: 1},
		{address: "127.0.2.1", port: 30001, want: 1},                           // at once again: the last result
		{advance: 9 * time.Second, address: "127.0.2.1", port: 30001, want: 1}, // within the interval
		{address: "127.0.2.2", port: 30001, want: 1},                           // another host: its own interval
		{address: "127.0.2.1", port: 30002, want: 1},                           // another port: another endpoint
		{advance: time.Second, address: "127.0.2.1", port: 30001, want: 2},     // an interval later
		{advance: time.Second, address: "127.0.2.1", port: 30001, want: 2},
	}
	for i, s := range steps {
		clock.Add(s.advance)
		require.ErrorIs(t, greet(ctx, s.address, s.port), errGreeting, "step %d", i)
		require.Equal(t, s.want, g.count(net.JoinHostPort(s.address, strconv.Itoa(int(s.port)))), "step %d", i)
	}
}

func TestLimiterSharesAGreetingUnderWay(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	started, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	slow := func(context.Context, string, int32) error {
		calls.Add(1)
		close(started)
		<-release
		return errGreeting
	}
	greet := NewLimiter(time.Second, clock.Now).Limit(slow)

	first := make(chan error)
	go func() { first <- greet(context.Background(), "127.0.2.1", 30001) }()
	<-started
	// Even an interval later, a greeting still under way is not started again: a caller waits
	// for it, and stops waiting when its context ends.
	clock.Add(time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := greet(ctx, "127.0.2.1", 30001)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, ErrUnreachable)

	close(release)
	require.ErrorIs(t, <-first, errGreeting)
	require.Equal(t, int32(1), calls.Load())
}

func TestLimiterForgetsOldEndpoints(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	g := &countingGreet{}
	l := NewLimiter(0, clock.Now)
	require.Equal(t, DefaultInterval, l.interval)
	greet := l.Limit(g.greet)
	for _, address := range []string{"127.0.2.1", "127.0.2.2", "127.0.2.3"} {
		_ = greet(context.Background(), address, 30001)
	}
	require.Len(t, l.last, 3)
	clock.Add(DefaultInterval)
	_ = greet(context.Background(), "127.0.2.4", 30001)
	require.Len(t, l.last, 1, "only the endpoint greeted within the interval is kept")
}
