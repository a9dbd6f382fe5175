package curvezmq

import (
	"crypto/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParse feeds any body to the parser of any command: none may panic, and what one reads
// writes back to the same body.
func FuzzParse(f *testing.F) {
	keys, err := generate(rand.Reader)
	require.NoError(f, err)
	c, err := newClient(keys, keys.Public, rand.Reader)
	require.NoError(f, err)
	s := newServer(keys, rand.Reader)
	hello := c.hello()
	welcome, err := s.hello(hello)
	require.NoError(f, err)
	initiate, err := c.welcome(welcome, []byte("\x0bSocket-Type\x00\x00\x00\x06DEALER"))
	require.NoError(f, err)
	ready := s.ready(nil)
	for kind, body := range [][]byte{hello, welcome, initiate, ready, errorBody("no")} {
		f.Add(uint8(kind), body)
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		var back []byte
		switch kind % 5 {
		case 0:
			h, err := parseHello(body)
			if err != nil {
				require.ErrorIs(t, err, errMalformed)
				return
			}
			back = h.body()
		case 1:
			w, err := parseWelcome(body)
			if err != nil {
				require.ErrorIs(t, err, errMalformed)
				return
			}
			back = w.body()
		case 2:
			in, err := parseInitiate(body)
			if err != nil {
				require.ErrorIs(t, err, errMalformed)
				return
			}
			back = in.body()
		case 3:
			rd, err := parseReady(body)
			if err != nil {
				require.ErrorIs(t, err, errMalformed)
				return
			}
			back = rd.body()
		case 4:
			reason, err := parseError(body)
			if err != nil {
				require.ErrorIs(t, err, errMalformed)
				return
			}
			back = errorBody(reason)
		}
		require.Equal(t, body, back)
	})
}

// FuzzServer gives a server any HELLO and INITIATE: it may refuse them, never panic.
func FuzzServer(f *testing.F) {
	keys, err := generate(rand.Reader)
	require.NoError(f, err)
	c, err := newClient(keys, keys.Public, rand.Reader)
	require.NoError(f, err)
	f.Add(c.hello(), make([]byte, minInitiateSize))
	f.Fuzz(func(_ *testing.T, hello, initiate []byte) {
		s := newServer(keys, rand.Reader)
		if _, err := s.hello(hello); err != nil {
			return
		}
		_, _, _ = s.initiate(initiate)
	})
}
