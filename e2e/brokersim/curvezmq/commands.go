package curvezmq

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/crypto/nacl/box"
)

// Sizes of the parts of the handshake commands (RFC 25, RFC 26). A box is its plaintext plus
// box.Overhead bytes of authenticator.
const (
	keySize        = 32
	shortNonceSize = 8
	longNonceSize  = 16
	// helloPadding keeps HELLO larger than WELCOME, so that a forged client address cannot make
	// a server amplify traffic.
	helloPadding = 72
	// helloSignature is the plaintext of the HELLO box: zeros, which only the server's secret
	// key decrypts.
	helloSignature = 64
	helloBoxSize   = helloSignature + box.Overhead
	helloSize      = 2 + helloPadding + keySize + shortNonceSize + helloBoxSize
	// A cookie is a long nonce and the box of the client's transient key and the server's
	// transient secret key, under a key only the server knows.
	cookieBoxSize   = 2*keySize + box.Overhead
	cookieSize      = longNonceSize + cookieBoxSize
	welcomeBoxSize  = keySize + cookieSize + box.Overhead
	welcomeSize     = longNonceSize + welcomeBoxSize
	vouchBoxSize    = 2*keySize + box.Overhead
	vouchSize       = longNonceSize + vouchBoxSize
	minInitiateBox  = keySize + vouchSize + box.Overhead
	minInitiateSize = cookieSize + shortNonceSize + minInitiateBox
	minReadySize    = shortNonceSize + box.Overhead
	// maxMetadata bounds the metadata a peer may send: a socket type and an identity need a
	// few dozen bytes.
	maxMetadata = 1 << 16
	// maxReason is what the one-octet length of an ERROR reason allows.
	maxReason = 255
)

// The prefixes that complete the short and long nonces to the 24 bytes of a box nonce; each
// box of the handshake has its own, so that no box can be replayed as another.
const (
	noncePrefixHello    = "CurveZMQHELLO---"
	noncePrefixWelcome  = "WELCOME-"
	noncePrefixCookie   = "COOKIE--"
	noncePrefixInitiate = "CurveZMQINITIATE"
	noncePrefixVouch    = "VOUCH---"
	noncePrefixReady    = "CurveZMQREADY---"
)

// curveVersion is the CurveZMQ version HELLO carries: 1.0.
var curveVersion = [2]byte{1, 0}

// errMalformed is wrapped by the errors of the parsers.
var errMalformed = errors.New("malformed command")

// helloCommand is the body of HELLO: version, padding, the client's transient public key C',
// a short nonce and Box[64 zero bytes](C'->S).
type helloCommand struct {
	version   [2]byte
	transient [keySize]byte
	nonce     [shortNonceSize]byte
	box       [helloBoxSize]byte
}

func (h *helloCommand) body() []byte {
	b := make([]byte, 0, helloSize)
	b = append(b, h.version[:]...)
	b = append(b, make([]byte, helloPadding)...)
	b = append(b, h.transient[:]...)
	b = append(b, h.nonce[:]...)
	return append(b, h.box[:]...)
}

func parseHello(b []byte) (*helloCommand, error) {
	if len(b) != helloSize {
		return nil, fmt.Errorf("%w: HELLO of %d bytes instead of %d", errMalformed, len(b), helloSize)
	}
	h := &helloCommand{}
	r := reader{b: b}
	r.read(h.version[:])
	if h.version != curveVersion {
		return nil, fmt.Errorf("%w: HELLO of CurveZMQ version %d.%d, not 1.0", errMalformed, h.version[0], h.version[1])
	}
	if padding := r.next(helloPadding); !allZero(padding) {
		return nil, fmt.Errorf("%w: HELLO padding is not zero", errMalformed)
	}
	r.read(h.transient[:])
	r.read(h.nonce[:])
	r.read(h.box[:])
	return h, nil
}

// welcomeCommand is the body of WELCOME: a long nonce and Box[S' + cookie](S->C').
type welcomeCommand struct {
	nonce [longNonceSize]byte
	box   [welcomeBoxSize]byte
}

