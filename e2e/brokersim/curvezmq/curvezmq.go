// Package curvezmq is the CurveZMQ handshake (RFC 26) as the ZMTP CURVE security mechanism
// (RFC 25) for go-zeromq/zmq4, which defines the zmq4.Security interface but implements only
// NULL and PLAIN. The stand-in brokers of e2e/brokersim use it, so that a broker with another
// certificate fails the handshake for the reason a Flux broker does, and so that whatever greets
// a stand-in (the hub's lead broker probe) meets a CURVE peer.
//
// Only the handshake is CurveZMQ. zmq4 frames a message by its plaintext size before it hands
// the frame to Security.Encrypt, and gives Encrypt no connection to take keys from, so the
// MESSAGE boxes that follow a real handshake cannot be written through it: after the handshake
// the frames travel as under NULL. A stand-in therefore interoperates with another stand-in,
// not with libzmq, past the handshake.
//
// A Flux broker's overlay sockets all use the instance's one keypair: the server's long-term key
// is that public key, every client presents that same keypair, and the server accepts only
// clients whose long-term key is its own (flux-core's overlay ZAP handler). [Flux] returns that
// security; [New] the general one.
package curvezmq

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"

	"github.com/go-zeromq/zmq4"
)

// KeyPair is a Curve25519 keypair.
type KeyPair struct {
	Public, Secret [keySize]byte
}

// ErrHandshake is wrapped by every error of a failed handshake (a *HandshakeError).
var ErrHandshake = errors.New("CURVE handshake failed")

// HandshakeError is a failed handshake, whichever side saw it fail: zmq4 wraps it in errors of
// its own, errors.As finds it.
type HandshakeError struct {
	// Err says which step failed and why.
	Err error
}

// Error returns "CURVE handshake failed: " and what failed.
func (e *HandshakeError) Error() string { return ErrHandshake.Error() + ": " + e.Err.Error() }

// Unwrap returns ErrHandshake and Err.
func (e *HandshakeError) Unwrap() []error { return []error{ErrHandshake, e.Err} }

// Config configures both sides of a socket's connections: a socket that binds is the CURVE
// server of the connections it accepts, one that connects the client.
type Config struct {
	// Keys is this socket's long-term keypair: the server's own, or the one a client presents.
	Keys KeyPair
	// ServerKey is the long-term public key of the server a client expects; a server that
	// presents another cannot open HELLO.
	ServerKey [keySize]byte
	// Authorize accepts or refuses a client by its long-term public key once it proved that it
	// holds the secret key, as a ZAP handler does; nil accepts every client.
	Authorize func(clientKey [keySize]byte) error
	// Rand makes the transient keys, nonces and cookie keys; crypto/rand when nil.
	Rand io.Reader
}

// New returns the CURVE security of cfg, for zmq4.WithSecurity.
func New(cfg Config) zmq4.Security {
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	return &security{cfg: cfg}
}

// Flux returns the security of a Flux broker whose certificate holds keys: it expects its
// parent to present the same keypair, and accepts only children that present it.
func Flux(keys KeyPair) zmq4.Security {
	return New(Config{
		Keys:      keys,
		ServerKey: keys.Public,
		Authorize: func(clientKey [keySize]byte) error {
			if clientKey != keys.Public {
				return errors.New("the client's certificate is not this instance's")
			}
			return nil
		},
	})
}

type security struct{ cfg Config }

// Type returns zmq4.CurveSecurity, which is what the ZMTP greeting offers.
func (*security) Type() zmq4.SecurityType { return zmq4.CurveSecurity }

// Handshake runs the server or the client side of the handshake on conn, after the greeting.
// A failed handshake closes conn: zmq4 leaves a connection whose handshake failed open, and
// the peer would wait on it for good.
func (s *security) Handshake(conn *zmq4.Conn, server bool) error {
	run := s.client
	if server {
		run = s.server
	}
	if err := run(conn); err != nil {
		_ = conn.Close()
		return &HandshakeError{Err: err}
	}
	return nil
}

