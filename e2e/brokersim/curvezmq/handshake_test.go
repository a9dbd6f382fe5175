package curvezmq

import (
	"bytes"
	"crypto/rand"
	"testing"

	"github.com/go-zeromq/zmq4"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/nacl/box"
)

func keyPair(t testing.TB) KeyPair {
	t.Helper()
	k, err := generate(rand.Reader)
	require.NoError(t, err)
	return k
}

func metadata(t testing.TB, socketType, id string) []byte {
	t.Helper()
	raw, err := zmq4.Metadata{"Socket-Type": socketType, "Identity": id}.MarshalZMTP()
	require.NoError(t, err)
	return raw
}

// exchange runs the handshake between c and s step by step, passing each command through
// tamper (which may change it) on its way; it returns the first error and the side it came
// from, or the metadata each side received.
type exchange struct {
	c      *client
	s      *server
	tamper func(cmd string, body []byte) []byte
}

type outcome struct {
	errSide   string
	err       error
	clientKey [keySize]byte
	// atServer and atClient are the metadata each side read, fromClient and fromServer what
	// each side sent.
	atServer, atClient, fromClient, fromServer []byte
}

func (e exchange) run(t *testing.T) outcome {
	t.Helper()
	pass := func(cmd string, b []byte) []byte {
		if e.tamper != nil {
			return e.tamper(cmd, b)
		}
		return b
	}
	// Encoded once: a map's order is not.
	fromClient, fromServer := metadata(t, "DEALER", "child"), metadata(t, "ROUTER", "parent")
	welcome, err := e.s.hello(pass("HELLO", e.c.hello()))
	if err != nil {
		return outcome{errSide: "server", err: err}
	}
	initiate, err := e.c.welcome(pass("WELCOME", welcome), fromClient)
	if err != nil {
		return outcome{errSide: "client", err: err}
	}
	key, atServer, err := e.s.initiate(pass("INITIATE", initiate))
	if err != nil {
		return outcome{errSide: "server", err: err}
	}
	atClient, err := e.c.ready(pass("READY", e.s.ready(fromServer)))
	if err != nil {
		return outcome{errSide: "client", err: err}
	}
	return outcome{clientKey: key, atServer: atServer, atClient: atClient, fromClient: fromClient, fromServer: fromServer}
}

func newExchange(t *testing.T, clientKeys KeyPair, serverKey [keySize]byte, serverKeys KeyPair) exchange {
	t.Helper()
	c, err := newClient(clientKeys, serverKey, rand.Reader)
	require.NoError(t, err)
	return exchange{c: c, s: newServer(serverKeys, rand.Reader)}
}

func TestHandshake(t *testing.T) {
	shared := keyPair(t)
	out := newExchange(t, shared, shared.Public, shared).run(t)
	require.NoError(t, out.err)
	require.Equal(t, shared.Public, out.clientKey, "the server learns the client's long-term key")
	require.Equal(t, out.fromClient, out.atServer)
	require.Equal(t, out.fromServer, out.atClient)

	// A client with a keypair of its own is authenticated by it; authorizing it is the caller's.
	own := keyPair(t)
	out = newExchange(t, own, shared.Public, shared).run(t)
	require.NoError(t, out.err)
	require.Equal(t, own.Public, out.clientKey)
}

func TestHandshakeWrongServerKey(t *testing.T) {
	// The client holds another certificate, so it takes another public key for the server's.
	server, other := keyPair(t), keyPair(t)
	out := newExchange(t, other, other.Public, server).run(t)
	require.Equal(t, "server", out.errSide)
	require.ErrorContains(t, out.err, "HELLO does not open with this server's secret key")

	// A server that answers HELLO without the secret key of the public key the client
	// expects cannot seal WELCOME for it: here, an impostor that knows the client's transient
	// key from HELLO and answers with its own long-term key.
	e := newExchange(t, server, server.Public, server)
	impostor := newServer(other, rand.Reader)
	hello := e.c.hello()
	h, err := parseHello(hello)
	require.NoError(t, err)
	// The impostor cannot open HELLO; it reseals it to itself to go on.
	resealed := *h
	copy(resealed.box[:], box.Seal(nil, make([]byte, helloSignature), shortNonce(noncePrefixHello, h.nonce), &other.Public, &e.c.transient.Secret))
	welcome, err := impostor.hello(resealed.body())
	require.NoError(t, err)
	_, err = e.c.welcome(welcome, nil)
	require.ErrorContains(t, err, "WELCOME does not open with the server key this client has")
}

