package curvezmq

import (
	"crypto/subtle"
	"encoding/binary"
	"fmt"
	"io"

	"golang.org/x/crypto/nacl/box"
	"golang.org/x/crypto/nacl/secretbox"
)

// The two sides of the handshake as pure steps: each takes the body of the command it received
// and returns the body of the command to send. Security drives them over a ZMTP connection.
//
//	client                                  server
//	HELLO     C', Box[0*64](C'->S)      ->
//	                                    <-  WELCOME   Box[S' + cookie](S->C')
//	INITIATE  cookie, Box[C + vouch + metadata](C'->S'),
//	          vouch = Box[C' + S](C->S') ->
//	                                    <-  READY     Box[metadata](S'->C')
//
// C and S are the long-term public keys of client and server, C' and S' transient ones made for
// this connection; lower case names the secret keys.

// client is the client side of one handshake.
type client struct {
	keys   KeyPair
	server [keySize]byte
	rand   io.Reader
	// transient is C' and c'; serverTransient is S', known from WELCOME on.
	transient       KeyPair
	serverTransient [keySize]byte
	// nonce is the last short nonce the client used.
	nonce uint64
}

func newClient(keys KeyPair, server [keySize]byte, rand io.Reader) (*client, error) {
	t, err := generate(rand)
	if err != nil {
		return nil, err
	}
	return &client{keys: keys, server: server, rand: rand, transient: t}, nil
}

func (c *client) nextNonce() [shortNonceSize]byte {
	c.nonce++
	return counter(c.nonce)
}

// hello returns the body of HELLO.
func (c *client) hello() []byte {
	h := helloCommand{version: curveVersion, transient: c.transient.Public, nonce: c.nextNonce()}
	copy(h.box[:], box.Seal(nil, make([]byte, helloSignature), shortNonce(noncePrefixHello, h.nonce), &c.server, &c.transient.Secret))
	return h.body()
}

// welcome reads WELCOME and returns the body of INITIATE, which carries metadata.
func (c *client) welcome(body, metadata []byte) ([]byte, error) {
	w, err := parseWelcome(body)
	if err != nil {
		return nil, err
	}
	plain, ok := box.Open(nil, w.box[:], longNonce(noncePrefixWelcome, w.nonce), &c.server, &c.transient.Secret)
	if !ok {
		return nil, fmt.Errorf("WELCOME does not open with the server key this client has: another server, or another certificate")
	}
	r := reader{b: plain}
	r.read(c.serverTransient[:])
	in := initiateCommand{nonce: c.nextNonce()}
	r.read(in.cookie[:])

	var vouchNonce [longNonceSize]byte
	if _, err := io.ReadFull(c.rand, vouchNonce[:]); err != nil {
		return nil, fmt.Errorf("drawing a nonce: %w", err)
	}
	vouch := append(vouchNonce[:], box.Seal(nil, concat(c.transient.Public[:], c.server[:]), longNonce(noncePrefixVouch, vouchNonce), &c.serverTransient, &c.keys.Secret)...)
	plainInitiate := concat(c.keys.Public[:], vouch, metadata)
	in.box = box.Seal(nil, plainInitiate, shortNonce(noncePrefixInitiate, in.nonce), &c.serverTransient, &c.transient.Secret)
	return in.body(), nil
}

// ready reads READY and returns the server's metadata.
func (c *client) ready(body []byte) ([]byte, error) {
	rd, err := parseReady(body)
	if err != nil {
		return nil, err
	}
	plain, ok := box.Open(nil, rd.box, shortNonce(noncePrefixReady, rd.nonce), &c.serverTransient, &c.transient.Secret)
	if !ok {
		return nil, fmt.Errorf("READY does not open with the server's transient key")
	}
	return plain, nil
}

// server is the server side of one handshake.
type server struct {
	keys KeyPair
	rand io.Reader
	// clientTransient is C', from HELLO; helloNonce the short nonce of HELLO.
	clientTransient [keySize]byte
	helloNonce      uint64
	// transient is S' and s'; cookieKey seals the cookie; both are made for this connection.
	transient KeyPair
	cookieKey [keySize]byte
	nonce     uint64
}

func newServer(keys KeyPair, rand io.Reader) *server { return &server{keys: keys, rand: rand} }