func (s *security) client(conn *zmq4.Conn) error {
	c, err := newClient(s.cfg.Keys, s.cfg.ServerKey, s.cfg.Rand)
	if err != nil {
		return err
	}
	if err := conn.SendCmd(zmq4.CmdHello, c.hello()); err != nil {
		return fmt.Errorf("sending HELLO: %w", err)
	}
	welcome, err := expect(conn, zmq4.CmdWelcome)
	if err != nil {
		// libzmq closes without a word when HELLO does not open, as it does for any garbage.
		return fmt.Errorf("after HELLO: %w (a server closes the connection when HELLO does not open with its secret key: it has another certificate)", err)
	}
	metadata, err := conn.Meta.MarshalZMTP()
	if err != nil {
		return fmt.Errorf("encoding this socket's metadata: %w", err)
	}
	initiate, err := c.welcome(welcome, metadata)
	if err != nil {
		return err
	}
	if err := conn.SendCmd(zmq4.CmdInitiate, initiate); err != nil {
		return fmt.Errorf("sending INITIATE: %w", err)
	}
	ready, err := expect(conn, zmq4.CmdReady)
	if err != nil {
		return fmt.Errorf("after INITIATE: %w", err)
	}
	peer, err := c.ready(ready)
	if err != nil {
		return err
	}
	if err := conn.Peer.Meta.UnmarshalZMTP(peer); err != nil {
		return fmt.Errorf("reading the server's metadata: %w", err)
	}
	return nil
}

func (s *security) server(conn *zmq4.Conn) error {
	srv := newServer(s.cfg.Keys, s.cfg.Rand)
	hello, err := expect(conn, zmq4.CmdHello)
	if err != nil {
		return err
	}
	welcome, err := srv.hello(hello)
	if err != nil {
		return err // closed without a word, as libzmq does
	}
	if err := conn.SendCmd(zmq4.CmdWelcome, welcome); err != nil {
		return fmt.Errorf("sending WELCOME: %w", err)
	}
	initiate, err := expect(conn, zmq4.CmdInitiate)
	if err != nil {
		return err
	}
	clientKey, peer, err := srv.initiate(initiate)
	if err != nil {
		return err
	}
	if s.cfg.Authorize != nil {
		if err := s.cfg.Authorize(clientKey); err != nil {
			_ = conn.SendCmd(zmq4.CmdError, errorBody("client not authorized: "+err.Error()))
			return fmt.Errorf("refusing the client: %w", err)
		}
	}
	if err := conn.Peer.Meta.UnmarshalZMTP(peer); err != nil {
		return fmt.Errorf("reading the client's metadata: %w", err)
	}
	metadata, err := conn.Meta.MarshalZMTP()
	if err != nil {
		return fmt.Errorf("encoding this socket's metadata: %w", err)
	}
	if err := conn.SendCmd(zmq4.CmdReady, srv.ready(metadata)); err != nil {
		return fmt.Errorf("sending READY: %w", err)
	}
	return nil
}

// expect receives a command and returns its body when it is the command named want. An ERROR
// command becomes an error that quotes its reason.
func expect(conn *zmq4.Conn, want string) ([]byte, error) {
	cmd, err := conn.RecvCmd()
	if err != nil {
		return nil, fmt.Errorf("waiting for %s: %w", want, err)
	}
	switch cmd.Name {
	case want:
		return cmd.Body, nil
	case zmq4.CmdError:
		reason, err := parseError(cmd.Body)
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("the peer refused: %q", reason)
	}
	return nil, fmt.Errorf("%w: %s instead of %s", errMalformed, cmd.Name, want)
}

// Encrypt writes data as it is: see the package comment.
func (*security) Encrypt(w io.Writer, data []byte) (int, error) { return w.Write(data) }

// Decrypt writes data as it is: see the package comment.
func (*security) Decrypt(w io.Writer, data []byte) (int, error) { return w.Write(data) }
