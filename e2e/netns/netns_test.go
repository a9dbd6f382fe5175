package netns

import (
	"errors"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestLoopbackUpInANewNamespace brings lo up in a network namespace of the test's own (on a locked
// thread that is then thrown away): a connection to 127.0.0.1 fails there before, and is accepted
// after.
func TestLoopbackUpInANewNamespace(t *testing.T) {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			done <- err
			return
		}
		connect := func() error {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			defer ln.Close()
			conn, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
			if err != nil {
				return err
			}
			return conn.Close()
		}
		if connect() == nil {
			done <- errors.New("lo of a new namespace carried a connection before it was brought up")
			return
		}
		if err := LoopbackUp(); err != nil {
			done <- err
			return
		}
		done <- connect()
	}()
	require.NoError(t, <-done, "needs CAP_SYS_ADMIN, as every test binary of make test has under e2e/cmd/loopback")
}
