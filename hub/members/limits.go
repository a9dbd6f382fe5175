package members

import (
	"errors"
	"fmt"
	"net"
	"time"

	"k8s.io/client-go/rest"
)

// keepAlive is the TCP keep-alive period of member connections, client-go's own default.
const keepAlive = 30 * time.Second

// Limits returns a function, fit for kubeconfig.Options.RESTOptions, that gives a member's
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