// hello reads HELLO and returns the body of WELCOME.
func (s *server) hello(body []byte) ([]byte, error) {
	h, err := parseHello(body)
	if err != nil {
		return nil, err
	}
	plain, ok := box.Open(nil, h.box[:], shortNonce(noncePrefixHello, h.nonce), &h.transient, &s.keys.Secret)
	if !ok || !allZero(plain) {
		return nil, fmt.Errorf("HELLO does not open with this server's secret key: the client has another server key, or another certificate")
	}
	s.clientTransient = h.transient
	s.helloNonce = binary.BigEndian.Uint64(h.nonce[:])
	if s.transient, err = generate(s.rand); err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(s.rand, s.cookieKey[:]); err != nil {
		return nil, fmt.Errorf("drawing a cookie key: %w", err)
	}
	var cookieNonce, welcomeNonce [longNonceSize]byte
	for _, n := range []*[longNonceSize]byte{&cookieNonce, &welcomeNonce} {
		if _, err := io.ReadFull(s.rand, n[:]); err != nil {
			return nil, fmt.Errorf("drawing a nonce: %w", err)
		}
	}
	cookie := append(cookieNonce[:], secretbox.Seal(nil, concat(s.clientTransient[:], s.transient.Secret[:]), longNonce(noncePrefixCookie, cookieNonce), &s.cookieKey)...)
	w := welcomeCommand{nonce: welcomeNonce}
	copy(w.box[:], box.Seal(nil, concat(s.transient.Public[:], cookie), longNonce(noncePrefixWelcome, welcomeNonce), &s.clientTransient, &s.keys.Secret))
	return w.body(), nil
}

// initiate reads INITIATE and returns the client's long-term public key and metadata. The
// caller authorizes the key before it answers with ready.
func (s *server) initiate(body []byte) (clientKey [keySize]byte, metadata []byte, err error) {
	in, err := parseInitiate(body)
	if err != nil {
		return clientKey, nil, err
	}
	r := reader{b: in.cookie[:]}
	var cookieNonce [longNonceSize]byte
	r.read(cookieNonce[:])
	cookie, ok := secretbox.Open(nil, r.rest(), longNonce(noncePrefixCookie, cookieNonce), &s.cookieKey)
	if !ok {
		return clientKey, nil, fmt.Errorf("the cookie of INITIATE is not the one this server sent")
	}
	if subtle.ConstantTimeCompare(cookie[:keySize], s.clientTransient[:]) != 1 || subtle.ConstantTimeCompare(cookie[keySize:], s.transient.Secret[:]) != 1 {
		return clientKey, nil, fmt.Errorf("the cookie of INITIATE belongs to another connection")
	}
	if n := binary.BigEndian.Uint64(in.nonce[:]); n <= s.helloNonce {
		return clientKey, nil, fmt.Errorf("the nonce of INITIATE (%d) does not follow the nonce of HELLO (%d): a replay?", n, s.helloNonce)
	}
	plain, ok := box.Open(nil, in.box, shortNonce(noncePrefixInitiate, in.nonce), &s.clientTransient, &s.transient.Secret)
	if !ok {
		return clientKey, nil, fmt.Errorf("INITIATE does not open with the client's transient key")
	}
	r = reader{b: plain}
	r.read(clientKey[:])
	var vouchNonce [longNonceSize]byte
	r.read(vouchNonce[:])
	vouch, ok := box.Open(nil, r.next(vouchBoxSize), longNonce(noncePrefixVouch, vouchNonce), &clientKey, &s.transient.Secret)
	if !ok {
		return clientKey, nil, fmt.Errorf("the vouch of INITIATE is not sealed by the client key it names")
	}
	if subtle.ConstantTimeCompare(vouch[:keySize], s.clientTransient[:]) != 1 {
		return clientKey, nil, fmt.Errorf("the vouch of INITIATE is for another transient key than this connection's")
	}
	if subtle.ConstantTimeCompare(vouch[keySize:], s.keys.Public[:]) != 1 {
		return clientKey, nil, fmt.Errorf("the vouch of INITIATE is for another server")
	}
	return clientKey, append([]byte(nil), r.rest()...), nil
}

// ready returns the body of READY, which carries metadata.
func (s *server) ready(metadata []byte) []byte {
	s.nonce++
	rd := readyCommand{nonce: counter(s.nonce)}
	rd.box = box.Seal(nil, metadata, shortNonce(noncePrefixReady, rd.nonce), &s.clientTransient, &s.transient.Secret)
	return rd.body()
}

func generate(rand io.Reader) (KeyPair, error) {
	pub, sec, err := box.GenerateKey(rand)
	if err != nil {
		return KeyPair{}, fmt.Errorf("making a transient key: %w", err)
	}
	return KeyPair{Public: *pub, Secret: *sec}, nil
}

func concat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
