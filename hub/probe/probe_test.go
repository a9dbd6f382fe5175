package probe

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// wantGreeting is a ZMTP 3.1 CURVE client greeting, spelled out byte by byte.
var wantGreeting = []byte{
	0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0x7F, // signature
	3, 1, // version 3.1
	'C', 'U', 'R', 'V', 'E', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // mechanism
	0,                                                                                           // as-server
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // filler
}

// serve runs handle for every connection to a new listener on 127.0.0.1 until the test ends, and
// returns the listener's address and port.
func serve(t *testing.T, handle func(net.Conn)) (string, int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer func() { _ = conn.Close() }()
				handle(conn)
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	return hostPort(t, ln.Addr().String())
}

func hostPort(t *testing.T, addr string) (string, int32) {
	t.Helper()
	host, portText, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	port, err := strconv.ParseInt(portText, 10, 32)
	require.NoError(t, err)
	return host, int32(port)
}

// zmtpPeer greets the way libzmq does: its signature (with libzmq's non-zero padding) as soon as
// it accepts, its major version once it has the client's signature, and the rest of its greeting
// once it has the client's major version. It records what the client sent, up to the close.
type zmtpPeer struct {
	major, minor byte
	mechanism    string

	mu       sync.Mutex
	received []byte
}

func (p *zmtpPeer) handle(conn net.Conn) {
	greeting := make([]byte, greetingSize)
	greeting[0] = 0xFF
	greeting[8] = 1 // libzmq: the length of an empty routing id, plus one
	greeting[9] = 0x7F
	greeting[versionMajorPos] = p.major
	greeting[versionMinorPos] = p.minor
	copy(greeting[mechanismPos:mechanismPos+mechanismSize], p.mechanism)
	received := make([]byte, greetingSize)
	steps := []struct{ send, expect [2]int }{
		{send: [2]int{0, signatureSize}, expect: [2]int{0, signatureSize}},
		{send: [2]int{signatureSize, versionMajorPos + 1}, expect: [2]int{signatureSize, versionMajorPos + 1}},
		{send: [2]int{versionMajorPos + 1, greetingSize}, expect: [2]int{versionMajorPos + 1, greetingSize}},
	}
	for _, s := range steps {
		if _, err := conn.Write(greeting[s.send[0]:s.send[1]]); err != nil {
			return
		}
		if _, err := io.ReadFull(conn, received[s.expect[0]:s.expect[1]]); err != nil {
			return
		}
	}
	rest, _ := io.ReadAll(conn) // until the client closes
	received = append(received, rest...)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.received = received
}

func (p *zmtpPeer) got() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.received
}

func withTimeout(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestGreetAcceptsACURVEPeer(t *testing.T) {
	for _, version := range []struct{ major, minor byte }{{3, 0}, {3, 1}, {4, 0}} {
		t.Run(strconv.Itoa(int(version.major))+"."+strconv.Itoa(int(version.minor)), func(t *testing.T) {
			peer := &zmtpPeer{major: version.major, minor: version.minor, mechanism: "CURVE"}
			host, port := serve(t, peer.handle)

			require.NoError(t, Greet(withTimeout(t, 5*time.Second), host, port))

			require.Eventually(t, func() bool { return peer.got() != nil }, 5*time.Second, 10*time.Millisecond)
			require.Equal(t, wantGreeting, peer.got(), "the probe sends its greeting, then nothing: no CURVE HELLO")
		})
	}
}

func TestGreetRefusesOtherMechanisms(t *testing.T) {
	for _, mechanism := range []string{"NULL", "PLAIN", "GSSAPI"} {
		t.Run(mechanism, func(t *testing.T) {
			peer := &zmtpPeer{major: 3, minor: 1, mechanism: mechanism}
			host, port := serve(t, peer.handle)

			err := Greet(withTimeout(t, 5*time.Second), host, port)
			require.ErrorIs(t, err, ErrNotCURVE)
			require.NotErrorIs(t, err, ErrNotZMTP)
			require.NotErrorIs(t, err, ErrUnreachable)
			require.EqualError(t, err, "lead broker "+net.JoinHostPort(host, strconv.Itoa(int(port)))+
				": the endpoint speaks ZMTP 3 but not the CURVE mechanism: it offers the "+mechanism+" mechanism")
		})
	}
}

func TestGreetRefusesAnHTTPServer(t *testing.T) {
	// An HTTP server waits for the end of a request line that a greeting never sends.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("hello"))
	}))
	t.Cleanup(srv.Close)
	host, port := hostPort(t, srv.Listener.Addr().String())

	err := Greet(withTimeout(t, 300*time.Millisecond), host, port)
	require.ErrorIs(t, err, ErrNotZMTP)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "the endpoint answered but is not a ZMTP 3 CURVE peer: it sent nothing before the deadline")
}

func TestGreetRefusesAnHTTPServerThatGivesUp(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ReadHeaderTimeout = 50 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)
	host, port := hostPort(t, srv.Listener.Addr().String())

	err := Greet(withTimeout(t, 5*time.Second), host, port)
	require.ErrorIs(t, err, ErrNotZMTP)
	require.NotErrorIs(t, err, context.DeadlineExceeded)
}

