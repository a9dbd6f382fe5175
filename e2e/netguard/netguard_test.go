package netguard

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { Main(m) }

// v4 writes an IPv4 address from its bytes, so that no private or documentation address
// appears literally in e2e/ (where a grep for them must find none), even in a test that shows
// they are refused.
func v4(a, b, c, d byte) string { return netip.AddrFrom4([4]byte{a, b, c, d}).String() }

func TestAllowed(t *testing.T) {
	allowed := []string{
		"127.0.0.1", "127.0.0.1:80", "127.0.0.1:0", "127.0.0.1:65535", "127.0.0.1:",
		"127.0.0.0", "127.255.255.255:1", "127.101.0.3:30093", "127.1.2.3",
		"[127.0.0.1]:80", // brackets are allowed around any host in host:port
		"localhost", "localhost:8080",
	}
	for _, a := range allowed {
		require.NoError(t, Allowed(a), a)
	}
	refused := []string{
		// Names: resolving them is a packet to a resolver; localhost only when exact.
		"example.invalid", "example.invalid:80", "LOCALHOST:80", "localhost.:80", "localhost.localdomain",
		"kubernetes.default.svc", "lammps-0.flux-service.research.svc.cluster.local:8050",
		// IPv6, the loopback included, and IPv4 written as IPv6.
		"::1", "[::1]:80", "[::1]", "::", "[::ffff:127.0.0.1]:80", "::ffff:127.0.0.1", "[fe80::1%lo]:80", "[2001:db8::1]:443",
		// The unspecified address: dialling it reaches the local host through any interface.
		"0.0.0.0", "0.0.0.0:80", ":80", "",
		// Private and documentation ranges, and the neighbours of 127/8.
		v4(10, 0, 0, 1), v4(10, 1, 0, 1) + ":30093", v4(172, 16, 0, 1) + ":443", v4(192, 168, 1, 1),
		v4(192, 0, 2, 10) + ":30093", v4(198, 51, 100, 7), v4(203, 0, 113, 1) + ":22",
		"126.255.255.255", "128.0.0.1:80", "1.1.1.1:53",
		// Forms of 127.0.0.1 that Go does not parse as IPv4: the dialer would look them up.
		"127.1", "127.0.1", "2130706433", "0x7f000001", "127.000.000.001", "0127.0.0.1", "127.0.0.1.", " 127.0.0.1",
		"127.0.0.1%lo", "127.0.0.1 :80",
		// Malformed.
		"127.0.0.1:80:90", "[127.0.0.1", "127.0.0.1]:80", "[]:80", "tcp://127.0.0.1:80", "127.0.0.256", "127.0.0.1/8",
	}
	for _, a := range refused {
		err := Allowed(a)
		require.ErrorIs(t, err, ErrNotLoopback, "%q", a)
		require.ErrorContains(t, err, strconv.Quote(a))
	}
}

func FuzzAllowed(f *testing.F) {
	for _, s := range []string{"127.0.0.1:80", "localhost", "[::1]:80", "127.1", v4(10, 0, 0, 1), "[127.0.0.1]:1", "a:b:c", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, address string) {
		err := Allowed(address)
		if err != nil {
			require.ErrorIs(t, err, ErrNotLoopback)
			return
		}
		host := address
		if h, _, err := net.SplitHostPort(address); err == nil {
			host = h
		}
		if host == "localhost" {
			return
		}
		// Checked another way than Allowed does: four dotted decimal parts, the first 127.
		parts := strings.Split(host, ".")
		require.Len(t, parts, 4, "%q allowed", address)
		require.Equal(t, "127", parts[0], "%q allowed", address)
		ip := net.ParseIP(host)
		require.NotNil(t, ip, "%q allowed", address)
		require.True(t, ip.IsLoopback() && ip.To4() != nil, "%q allowed", address)
	})
}

// resetViolations forgets the refusals a test made on purpose, so that Main does not fail the
// package for them.
func resetViolations(t *testing.T) {
	t.Cleanup(func() {
		violations.Lock()
		defer violations.Unlock()
		violations.list = nil
	})
}

func TestDialerDialsLoopback(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	accepted := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			_, err = c.Write([]byte("hi"))
			_ = c.Close()
		}
		accepted <- err
	}()
	var d Dialer
	c, err := d.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	buf := make([]byte, 2)
	_, err = c.Read(buf)
	require.NoError(t, err)
	require.Equal(t, "hi", string(buf))
	require.NoError(t, <-accepted)
	require.Empty(t, Violations())
}

