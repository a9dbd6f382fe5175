package probe

import (
	"context"
	"net"
	"strconv"
	"sync"
	"time"
)

// DefaultInterval is the interval of a Limiter made with none.
const DefaultInterval = 10 * time.Second

// GreetFunc greets the endpoint at address:port, as Greet does.
type GreetFunc func(ctx context.Context, address string, port int32) error

// Limiter lets a GreetFunc reach one endpoint at most once per interval, whoever asks: the
// endpoint is named by users (spec.flux.bursting.expose.address), and many roots naming the same
// host must not make the hub dial it more often. A greeting asked for sooner gets the result of
// the last one, waiting for it when it is still under way.
type Limiter struct {
	interval time.Duration
	clock    func() time.Time

	mu   sync.Mutex
	last map[string]*attempt
}

// attempt is the last greeting of one endpoint.
type attempt struct {
	at   time.Time
	done chan struct{} // closed when err is set
	err  error
}

// NewLimiter returns a Limiter of one greeting per interval and endpoint (DefaultInterval when
// interval is not positive), reading the time from clock (time.Now when nil).
func NewLimiter(interval time.Duration, clock func() time.Time) *Limiter {
	if interval <= 0 {
		interval = DefaultInterval
	}
	if clock == nil {
		clock = time.Now
	}
	return &Limiter{interval: interval, clock: clock, last: map[string]*attempt{}}
}

// Limit returns greet limited by l.
func (l *Limiter) Limit(greet GreetFunc) GreetFunc {
	return func(ctx context.Context, address string, port int32) error {
		endpoint := net.JoinHostPort(address, strconv.Itoa(int(port)))
		a, fresh := l.attempt(endpoint)
		if fresh {
			a.err = greet(ctx, address, port)
			close(a.done)
			return a.err
		}
		select {
		case <-a.done:
			return a.err
		case <-ctx.Done():
			return &Error{Endpoint: endpoint, Kind: ErrUnreachable, Err: ctx.Err()}
		}
	}
}

// attempt returns the greeting of endpoint to wait for, or a new one to make (fresh) when the last
// one is an interval old.
func (l *Limiter) attempt(endpoint string) (a *attempt, fresh bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock()
	if a, ok := l.last[endpoint]; ok && (now.Sub(a.at) < l.interval || !isDone(a)) {
		return a, false
	}
	// Forget the endpoints not greeted for an interval, so that the map holds only recent ones.
	for e, old := range l.last {
		if now.Sub(old.at) >= l.interval && isDone(old) {
			delete(l.last, e)
		}
	}
	a = &attempt{at: now, done: make(chan struct{})}
	l.last[endpoint] = a
	return a, true
}

func isDone(a *attempt) bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}