func TestGreetRefusesOtherAnswers(t *testing.T) {
	cases := []struct {
		name   string
		answer []byte
		detail string
	}{
		{
			name:   "SSH banner",
			answer: []byte("SSH-2.0-OpenSSH_9.6\r\n"),
			detail: "it answered, but not with a ZMTP greeting",
		},
		{
			name:   "ZMTP 1.0 with a long routing id",
			answer: []byte{0xFF, 0, 0, 0, 0, 0, 0, 1, 0, 0x00},
			detail: "it speaks ZMTP 1.0",
		},
		{
			name:   "ZMTP 2.0",
			answer: []byte{0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F, 1, 5},
			detail: "it speaks ZMTP 2.0",
		},
		{
			name:   "a greeting cut short",
			answer: []byte{0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F, 3, 1, 'C', 'U', 'R'},
			detail: "its greeting stopped after 15 bytes",
		},
		{
			name:   "nothing at all",
			answer: nil,
			detail: "it closed the connection without a greeting",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			host, port := serve(t, func(conn net.Conn) {
				_, _ = conn.Write(tc.answer)
				// Read the probe's greeting before closing, so that the close is a FIN and not a reset.
				_, _ = io.ReadFull(conn, make([]byte, greetingSize))
			})

			start := time.Now()
			err := Greet(withTimeout(t, 5*time.Second), host, port)
			require.ErrorIs(t, err, ErrNotZMTP)
			require.NotErrorIs(t, err, ErrNotCURVE)
			require.NotErrorIs(t, err, ErrUnreachable)
			require.ErrorContains(t, err, "the endpoint answered but is not a ZMTP 3 CURVE peer: "+tc.detail)
			require.Less(t, time.Since(start), time.Second, "told apart without waiting for the deadline")
		})
	}
}

func TestGreetReportsAClosedPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	host, port := hostPort(t, ln.Addr().String())
	require.NoError(t, ln.Close())

	err = Greet(withTimeout(t, 5*time.Second), host, port)
	require.ErrorIs(t, err, ErrUnreachable)
	require.NotErrorIs(t, err, ErrNotZMTP)
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "lead broker "+net.JoinHostPort(host, strconv.Itoa(int(port)))+": cannot connect: ")
}

func TestGreetGivesUpOnASilentPeer(t *testing.T) {
	host, port := serve(t, func(conn net.Conn) { _, _ = io.Copy(io.Discard, conn) })

	start := time.Now()
	err := Greet(withTimeout(t, 300*time.Millisecond), host, port)
	require.ErrorIs(t, err, ErrNotZMTP)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "it sent nothing before the deadline")
	require.Less(t, time.Since(start), 2*time.Second)
}

func TestGreetStopsWhenCancelled(t *testing.T) {
	host, port := serve(t, func(conn net.Conn) { _, _ = io.Copy(io.Discard, conn) })
	ctx, cancel := context.WithCancel(t.Context()) // no deadline: cancellation alone must end it
	time.AfterFunc(100*time.Millisecond, cancel)

	start := time.Now()
	err := Greet(ctx, host, port)
	require.ErrorIs(t, err, ErrNotZMTP)
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, time.Since(start), DefaultTimeout/2)
}

func TestGreetRefusesABadEndpoint(t *testing.T) {
	for _, tc := range []struct {
		address string
		port    int32
	}{{"", 8050}, {"127.0.0.1", 0}, {"127.0.0.1", -1}, {"127.0.0.1", 65536}} {
		err := Greet(t.Context(), tc.address, tc.port)
		require.Error(t, err)
		for _, kind := range []error{ErrUnreachable, ErrNotZMTP, ErrNotCURVE} {
			require.False(t, errors.Is(err, kind), "%v is a caller's mistake, not %v", err, kind)
		}
	}
}

func TestClientGreetingLayout(t *testing.T) {
	g := clientGreeting()
	require.Equal(t, wantGreeting, g[:])
	require.Len(t, wantGreeting, greetingSize)
	require.True(t, bytes.HasPrefix(g[mechanismPos:], []byte("CURVE\x00")))
}

// TestGreetNeverEchoesThePeer sends answers that carry text of the peer's choosing: the error,
// which ends up in the root's status, says what kind of peer it was and holds none of it.
func TestGreetNeverEchoesThePeer(t *testing.T) {
	const secret = "hunter2"
	mechanism := make([]byte, mechanismSize)
	copy(mechanism, "X-"+secret)
	greeting := append([]byte{0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F, 3, 1}, mechanism...)
	greeting = append(greeting, make([]byte, greetingSize-len(greeting))...)
	cases := []struct {
		name   string
		answer []byte
		kind   error
	}{
		{name: "HTTP", answer: []byte("HTTP/1.1 400 Bad Request\r\nX-Token: " + secret + "\r\n\r\n"), kind: ErrNotZMTP},
		{name: "terminal escapes", answer: []byte("\x1b]0;" + secret + "\x07\x1b[2J"), kind: ErrNotZMTP},
		{name: "a greeting cut short", answer: greeting[:40], kind: ErrNotZMTP},
		{name: "a mechanism of the peer's choosing", answer: greeting, kind: ErrNotCURVE},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			host, port := serve(t, func(conn net.Conn) {
				_, _ = conn.Write(tc.answer)
				_, _ = io.ReadFull(conn, make([]byte, greetingSize))
			})
			err := Greet(withTimeout(t, 5*time.Second), host, port)
			require.ErrorIs(t, err, tc.kind)
			for _, echo := range []string{secret, "HTTP", "X-", "\x1b"} {
				require.NotContains(t, err.Error(), echo)
			}
		})
	}
}