// TestHandshakeTampered changes one byte of each part of each command on its way, and checks
// that the side that receives it refuses it.
func TestHandshakeTampered(t *testing.T) {
	keys := keyPair(t)
	flip := func(at int) func([]byte) []byte {
		return func(b []byte) []byte {
			b = append([]byte(nil), b...)
			if at < 0 {
				at += len(b)
			}
			b[at] ^= 0x20
			return b
		}
	}
	// Offsets in each command's body.
	const (
		helloKey      = 2 + helloPadding
		helloNonce    = helloKey + keySize
		helloBox      = helloNonce + shortNonceSize
		initiateNonce = cookieSize
		initiateBox   = initiateNonce + shortNonceSize
	)
	tests := []struct {
		cmd    string
		change func([]byte) []byte
		side   string
		err    string
	}{
		{"HELLO", flip(0), "server", "HELLO of CurveZMQ version"},
		{"HELLO", flip(2), "server", "HELLO padding is not zero"},
		{"HELLO", flip(helloKey), "server", "HELLO does not open"},
		{"HELLO", flip(helloNonce + 7), "server", "HELLO does not open"},
		{"HELLO", flip(helloBox), "server", "HELLO does not open"},
		{"HELLO", flip(-1), "server", "HELLO does not open"},
		{"HELLO", func(b []byte) []byte { return b[:len(b)-1] }, "server", "HELLO of 193 bytes instead of 194"},
		{"WELCOME", flip(0), "client", "WELCOME does not open"},
		{"WELCOME", flip(longNonceSize + 20), "client", "WELCOME does not open"},
		{"WELCOME", func(b []byte) []byte { return append(b, 0) }, "client", "WELCOME of 161 bytes instead of 160"},
		{"INITIATE", flip(0), "server", "the cookie of INITIATE is not the one this server sent"},
		{"INITIATE", flip(longNonceSize + 3), "server", "the cookie of INITIATE is not the one this server sent"},
		{"INITIATE", flip(initiateNonce + 7), "server", "INITIATE does not open"},
		{"INITIATE", flip(initiateBox + 40), "server", "INITIATE does not open"},
		{"INITIATE", flip(-1), "server", "INITIATE does not open"},
		{"INITIATE", func(b []byte) []byte { return b[:minInitiateSize-1] }, "server", "INITIATE of 247 bytes, not 248"},
		{"READY", flip(0), "client", "READY does not open"},
		{"READY", flip(-1), "client", "READY does not open"},
		{"READY", func(b []byte) []byte { return b[:minReadySize-1] }, "client", "READY of 23 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.cmd+" "+tt.err, func(t *testing.T) {
			e := newExchange(t, keys, keys.Public, keys)
			e.tamper = func(cmd string, b []byte) []byte {
				if cmd == tt.cmd {
					return tt.change(b)
				}
				return b
			}
			out := e.run(t)
			require.Equal(t, tt.side, out.errSide, "%v", out.err)
			require.ErrorContains(t, out.err, tt.err)
		})
	}
}

// TestHandshakeVouch sends an INITIATE whose outer box is right but whose vouch is not: the
// vouch is what ties the transient key to the client's long-term key.
func TestHandshakeVouch(t *testing.T) {
	keys, stranger := keyPair(t), keyPair(t)
	for _, tc := range []struct {
		name   string
		named  KeyPair
		sealer KeyPair
		// own makes the vouch name this connection's transient key; else the stranger's.
		own    bool
		server [keySize]byte
		err    string
	}{
		{"sealed by another key than the one named", keys, stranger, true, keys.Public, "the vouch of INITIATE is not sealed by the client key it names"},
		{"for another transient key", keys, keys, false, keys.Public, "the vouch of INITIATE is for another transient key"},
		{"for another server", keys, keys, true, stranger.Public, "the vouch of INITIATE is for another server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newExchange(t, keys, keys.Public, keys)
			welcome, err := e.s.hello(e.c.hello())
			require.NoError(t, err)
			_, err = e.c.welcome(welcome, nil)
			require.NoError(t, err)
			w, err := parseWelcome(welcome)
			require.NoError(t, err)
			plain, ok := box.Open(nil, w.box[:], longNonce(noncePrefixWelcome, w.nonce), &keys.Public, &e.c.transient.Secret)
			require.True(t, ok)

			transient := stranger.Public
			if tc.own {
				transient = e.c.transient.Public
			}
			in := initiateCommand{nonce: counter(2)}
			copy(in.cookie[:], plain[keySize:])
			var vouchNonce [longNonceSize]byte
			vouch := append(vouchNonce[:], box.Seal(nil, concat(transient[:], tc.server[:]), longNonce(noncePrefixVouch, vouchNonce), &e.c.serverTransient, &tc.sealer.Secret)...)
			in.box = box.Seal(nil, concat(tc.named.Public[:], vouch), shortNonce(noncePrefixInitiate, in.nonce), &e.c.serverTransient, &e.c.transient.Secret)
			_, _, err = e.s.initiate(in.body())
			require.ErrorContains(t, err, tc.err)
		})
	}
}

func TestHandshakeReplayedNonce(t *testing.T) {
	keys := keyPair(t)
	e := newExchange(t, keys, keys.Public, keys)
	e.c.nonce = 41 // HELLO goes out with 42
	welcome, err := e.s.hello(e.c.hello())
	require.NoError(t, err)
	e.c.nonce = 40 // INITIATE with 41, before HELLO's
	initiate, err := e.c.welcome(welcome, nil)
	require.NoError(t, err)
	_, _, err = e.s.initiate(initiate)
	require.ErrorContains(t, err, "the nonce of INITIATE (41) does not follow the nonce of HELLO (42)")
}

func TestHandshakeCookieOfAnotherConnection(t *testing.T) {
	keys := keyPair(t)
	// Two handshakes with one server: the cookie of the first does not open on the second.
	first := newExchange(t, keys, keys.Public, keys)
	welcome1, err := first.s.hello(first.c.hello())
	require.NoError(t, err)
	initiate1, err := first.c.welcome(welcome1, nil)
	require.NoError(t, err)
	second := newExchange(t, keys, keys.Public, keys)
	_, err = second.s.hello(second.c.hello())
	require.NoError(t, err)
	_, _, err = second.s.initiate(initiate1)
	require.ErrorContains(t, err, "the cookie of INITIATE is not the one this server sent")
}

func TestErrorBody(t *testing.T) {
	reason, err := parseError(errorBody("client not authorized"))
	require.NoError(t, err)
	require.Equal(t, "client not authorized", reason)
	long := bytes.Repeat([]byte("x"), 300)
	reason, err = parseError(errorBody(string(long)))
	require.NoError(t, err)
	require.Len(t, reason, maxReason)
	for _, bad := range [][]byte{nil, {3, 'a'}, {0, 'a'}} {
		_, err := parseError(bad)
		require.ErrorIs(t, err, errMalformed)
	}
}
