// Package probe checks from the hub that a Flux lead broker's advertised endpoint answers like a
// Flux broker: a ZMTP 3 peer that offers the CURVE security mechanism.
//
// Greet exchanges only the ZMTP greeting (RFC 23 and RFC 37, https://rfc.zeromq.org/spec/37/) and
// closes the connection before the CURVE handshake, so it needs no certificate and reveals none.
// A Flux broker treats the closed connection like any peer that goes away during its handshake.
//
// What Greet proves is that the address and port the hub advertises to members lead, from the
// hub, to a ZMTP CURVE endpoint. It does not prove that members can reach it (their network path
// differs) nor that the endpoint holds the instance's certificate.
package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// DefaultTimeout bounds a Greet whose context has no deadline. A ZMTP peer sends its signature as
// soon as it accepts a connection, so an answer takes about one round trip.
const DefaultTimeout = 10 * time.Second

// Errors that Greet wraps, to be told apart with errors.Is.
var (
	// ErrUnreachable means no TCP connection could be made: refused, timed out, no route, or the
	// name does not resolve.
	ErrUnreachable = errors.New("cannot connect")
	// ErrNotZMTP means the endpoint accepted the connection but did not answer with a ZMTP 3
	// greeting: other bytes, an older ZMTP, a closed connection, or silence until the deadline (a
	// ZMTP peer greets as soon as it accepts, so silence means something else is listening).
	ErrNotZMTP = errors.New("the endpoint answered but is not a ZMTP 3 CURVE peer")
	// ErrNotCURVE means the endpoint speaks ZMTP 3 but offers another security mechanism than
	// CURVE, which every Flux broker uses.
	ErrNotCURVE = errors.New("the endpoint speaks ZMTP 3 but not the CURVE mechanism")
)

// The ZMTP 3 greeting: signature (0xFF, 8 bytes of padding, 0x7F), version (major, minor),
// mechanism (20 bytes, NUL padded), as-server (1 byte), filler (31 NUL bytes).
const (
	greetingSize    = 64
	signatureSize   = 10
	versionMajorPos = 10
	versionMinorPos = 11
	mechanismPos    = 12
	mechanismSize   = 20
	asServerPos     = mechanismPos + mechanismSize
	zmtpMajor       = 3
	zmtpMinor       = 1
	curve           = "CURVE"
)

// clientGreeting is what Greet sends: a ZMTP 3.1 greeting of a CURVE client.
func clientGreeting() [greetingSize]byte {
	var g [greetingSize]byte
	g[0] = 0xFF
	g[signatureSize-1] = 0x7F
	g[versionMajorPos] = zmtpMajor
	g[versionMinorPos] = zmtpMinor
	mechanism := mechanismField(curve)
	copy(g[mechanismPos:], mechanism[:])
	g[asServerPos] = 0 // a client; the broker is the CURVE server
	return g
}

// mechanismField is a mechanism name as the greeting carries it: NUL padded to 20 bytes.
func mechanismField(name string) [mechanismSize]byte {
	var f [mechanismSize]byte
	copy(f[:], name)
	return f
}

// Greet connects to address:port, sends a ZMTP 3.1 greeting that offers CURVE, reads the peer's
// greeting and checks that the peer speaks ZMTP 3 (or later) with the CURVE mechanism, then closes
// the connection without completing the handshake. It gives up at the context's deadline, or after
// DefaultTimeout when the context has none.
//
// The error wraps ErrUnreachable, ErrNotZMTP or ErrNotCURVE, except for an invalid address or
// port. When the deadline ends it, the error also wraps context.DeadlineExceeded.
func Greet(ctx context.Context, address string, port int32) error {
	return GreetWith(nil)(ctx, address, port)
}

// Dialer opens a connection, as net.Dialer.DialContext does.
type Dialer func(ctx context.Context, network, address string) (net.Conn, error)

// GreetWith returns Greet connecting through dial (a net.Dialer when nil): the hub restricts the
// networks it dials, and tests refuse anything but loopback.
func GreetWith(dial Dialer) func(ctx context.Context, address string, port int32) error {
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	return func(ctx context.Context, address string, port int32) error {
		return greet(ctx, dial, address, port)
	}
}

func greet(ctx context.Context, dial Dialer, address string, port int32) error {
	if address == "" {
		return errors.New("probing the lead broker: no address")
	}
	if port < 1 || port > 65535 {
		return fmt.Errorf("probing the lead broker: port %d is out of range", port)
	}
	endpoint := net.JoinHostPort(address, strconv.Itoa(int(port)))
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}

	conn, err := dial(ctx, "tcp", endpoint)
	if err != nil {
		return &Error{Endpoint: endpoint, Kind: ErrUnreachable, Err: deadlineOr(ctx, err)}
	}
	defer func() { _ = conn.Close() }()

	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return &Error{Endpoint: endpoint, Kind: ErrUnreachable, Err: err}
	}
	// A cancelled context (not only an expired one) ends a blocked read or write.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	greeting := clientGreeting()
	if _, err := conn.Write(greeting[:]); err != nil {
		return &Error{Endpoint: endpoint, Kind: ErrNotZMTP, Detail: "it closed the connection before the greeting", Err: deadlineOr(ctx, err)}
	}
	return readGreeting(ctx, conn, endpoint)
}

