// Command loopback runs a command in a network namespace of its own in which only the loopback
// interface exists, and is up: whatever the command and its children dial outside 127.0.0.0/8
// fails with "network is unreachable" before a packet leaves, and 127.0.0.0/8 works as usual.
// `make test` runs every test binary through it (go test -exec loopback), so that the API
// servers, etcd and managers the tests start are held to loopback too, not only the dials that
// go through e2e/netguard.
//
//	loopback COMMAND [ARG...]
//
// It needs CAP_SYS_ADMIN (root, or a user namespace that grants it). Without it, it prints one
// warning line to stderr and runs the command in the current network namespace: the tests'
// own guard (e2e/netguard) then still refuses what goes through it.
//
// The namespace is the calling thread's: unshare(CLONE_NEWNET) moves only the thread that calls
// it, so the thread is locked, and the command is exec'd from it. execve keeps the thread's
// namespace for the new program, and every process that program starts inherits it.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/fluxfed/fluxfed/e2e/netns"
)

// sys are the system calls run makes, so that a test can make them fail.
type sys struct {
	// unshare and setns are unix.Unshare and unix.Setns.
	unshare func(flags int) error
	setns   func(fd, nstype int) error
	// loopbackUp brings the loopback interface of the current network namespace up.
	loopbackUp func() error
	// exec replaces the process, as unix.Exec; it returns only on failure.
	exec func(argv0 string, argv, envv []string) error
}

var realSys = sys{unshare: unix.Unshare, setns: unix.Setns, loopbackUp: netns.LoopbackUp, exec: unix.Exec}

func main() {
	runtime.LockOSThread() // the namespace is this thread's; exec must happen on it
	os.Exit(run(os.Args[1:], os.Stderr, realSys))
}

// run isolates the calling thread and execs args; it returns an exit code only when it cannot
// exec.
func run(args []string, stderr io.Writer, s sys) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: loopback COMMAND [ARG...]  (runs COMMAND where only the loopback network exists)")
		return 2
	}
	path, err := exec.LookPath(args[0])
	if err != nil {
		fmt.Fprintf(stderr, "loopback: %v\n", err)
		return 127
	}
	switch err := isolate(s); {
	case errors.Is(err, errStranded):
		fmt.Fprintf(stderr, "loopback: %v\n", err)
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "loopback: warning: running %s in the host's network namespace, not one of its own with only loopback: %v\n", args[0], err)
	}
	err = s.exec(path, args, os.Environ())
	fmt.Fprintf(stderr, "loopback: running %s: %v\n", path, err)
	return 127
}

// errStranded means the thread is in a new namespace whose loopback is down, and could not go
// back: running the command there would fail even on loopback.
var errStranded = errors.New("stranded in a network namespace without loopback")

// isolate moves the calling thread into a new network namespace and brings its loopback
// interface up. When it cannot bring loopback up, it moves the thread back, so that the
// command runs as if there were no namespace support.
func isolate(s sys) error {
	// The thread's own namespace, to come back to; /proc/self would name the main thread's.
	host, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return fmt.Errorf("opening this thread's network namespace: %w", err)
	}
	defer host.Close()
	if err := s.unshare(unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
	}
	if err := s.loopbackUp(); err != nil {
		if backErr := s.setns(int(host.Fd()), unix.CLONE_NEWNET); backErr != nil {
			return fmt.Errorf("%w: bringing lo up: %w; going back to the host's namespace: %w", errStranded, err, backErr)
		}
		return fmt.Errorf("bringing lo up in the new namespace: %w", err)
	}
	return nil
}
