package clusters

import (
	"bufio"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fluxfed/fluxfed/e2e/netguard"
)

// echoBackend answers every line with the line in upper case and the address the connection came
// from, until the client stops sending; then it says "bye" and closes.
func echoBackend(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				s := bufio.NewScanner(c)
				for s.Scan() {
					_, _ = io.WriteString(c, strings.ToUpper(s.Text())+" from "+c.RemoteAddr().(*net.TCPAddr).IP.String()+"\n")
				}
				_, _ = io.WriteString(c, "bye\n")
			}()
		}
	}()
	return l.Addr().String()
}

// freePort returns a port that is free on every one of addrs at the time of asking.
func freePort(t *testing.T, addrs ...string) int {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", addrs[0]+":0")
		require.NoError(t, err)
		port := l.Addr().(*net.TCPAddr).Port
		free := true
		for _, a := range addrs[1:] {
			other, err := net.Listen("tcp", net.JoinHostPort(a, strconv.Itoa(port)))
			if err != nil {
				free = false
				break
			}
			_ = other.Close()
		}
		_ = l.Close()
		if free {
			return port
		}
	}
	t.Fatal("no port free on every address")
	return 0
}

var dialer netguard.Dialer

func TestForwardNodePort(t *testing.T) {
	nodes := []string{"127.101.0.1", "127.101.0.2"}
	port := freePort(t, nodes...)
	f, err := ForwardNodePort(nodes, port, echoBackend(t))
	require.NoError(t, err)
	defer f.Close()
	require.Equal(t, []string{"127.101.0.1:" + strconv.Itoa(port), "127.101.0.2:" + strconv.Itoa(port)}, f.Addrs())

	for _, addr := range f.Addrs() {
		c, err := dialer.Dial("tcp", addr)
		require.NoError(t, err)
		_, err = io.WriteString(c, "ping\nflux\n")
		require.NoError(t, err)
		// The client stops sending; the backend's last words still come back.
		require.NoError(t, c.(*net.TCPConn).CloseWrite())
		got, err := io.ReadAll(c)
		require.NoError(t, err)
		require.Equal(t, "PING from 127.0.0.1\nFLUX from 127.0.0.1\nbye\n", string(got), "through %s", addr)
		require.NoError(t, c.Close())
	}
}

func TestForwardNodePortBackendDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	backend := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now

	f, err := ForwardNodePort([]string{"127.101.0.1"}, freePort(t, "127.101.0.1"), backend)
	require.NoError(t, err)
	defer f.Close()
	c, err := dialer.Dial("tcp", f.Addrs()[0])
	require.NoError(t, err, "the node port accepts, as a node does")
	defer c.Close()
	n, err := c.Read(make([]byte, 1))
	require.Zero(t, n)
	require.Error(t, err, "and the connection ends without an answer")
}

func TestForwarderClose(t *testing.T) {
	f, err := ForwardNodePort([]string{"127.101.0.1"}, freePort(t, "127.101.0.1"), echoBackend(t))
	require.NoError(t, err)
	addr := f.Addrs()[0]
	c, err := dialer.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	r := bufio.NewReader(c)
	_, err = io.WriteString(c, "open\n")
	require.NoError(t, err)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "OPEN from 127.0.0.1\n", line)

	// Close returns once every goroutine ended, so the open connection is over, and nothing
	// listens any more.
	require.NoError(t, f.Close())
	_, err = r.ReadString('\n')
	require.Error(t, err)
	_, err = dialer.Dial("tcp", addr)
	require.Error(t, err)
	require.NoError(t, f.Close(), "closing twice")
}

func TestForwardNodePortRefuses(t *testing.T) {
	outside := netip.AddrFrom4([4]byte{10, 1, 0, 1}).String() // written from its bytes: see netguard's tests
	backend := echoBackend(t)
	tests := []struct {
		nodes   []string
		port    int
		backend string
		err     string
	}{
		{nodes: nil, port: 30000, backend: backend, err: "no node addresses"},
		{nodes: []string{"127.101.0.1"}, port: 0, backend: backend, err: "port 0 is not in 1-65535"},
		{nodes: []string{"127.101.0.1"}, port: 70000, backend: backend, err: "port 70000 is not in 1-65535"},
		{nodes: []string{"127.101.0.1"}, port: 30000, backend: outside + ":8050", err: "the backend: \"" + outside + ":8050\": not a loopback address"},
		{nodes: []string{"127.101.0.1", outside}, port: 30000, backend: backend, err: "node address: \"" + outside + "\": not a loopback address"},
		{nodes: []string{"127.101.0.1", "node-2"}, port: 30000, backend: backend, err: "node address: \"node-2\""},
	}
	for _, tt := range tests {
		_, err := ForwardNodePort(tt.nodes, tt.port, tt.backend)
		require.ErrorContains(t, err, tt.err)
	}
	// The node it listened on before the refusal is free again.
	port := freePort(t, "127.101.0.1")
	_, err := ForwardNodePort([]string{"127.101.0.1", outside}, port, backend)
	require.Error(t, err)
	l, err := net.Listen("tcp", net.JoinHostPort("127.101.0.1", strconv.Itoa(port)))
	require.NoError(t, err)
	require.NoError(t, l.Close())

	// A port another program holds.
	taken, err := net.Listen("tcp", "127.101.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	_, err = ForwardNodePort([]string{"127.101.0.1"}, taken.Addr().(*net.TCPAddr).Port, backend)
	require.ErrorContains(t, err, "address already in use")
}

func TestClusterForwardNodePort(t *testing.T) {
	c := &Cluster{Name: "hub", NodeAddresses: []string{planFor(0).nodeIP(1), planFor(0).nodeIP(2)}}
	backend := echoBackend(t)
	port := freePort(t, c.NodeAddresses...)
	svc := func(typ corev1.ServiceType, nodePort int) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "bursting-root-lead-broker"},
			Spec:       corev1.ServiceSpec{Type: typ, Ports: []corev1.ServicePort{{Port: 8050, NodePort: int32(nodePort)}}},
		}
	}
	_, err := c.ForwardNodePort(svc(corev1.ServiceTypeClusterIP, 0), backend)
	require.ErrorContains(t, err, `service demo/bursting-root-lead-broker is of type "ClusterIP", which has no node port`)
	_, err = c.ForwardNodePort(svc(corev1.ServiceTypeNodePort, 0), backend)
	require.ErrorContains(t, err, "has no node port assigned yet")
	_, err = (&Cluster{Name: "empty"}).ForwardNodePort(svc(corev1.ServiceTypeNodePort, port), backend)
	require.ErrorContains(t, err, "cluster empty has no node addresses")

	f, err := c.ForwardNodePort(svc(corev1.ServiceTypeNodePort, port), backend)
	require.NoError(t, err)
	defer f.Close()
	require.Len(t, f.Addrs(), 2)
	for _, addr := range f.Addrs() {
		conn, err := dialer.Dial("tcp", addr)
		require.NoError(t, err)
		_, err = io.WriteString(conn, "x\n")
		require.NoError(t, err)
		line, err := bufio.NewReader(conn).ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "X from 127.0.0.1\n", line)
		require.NoError(t, conn.Close())
	}
	_, err = c.ForwardNodePort(svc(corev1.ServiceTypeNodePort, port), backend)
	require.ErrorContains(t, err, "address already in use", "a second forwarder of the same node port")
}
