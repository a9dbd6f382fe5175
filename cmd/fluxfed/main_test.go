package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fluxfed/fluxfed/e2e/testenv"
)

func TestRunDispatch(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantErr    string
		wantStdout string
		wantStderr string
	}{
		{name: "no command prints usage and fails", args: nil, wantErr: "usage", wantStderr: "Commands:"},
		{name: "help", args: []string{"help"}, wantStderr: "manager"},
		{name: "unknown command", args: []string{"frobnicate"}, wantErr: `unknown command "frobnicate"`, wantStderr: "Usage: fluxfed"},
		{name: "version", args: []string{"version"}, wantStdout: "fluxfed devel (go"},
		{name: "version rejects arguments", args: []string{"version", "extra"}, wantErr: "no arguments"},
		{name: "manager rejects arguments", args: []string{"manager", "extra"}, wantErr: "no arguments"},
		{name: "manager rejects unknown flags", args: []string{"manager", "--no-such-flag"}, wantErr: "usage", wantStderr: "flag provided but not defined"},
		{name: "manager help lists flags", args: []string{"manager", "-h"}, wantStderr: "-leader-elect"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, &stdout, &stderr)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
			}
			require.Contains(t, stdout.String(), tt.wantStdout)
			require.Contains(t, stderr.String(), tt.wantStderr)
		})
	}
}

func TestBuildVersionPrefersStamp(t *testing.T) {
	old := version
	t.Cleanup(func() { version = old })
	version = "v1.2.3"
	require.Equal(t, "v1.2.3", buildVersion())
}

// TestManagerServesProbesAndStops runs `fluxfed manager` against a real API server: it must come
// up with the MiniCluster types registered, answer its probes, and exit cleanly when cancelled.
func TestManagerServesProbesAndStops(t *testing.T) {
	env := testenv.Start(t)
	kubeconfig := writeKubeconfig(t, env)
	probeAddr := freeAddr(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"manager", "--kubeconfig", kubeconfig, "--metrics-bind-address", "0",
			"--health-probe-bind-address", probeAddr}, &bytes.Buffer{}, &stderr)
	}()

	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + probeAddr + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 100*time.Millisecond, "manager never became ready; log:\n%s", &stderr)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("manager did not stop after cancel; log:\n%s", &stderr)
	}
	require.Contains(t, stderr.String(), "Starting manager")
}

func TestManagerFailsOnUnreadableKubeconfig(t *testing.T) {
	err := run(context.Background(), []string{"manager", "--kubeconfig", filepath.Join(t.TempDir(), "missing")}, &bytes.Buffer{}, &bytes.Buffer{})
	require.ErrorContains(t, err, "loading kubeconfig")
}

func writeKubeconfig(t *testing.T, env *testenv.Env) string {
	t.Helper()
	data, err := env.Kubeconfig()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// syncBuffer is a bytes.Buffer safe for the manager's log writes and the test's reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
