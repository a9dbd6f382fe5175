package curvezmq_test

import (
	"context"
	"crypto/rand"
	"io"
	"log"
	"net"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/nacl/box"

	"github.com/fluxfed/fluxfed/e2e/brokersim/curvezmq"
	"github.com/fluxfed/fluxfed/e2e/netguard"
	"github.com/fluxfed/fluxfed/hub/probe"
)

func TestMain(m *testing.M) { netguard.Main(m) }

func keyPair(t *testing.T) curvezmq.KeyPair {
	t.Helper()
	pub, sec, err := box.GenerateKey(rand.Reader)
	require.NoError(t, err)
	return curvezmq.KeyPair{Public: *pub, Secret: *sec}
}

var quiet = zmq4.WithLogger(log.New(io.Discard, "", 0))

// listen starts a ROUTER socket, the CURVE server, on a free loopback port.
func listen(t *testing.T, sec zmq4.Security) (zmq4.Socket, *net.TCPAddr) {
	t.Helper()
	router := zmq4.NewRouter(t.Context(), zmq4.WithSecurity(sec), zmq4.WithID(zmq4.SocketIdentity("parent")), quiet)
	t.Cleanup(func() { _ = router.Close() })
	require.NoError(t, router.Listen("tcp://127.0.0.1:0"))
	return router, router.Addr().(*net.TCPAddr)
}

// dial connects a DEALER socket, the CURVE client, to addr.
func dial(t *testing.T, sec zmq4.Security, id string, addr *net.TCPAddr) (zmq4.Socket, error) {
	t.Helper()
	require.NoError(t, netguard.Allowed(addr.String()))
	dealer := zmq4.NewDealer(t.Context(), zmq4.WithSecurity(sec), zmq4.WithID(zmq4.SocketIdentity(id)), zmq4.WithDialerMaxRetries(0), quiet)
	t.Cleanup(func() { _ = dealer.Close() })
	return dealer, dealer.Dial("tcp://" + addr.String())
}

func TestSecurityCarriesMessages(t *testing.T) {
	keys := keyPair(t)
	router, addr := listen(t, curvezmq.Flux(keys))
	dealer, err := dial(t, curvezmq.Flux(keys), "child", addr)
	require.NoError(t, err)

	require.NoError(t, dealer.Send(zmq4.NewMsgString("hello")))
	msg, err := router.Recv()
	require.NoError(t, err)
	require.Equal(t, [][]byte{[]byte("child"), []byte("hello")}, msg.Frames, "the identity came through the handshake's metadata")
	require.NoError(t, router.Send(zmq4.NewMsgFrom([]byte("child"), []byte("welcome"))))
	msg, err = dealer.Recv()
	require.NoError(t, err)
	require.Equal(t, "welcome", string(msg.Bytes()))
}

func TestSecurityRefusesAnotherCertificate(t *testing.T) {
	keys := keyPair(t)
	router, addr := listen(t, curvezmq.Flux(keys))

	// A broker with another certificate takes its own public key for the server's: the server
	// cannot open HELLO and closes the connection.
	_, err := dial(t, curvezmq.Flux(keyPair(t)), "stranger", addr)
	require.ErrorIs(t, err, curvezmq.ErrHandshake)
	var hsErr *curvezmq.HandshakeError
	require.ErrorAs(t, err, &hsErr)
	require.ErrorContains(t, hsErr, "CURVE handshake failed: after HELLO: waiting for WELCOME")

	// A client that knows the server's key but presents a keypair of its own completes the
	// handshake, and is refused by name.
	_, err = dial(t, curvezmq.New(curvezmq.Config{Keys: keyPair(t), ServerKey: keys.Public}), "impostor", addr)
	require.ErrorIs(t, err, curvezmq.ErrHandshake)
	require.ErrorContains(t, err, `the peer refused: "client not authorized: the client's certificate is not this instance's"`)

	// The server goes on serving the right certificate.
	dealer, err := dial(t, curvezmq.Flux(keys), "child", addr)
	require.NoError(t, err)
	require.NoError(t, dealer.Send(zmq4.NewMsgString("still here")))
	msg, err := router.Recv()
	require.NoError(t, err)
	require.Equal(t, "child", string(msg.Frames[0]), "only the child got through")
}

func TestSecurityRefusesAnotherServer(t *testing.T) {
	_, addr := listen(t, curvezmq.Flux(keyPair(t)))
	// The client expects a server key that the server does not hold.
	_, err := dial(t, curvezmq.New(curvezmq.Config{Keys: keyPair(t), ServerKey: keyPair(t).Public}), "child", addr)
	require.ErrorIs(t, err, curvezmq.ErrHandshake)
}

// TestSecurityAnswersTheHubsProbe greets a CURVE server the way the hub greets an advertised
// lead broker, and checks that it answers as a Flux broker does, then still serves its
// children.
func TestSecurityAnswersTheHubsProbe(t *testing.T) {
	keys := keyPair(t)
	router, addr := listen(t, curvezmq.Flux(keys))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	require.NoError(t, probe.Greet(ctx, addr.IP.String(), int32(addr.Port)))

	dealer, err := dial(t, curvezmq.Flux(keys), "child", addr)
	require.NoError(t, err)
	require.NoError(t, dealer.Send(zmq4.NewMsgString("after the probe")))
	msg, err := router.Recv()
	require.NoError(t, err)
	require.Equal(t, "after the probe", string(msg.Frames[1]))
}

// TestNullPeerIsNotCURVE shows what the probe made of the stand-ins before they spoke CURVE.
func TestNullPeerIsNotCURVE(t *testing.T) {
	router := zmq4.NewRouter(t.Context(), quiet)
	t.Cleanup(func() { _ = router.Close() })
	require.NoError(t, router.Listen("tcp://127.0.0.1:0"))
	addr := router.Addr().(*net.TCPAddr)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := probe.Greet(ctx, addr.IP.String(), int32(addr.Port))
	require.ErrorIs(t, err, probe.ErrNotCURVE)
}
