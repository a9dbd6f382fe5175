// Package curve makes and reads the CURVE certificate that every broker of a Flux instance
// shares: a Curve25519 keypair in Z85, written in the ZPL file format `flux keygen` writes and
// flux-core's cert.c reads. Everything here is pure; the entropy for a new keypair is passed in.
//
// The secret key never leaves this package except inside the file that File returns: a
// Certificate prints with its secret key redacted, and errors never quote it.
package curve

import (
	"bytes"
	"crypto/ecdh"
	"crypto/subtle"
	"fmt"
	"io"
	"strconv"
	"time"
)

// KeySize is the size of a Curve25519 key in bytes; its Z85 text is 40 characters.
const KeySize = 32

const z85KeyLen = KeySize / 4 * 5

// maxLine is the longest line flux-core reads whole: cert.c reads lines with fgets into a
// 256-byte buffer, so a longer line is split and its tail misread.
const maxLine = 255

// Metadata is one key = "value" entry of the certificate's metadata section. flux-core logs the
// name entry when a broker authenticates a peer; the rest is informational.
type Metadata struct {
	Key   string
	Value string
}

// Certificate is a CURVE keypair with its metadata. It prints with the secret key redacted
// (String, GoString, Format); File is the only way to get the key out. Make one with Generate
// or Parse: the zero Certificate has no keys.
type Certificate struct {
	public [KeySize]byte
	// secret returns the secret key. It is a closure, not an array, because whatever walks a
	// struct by reflection (fmt printing a Certificate in an unexported field, where it cannot
	// call Format; test diffs; debug dumps) reaches an array's bytes but prints a func as an
	// address.
	secret   func() [KeySize]byte
	metadata []Metadata
}

// Generate makes a certificate from KeySize bytes of entropy (crypto/rand.Reader in
// production) and the given metadata, kept in order. The public key is the X25519 product of
// the secret key and the base point, as libzmq's zmq_curve_keypair computes it.
func Generate(entropy io.Reader, metadata ...Metadata) (*Certificate, error) {
	var secret [KeySize]byte
	if _, err := io.ReadFull(entropy, secret[:]); err != nil {
		return nil, fmt.Errorf("reading entropy for a CURVE key: %w", err)
	}
	return fromSecret(secret, metadata)
}

// KeygenMetadata returns the metadata `flux keygen` would write for a certificate named name,
// made on hostname at created: the name entry, keygen.hostname and keygen.time (UTC). Empty
// arguments are left out. The values are inputs so that rendering stays pure.
func KeygenMetadata(name, hostname string, created time.Time) []Metadata {
	var m []Metadata
	if name != "" {
		m = append(m, Metadata{Key: "name", Value: name})
	}
	if hostname != "" {
		m = append(m, Metadata{Key: "keygen.hostname", Value: hostname})
	}
	if !created.IsZero() {
		m = append(m, Metadata{Key: "keygen.time", Value: created.UTC().Format("2006-01-02T15:04:05")})
	}
	return m
}

func fromSecret(secret [KeySize]byte, metadata []Metadata) (*Certificate, error) {
	seen := make(map[string]bool, len(metadata))
	for _, m := range metadata {
		if err := checkMetadata(m); err != nil {
			return nil, err
		}
		if seen[m.Key] {
			return nil, fmt.Errorf("curve: metadata key %q given twice", m.Key)
		}
		seen[m.Key] = true
	}
	return &Certificate{public: publicKey(secret), secret: holdSecret(secret), metadata: append([]Metadata(nil), metadata...)}, nil
}

// publicKey returns the X25519 public key of secret. crypto/ecdh clamps the scalar as libsodium
// does, so any 32 bytes make a valid secret key.
func publicKey(secret [KeySize]byte) [KeySize]byte {
	priv, err := ecdh.X25519().NewPrivateKey(secret[:])
	if err != nil {
		// NewPrivateKey only checks the length, which the array type guarantees.
		panic("curve: " + err.Error())
	}
	var pub [KeySize]byte
	copy(pub[:], priv.PublicKey().Bytes())
	return pub
}