// readGreeting reads and checks the peer's greeting step by step, the way libzmq sends it: the
// signature first, then the major version, then the rest. A peer that is not ZMTP 3 is told apart
// without waiting for bytes it will never send.
func readGreeting(ctx context.Context, conn net.Conn, endpoint string) error {
	var peer [greetingSize]byte
	notZMTP := func(detail string, err error) error {
		return &Error{Endpoint: endpoint, Kind: ErrNotZMTP, Detail: detail, Err: err}
	}
	read := func(from, to int) error {
		n, err := io.ReadFull(conn, peer[from:to])
		switch {
		case err == nil:
			return nil
		case from+n == 0 && isTimeout(err):
			return notZMTP("it sent nothing before the deadline", deadlineOr(ctx, err))
		case from+n == 0:
			return notZMTP("it closed the connection without a greeting", err)
		default:
			return notZMTP(fmt.Sprintf("its greeting stopped after %d bytes", from+n), deadlineOr(ctx, err))
		}
	}

	// The first byte alone tells most other protocols apart; read it before waiting for more.
	if err := read(0, 1); err != nil {
		return err
	}
	if peer[0] != 0xFF {
		// What the peer sent is never quoted: the endpoint may be anything a user named, and its
		// bytes would end up in the root's status.
		return notZMTP("it answered, but not with a ZMTP greeting", nil)
	}
	if err := read(1, signatureSize); err != nil {
		return err
	}
	if peer[signatureSize-1]&0x01 == 0 {
		return notZMTP("it speaks ZMTP 1.0", nil)
	}
	if err := read(signatureSize, versionMajorPos+1); err != nil {
		return err
	}
	if revision := peer[versionMajorPos]; revision < zmtpMajor {
		return notZMTP("it speaks "+olderZMTP(revision), nil)
	}
	if err := read(versionMajorPos+1, greetingSize); err != nil {
		return err
	}
	mechanism := peer[mechanismPos : mechanismPos+mechanismSize]
	if want := mechanismField(curve); !bytes.Equal(mechanism, want[:]) {
		return &Error{Endpoint: endpoint, Kind: ErrNotCURVE, Detail: "it offers " + mechanismName(mechanism)}
	}
	// as-server is not checked: libzmq always sends 0 there, whatever the socket's role.
	return nil
}

// olderZMTP names the protocol of a peer whose greeting has a revision below 3.
func olderZMTP(revision byte) string {
	switch revision {
	case 0:
		return "ZMTP 1.0"
	case 1:
		return "ZMTP 2.0"
	default:
		return fmt.Sprintf("an unknown ZMTP revision %d", revision)
	}
}

// mechanismName names the security mechanism of a peer's greeting when it is one that ZMTP 3
// defines, and says only "an unknown mechanism" otherwise: the field is the peer's to fill.
func mechanismName(field []byte) string {
	for _, name := range []string{"NULL", "PLAIN", "GSSAPI"} {
		if want := mechanismField(name); bytes.Equal(field, want[:]) {
			return "the " + name + " mechanism"
		}
	}
	return "an unknown mechanism"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// deadlineOr returns err joined with the context's error when the context ended the operation,
// so that callers can test errors.Is(err, context.DeadlineExceeded). A network timeout counts as
// the context's deadline even when the context's own timer has not fired yet: the connection's
// deadline is the context's, and the two timers are not in step.
func deadlineOr(ctx context.Context, err error) error {
	ctxErr := ctx.Err()
	if ctxErr == nil && isTimeout(err) {
		ctxErr = context.DeadlineExceeded
	}
	if ctxErr == nil {
		return err
	}
	return fmt.Errorf("%w: %w", ctxErr, err)
}

// Error is a failed Greet.
type Error struct {
	// Endpoint is the host:port that was probed.
	Endpoint string
	// Kind is ErrUnreachable, ErrNotZMTP or ErrNotCURVE.
	Kind error
	// Detail says what kind of peer answered, in fluxfed's words: never the peer's bytes.
	Detail string
	// Err is the network error, if any.
	Err error
}

// Error returns a message such as "lead broker 10.0.0.5:30050: the endpoint answered but is not a
// ZMTP 3 CURVE peer: it answered, but not with a ZMTP greeting". It never holds bytes the peer
// sent.
func (e *Error) Error() string {
	msg := "lead broker " + e.Endpoint + ": " + e.Kind.Error()
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the kind and the network error, so that errors.Is matches both.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}
