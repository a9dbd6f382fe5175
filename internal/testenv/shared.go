package testenv

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
)

// sharedServer is the one API server of a package's tests that Shared hands out: started at the
// first call, stopped by Run after the last test. Starting one takes seconds on a quiet machine
// and a minute on a busy one, so a package whose tests each need an API server, but not one of
// their own, starts one.
type sharedServer struct {
	start func() (*Env, error)

	mu sync.Mutex
	// running is set by Run: a server is shared only where Run will stop it, so that no etcd or
	// kube-apiserver outlives the test binary.
	running bool
	started bool
	env     *Env
	err     error
}

// shared is the package's tests' shared API server.
var shared = &sharedServer{start: start}

// Main runs the tests of a package whose tests share one API server through Shared, stops that
// server and exits: func TestMain(m *testing.M) { testenv.Main(m) }.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main for a TestMain that has more to do after the tests: it runs m's tests, stops the
// shared API server, and returns the code to exit with (1 when the server did not stop).
func Run(m *testing.M) int {
	shared.mu.Lock()
	shared.running = true
	shared.mu.Unlock()
	return shared.stop(m.Run(), os.Stderr)
}

// Shared returns the API server that the package's tests share, starting it at the first call.
// The tests that share it keep out of each other's way: their objects live in namespaces of
// their own (GenerateName) or under names of their own, and they change nothing another test
// reads. A test that needs an API server to itself (it stops it, lists everything stored, runs
// controllers over the whole of it) uses Start. Shared fails the test when the server did not
// start (every later call gives the same error without trying again), and when the package's
// TestMain does not call Main or Run.
func Shared(t testing.TB) *Env {
	t.Helper()
	env, err := shared.get()
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// get returns the shared API server, starting it at the first call.
func (s *sharedServer) get() (*Env, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return nil, errors.New("testenv.Shared needs the package's TestMain to call testenv.Main(m) or testenv.Run(m), which stop the shared API server after the last test")
	}
	if !s.started {
		s.started = true
		s.env, s.err = s.start()
		if s.err != nil {
			s.err = fmt.Errorf("the API server the package's tests share: %w", s.err)
		}
	}
	return s.env, s.err
}

// stop stops the shared API server, if one was started, and returns code, or 1 when the server
// did not stop (saying so on stderr). Shared gives no server after it.
func (s *sharedServer) stop(code int, stderr io.Writer) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running = false
	if s.env == nil {
		return code
	}
	err := s.env.control.Stop()
	s.env = nil
	if err != nil {
		fmt.Fprintf(stderr, "testenv: stopping the API server the tests shared: %v\n", err)
		return max(code, 1)
	}
	return code
}