// checkMetadata applies flux-core's rules for metadata entries (cert.c valid_key, valid_value)
// and its line length.
func checkMetadata(m Metadata) error {
	if !validKey(m.Key) {
		return fmt.Errorf("curve: metadata key %q: keys are letters, digits, '.' and '-'", m.Key)
	}
	if !validValue(m.Value) {
		return fmt.Errorf("curve: metadata %s: the value may only hold letters, digits, spaces and .-:+=^!/*?&<>()[]{}@%%$#", m.Key)
	}
	if n := len(metadataLine(m)); n > maxLine {
		return fmt.Errorf("curve: metadata %s: the line would be %d bytes, more than the %d Flux reads", m.Key, n, maxLine)
	}
	return nil
}

func metadataLine(m Metadata) string { return "    " + m.Key + " = \"" + m.Value + "\"" }

// PublicKey returns the public key in Z85.
func (c *Certificate) PublicKey() string { return z85Key(c.public) }

// Metadata returns a copy of the metadata entries, in file order.
func (c *Certificate) Metadata() []Metadata { return append([]Metadata(nil), c.metadata...) }

// Equal reports whether c and o hold the same keys and the same metadata in the same order.
// The secret keys are compared in constant time.
func (c *Certificate) Equal(o *Certificate) bool {
	if c == nil || o == nil {
		return c == o
	}
	if c.public != o.public || subtle.ConstantTimeCompare(c.secretBytes(), o.secretBytes()) != 1 || len(c.metadata) != len(o.metadata) {
		return false
	}
	for i := range c.metadata {
		if c.metadata[i] != o.metadata[i] {
			return false
		}
	}
	return true
}

// String returns a description with the public key only.
func (c Certificate) String() string {
	return "curve.Certificate{public-key: " + strconv.Quote(c.PublicKey()) + ", secret-key: REDACTED}"
}

// GoString is String, so that %#v does not print the secret key either.
func (c Certificate) GoString() string { return c.String() }

// Format writes String for every verb, so that no fmt verb prints the secret key.
func (c Certificate) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// File returns the certificate file as `flux keygen` writes it and flux-core's cert.c reads it:
// two comment lines and a blank line, then the unindented metadata and curve sections whose
// entries are indented key = "value" lines. The broker refuses the file unless only its owner
// can read it (mode 0400 or 0600); that is for whoever writes it to disk.
func File(c *Certificate) []byte {
	var b bytes.Buffer
	b.WriteString("#  ZeroMQ CURVE **Secret** Certificate\n")
	b.WriteString("#  DO NOT DISTRIBUTE\n")
	b.WriteString("\n")
	b.WriteString("metadata\n")
	for _, m := range c.metadata {
		b.WriteString(metadataLine(m))
		b.WriteByte('\n')
	}
	b.WriteString("curve\n")
	b.WriteString("    public-key = \"" + z85Key(c.public) + "\"\n")
	var secret [KeySize]byte
	copy(secret[:], c.secretBytes())
	b.WriteString("    secret-key = \"" + z85Key(secret) + "\"\n")
	return b.Bytes()
}

// holdSecret returns the closure a Certificate keeps its secret key in.
func holdSecret(secret [KeySize]byte) func() [KeySize]byte {
	return func() [KeySize]byte { return secret }
}

// secretBytes returns the secret key, or KeySize zero bytes for the zero Certificate.
func (c *Certificate) secretBytes() []byte {
	if c.secret == nil {
		return make([]byte, KeySize)
	}
	k := c.secret()
	return k[:]
}

func z85Key(k [KeySize]byte) string {
	s, err := EncodeZ85(k[:])
	if err != nil {
		panic("curve: " + err.Error()) // 32 is a multiple of 4
	}
	return s
}
