package testenv

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// FreeAddr returns a loopback address with a port nothing listens on, for a server a test
// starts (a manager's metrics or probe endpoint).
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// LogBuffer is a bytes.Buffer that a process's log writes and a test's reads may share.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// WaitReady waits until the /readyz endpoint at addr answers 200 OK, as a manager's does once
// it has started, and fails the test with log if it has not within 30 s.
func WaitReady(t testing.TB, addr string, log fmt.Stringer) {
	t.Helper()
	ready := func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	for deadline := time.Now().Add(30 * time.Second); !ready(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never became ready; log:\n%s", addr, log)
		}
	}
}

// WriteKubeconfig writes a kubeconfig that reaches the API server as an administrator
// (Kubeconfig) into dir, as dir/kubeconfig, and returns its path. kubectl keeps its cache beside
// it, so the calls of a test that share dir share the cache.
func (e *Env) WriteKubeconfig(t testing.TB, dir string) string {
	t.Helper()
	data, err := e.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