func (w *welcomeCommand) body() []byte {
	return append(append([]byte(nil), w.nonce[:]...), w.box[:]...)
}

func parseWelcome(b []byte) (*welcomeCommand, error) {
	if len(b) != welcomeSize {
		return nil, fmt.Errorf("%w: WELCOME of %d bytes instead of %d", errMalformed, len(b), welcomeSize)
	}
	w := &welcomeCommand{}
	r := reader{b: b}
	r.read(w.nonce[:])
	r.read(w.box[:])
	return w, nil
}

// initiateCommand is the body of INITIATE: the cookie of WELCOME, a short nonce and
// Box[C + vouch + metadata](C'->S').
type initiateCommand struct {
	cookie [cookieSize]byte
	nonce  [shortNonceSize]byte
	box    []byte
}

func (in *initiateCommand) body() []byte {
	b := append(append([]byte(nil), in.cookie[:]...), in.nonce[:]...)
	return append(b, in.box...)
}

func parseInitiate(b []byte) (*initiateCommand, error) {
	if len(b) < minInitiateSize || len(b) > minInitiateSize+maxMetadata {
		return nil, fmt.Errorf("%w: INITIATE of %d bytes, not %d to %d", errMalformed, len(b), minInitiateSize, minInitiateSize+maxMetadata)
	}
	in := &initiateCommand{}
	r := reader{b: b}
	r.read(in.cookie[:])
	r.read(in.nonce[:])
	in.box = append([]byte(nil), r.rest()...)
	return in, nil
}

// readyCommand is the body of READY: a short nonce and Box[metadata](S'->C').
type readyCommand struct {
	nonce [shortNonceSize]byte
	box   []byte
}

func (rd *readyCommand) body() []byte { return append(append([]byte(nil), rd.nonce[:]...), rd.box...) }

func parseReady(b []byte) (*readyCommand, error) {
	if len(b) < minReadySize || len(b) > minReadySize+maxMetadata {
		return nil, fmt.Errorf("%w: READY of %d bytes, not %d to %d", errMalformed, len(b), minReadySize, minReadySize+maxMetadata)
	}
	rd := &readyCommand{}
	r := reader{b: b}
	r.read(rd.nonce[:])
	rd.box = append([]byte(nil), r.rest()...)
	return rd, nil
}

// errorBody is the body of ERROR: the reason, preceded by its length in one octet.
func errorBody(reason string) []byte {
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	return append([]byte{byte(len(reason))}, reason...)
}

func parseError(b []byte) (string, error) {
	if len(b) == 0 || int(b[0]) != len(b)-1 {
		return "", fmt.Errorf("%w: ERROR whose reason length does not match its %d bytes", errMalformed, len(b))
	}
	return string(b[1:]), nil
}

// reader takes consecutive parts of a command whose length the caller checked.
type reader struct {
	b   []byte
	off int
}

func (r *reader) next(n int) []byte {
	p := r.b[r.off : r.off+n]
	r.off += n
	return p
}

func (r *reader) read(dst []byte) { copy(dst, r.next(len(dst))) }

func (r *reader) rest() []byte { return r.b[r.off:] }

func allZero(b []byte) bool { return len(bytes.Trim(b, "\x00")) == 0 }

// shortNonce and longNonce make the 24-byte nonce of a box from its prefix and the nonce a
// command carries.
func shortNonce(prefix string, n [shortNonceSize]byte) *[24]byte {
	var out [24]byte
	copy(out[:], prefix)
	copy(out[len(prefix):], n[:])
	return &out
}

func longNonce(prefix string, n [longNonceSize]byte) *[24]byte {
	var out [24]byte
	copy(out[:], prefix)
	copy(out[len(prefix):], n[:])
	return &out
}

// counter writes a short nonce: a counter in network byte order.
func counter(n uint64) [shortNonceSize]byte {
	var out [shortNonceSize]byte
	binary.BigEndian.PutUint64(out[:], n)
	return out
}