func TestDialerRefusesBeforeAnyPacket(t *testing.T) {
	resetViolations(t)
	// Control runs after the address is resolved and the socket made, just before connect: a
	// refused address must never get that far.
	controlled := 0
	d := Dialer{Dialer: net.Dialer{Control: func(string, string, syscall.RawConn) error {
		controlled++
		return errors.New("the test stops every connect")
	}}}
	for _, a := range []string{v4(192, 0, 2, 10) + ":30093", "example.invalid:80", "[::1]:80"} {
		_, err := d.DialContext(context.Background(), "tcp", a)
		require.ErrorIs(t, err, ErrNotLoopback)
		require.ErrorContains(t, err, "netguard: dial tcp")
	}
	_, err := d.Dial("tcp", "0.0.0.0:1")
	require.ErrorIs(t, err, ErrNotLoopback)
	require.Zero(t, controlled)

	v := Violations()
	require.Len(t, v, 4)
	require.Contains(t, v[0], strconv.Quote(v4(192, 0, 2, 10)+":30093"))
	for _, line := range v {
		require.Contains(t, line, "netguard.TestDialerRefusesBeforeAnyPacket (netguard_test.go:", "the caller is the test, not the dialer")
	}

	// A loopback address gets as far as connect.
	_, err = d.Dial("tcp", "127.0.0.1:1")
	require.ErrorContains(t, err, "the test stops every connect")
	require.Equal(t, 1, controlled)
	require.Len(t, Violations(), 4)
}

func TestDialerThroughHTTP(t *testing.T) {
	resetViolations(t)
	var d Dialer
	client := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	resp, err := client.Get("http://example.invalid/")
	if resp != nil {
		_ = resp.Body.Close()
	}
	require.ErrorIs(t, err, ErrNotLoopback)
	v := Violations()
	require.Len(t, v, 1)
	// net/http dials in a goroutine of its own: the test is not on its stack.
	require.Contains(t, v[0], `"example.invalid:80" dialled by net/http.`)
}

func TestCheck(t *testing.T) {
	resetViolations(t)
	var out bytes.Buffer
	require.Equal(t, 0, check(0, &out))
	require.Equal(t, 3, check(3, &out))
	require.Empty(t, out.String())

	_, err := (&Dialer{}).Dial("tcp", v4(10, 1, 0, 1)+":443")
	require.ErrorIs(t, err, ErrNotLoopback)
	require.Equal(t, 1, check(0, &out), "a refused dial fails a run whose tests passed")
	require.Contains(t, out.String(), "netguard: 1 dial(s) to addresses outside 127.0.0.0/8 were refused")
	require.Contains(t, out.String(), `netguard:   "`+v4(10, 1, 0, 1)+`:443" dialled by github.com/fluxfed/fluxfed/e2e/netguard.TestCheck`)
	out.Reset()
	require.Equal(t, 1, check(2, &out))
	require.NotEmpty(t, out.String())
}

// helperEnv makes TestHelper do what its value says, in a test binary that TestMainExits
// starts.
const helperEnv = "NETGUARD_TEST_HELPER"

// TestHelper is a test of the binary that TestMainExits starts; on its own it does nothing.
func TestHelper(t *testing.T) {
	switch os.Getenv(helperEnv) {
	case "refuse":
		_, err := (&Dialer{}).Dial("tcp", "example.invalid:443")
		require.ErrorIs(t, err, ErrNotLoopback) // the test passes; Main must fail the binary
	case "fail":
		t.Error("failing on purpose")
	}
}

// TestMainExits runs this test binary with Main as its TestMain, and checks its exit code and
// what it prints.
func TestMainExits(t *testing.T) {
	for _, tc := range []struct {
		mode   string
		code   int
		stderr string
	}{
		{mode: "pass", code: 0},
		{mode: "fail", code: 1},
		{mode: "refuse", code: 1, stderr: `netguard:   "example.invalid:443" dialled by github.com/fluxfed/fluxfed/e2e/netguard.TestHelper`},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), helperEnv+"="+tc.mode)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.code, code, "stderr:\n%s", stderr.String())
			require.Contains(t, stderr.String(), tc.stderr)
		})
	}
}
