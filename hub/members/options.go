package members

import (
	"errors"
	"fmt"
	"net"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// This file is how the hub reaches and watches its members: Options, their defaults, and the
// limits and dialer every member client gets.

// Defaults of Options.
const (
	DefaultQPS              = 20
	DefaultBurst            = 40
	DefaultConnectTimeout   = 10 * time.Second
	DefaultSyncTimeout      = 30 * time.Second
	DefaultHealthInterval   = 5 * time.Second
	DefaultHealthTimeout    = 3 * time.Second
	DefaultFailureThreshold = 2
	DefaultRecordInterval   = time.Minute
)

// Options configure how the hub reaches and watches its members.
type Options struct {
	// QPS and Burst limit each member client; ConnectTimeout bounds establishing a connection.
	QPS            float32
	Burst          int
	ConnectTimeout time.Duration
	// SyncTimeout bounds the wait for a member's cache to fill when it is engaged: a member that
	// does not answer is retried at its next health check instead of holding anything up.
	SyncTimeout time.Duration
	// HealthInterval is the period of the health check of every member, and HealthTimeout bounds
	// one check. FailureThreshold checks in a row that fail make a Ready member NotReady.
	HealthInterval   time.Duration
	HealthTimeout    time.Duration
	FailureThreshold int
	// RecordInterval is how often an unchanged member's heartbeat is written to its status.
	RecordInterval time.Duration
	// ClusterOptions build each member's cluster (the hub scopes its cache with them).
	ClusterOptions []cluster.Option
	// RESTOptions are applied to every member's rest.Config after the hub's checks and limits
	// (tests count requests with them).
	RESTOptions []func(*rest.Config) error
	// Dial opens every connection to a member; a net.Dialer when nil. The hub restricts where
	// it may dial with it (AllowDial), and tests refuse anything but loopback.
	Dial Dialer
	// Clock is time.Now when nil.
	Clock func() time.Time
}

func (o Options) withDefaults() (Options, error) {
	setDefault(&o.QPS, DefaultQPS)
	setDefault(&o.Burst, DefaultBurst)
	setDefault(&o.ConnectTimeout, DefaultConnectTimeout)
	setDefault(&o.SyncTimeout, DefaultSyncTimeout)
	setDefault(&o.HealthInterval, DefaultHealthInterval)
	setDefault(&o.HealthTimeout, DefaultHealthTimeout)
	setDefault(&o.FailureThreshold, DefaultFailureThreshold)
	setDefault(&o.RecordInterval, DefaultRecordInterval)
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.QPS < 0 || o.Burst < 0 || o.ConnectTimeout < 0 || o.SyncTimeout < 0 || o.HealthInterval < 0 ||
		o.HealthTimeout < 0 || o.FailureThreshold < 0 || o.RecordInterval < 0 {
		return o, errors.New("members: every limit, timeout and interval must be positive")
	}
	return o, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// keepAlive is the TCP keep-alive period of member connections, client-go's own default.
const keepAlive = 30 * time.Second

// Limits returns a function, fit for Options.RESTOptions, that gives a member's
// rest.Config explicit client-side limits: qps requests per second with bursts of burst (replacing
// client-go's silent default of 5 and 10), and connectTimeout to establish a TCP connection to the
// member (client-go's default is 30s).
//
// connectTimeout is deliberately not rest.Config.Timeout: that becomes http.Client.Timeout, which
// also cuts every watch of the member's cache after that long (kubernetes/kubernetes#23899). A
// bound on a whole request belongs in the context of the call that makes it. A connection that dies
// later is detected by client-go's HTTP/2 health checks.
//
// The returned function fails when a limit is not positive, so that a bad flag stops every member
// from being built rather than silently running without limits.
func Limits(qps float32, burst int, connectTimeout time.Duration) func(*rest.Config) error {
	return func(cfg *rest.Config) error {
		if cfg == nil {
			return errors.New("member client limits: no rest.Config")
		}
		if qps <= 0 || burst <= 0 || connectTimeout <= 0 {
			return fmt.Errorf("member client limits: qps (%v), burst (%d) and connect timeout (%v) must be positive", qps, burst, connectTimeout)
		}
		cfg.QPS = qps
		cfg.Burst = burst
		// A rate limiter takes precedence over QPS and Burst; none comes from a kubeconfig, but a
		// stale one must not hide the limits.
		cfg.RateLimiter = nil
		cfg.Dial = (&net.Dialer{Timeout: connectTimeout, KeepAlive: keepAlive}).DialContext
		return nil
	}
}

// limit gives a member's rest.Config the hub's limits and dialer, then the extra options.
func (r *Registry) limit(cfg *rest.Config) error {
	if err := Limits(r.opts.QPS, r.opts.Burst, r.opts.ConnectTimeout)(cfg); err != nil {
		return err
	}
	if r.opts.Dial != nil {
		cfg.Dial = withTimeout(r.opts.Dial, r.opts.ConnectTimeout)
	}
	for _, opt := range r.opts.RESTOptions {
		if err := opt(cfg); err != nil {
			return err
		}
	}
	return nil
}
