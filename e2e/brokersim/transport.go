package brokersim

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"

	"github.com/fluxfed/fluxfed/e2e/netguard"
)

// guardedScheme is the zmq4 transport the stand-ins connect with: TCP whose dials go through
// netguard, so that a stand-in cannot dial outside loopback whatever its config says. zmq4's
// own tcp transport dials with a net.Dialer of the socket's that cannot be replaced.
const guardedScheme = "brokersim-tcp"

// dialTimeout bounds a stand-in's connection to its parent, which is on loopback: it answers
// at once or not at all.
const dialTimeout = 5 * time.Second

func init() {
	// zmq4 keeps its transports in a registry of its own; a name can be taken once per process.
	if err := zmq4.RegisterTransport(guardedScheme, guardedTCP{}); err != nil {
		panic(err)
	}
}

// guardedTCP is zmq4's tcp transport with its dials through netguard.
type guardedTCP struct{}

// Dial connects to addr through netguard; zmq4's dialer is not used.
func (guardedTCP) Dial(ctx context.Context, _ transport.Dialer, addr string) (net.Conn, error) {
	d := netguard.Dialer{Dialer: net.Dialer{Timeout: dialTimeout}}
	return d.DialContext(ctx, "tcp", addr)
}

// Listen listens on addr, as zmq4's tcp transport does.
func (guardedTCP) Listen(ctx context.Context, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	return lc.Listen(ctx, "tcp", addr)
}

// Addr returns ep, a host:port.
func (guardedTCP) Addr(ep string) (string, error) {
	if _, _, err := net.SplitHostPort(ep); err != nil {
		return "", fmt.Errorf("%s: %w", guardedScheme, err)
	}
	return ep, nil
}
