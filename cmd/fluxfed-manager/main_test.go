package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fluxfed/fluxfed/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestTheCommandLine(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		wantStdout []string
		wantErr    string
	}{
		{name: "help lists the manager's flags and the hub's", args: []string{"--help"}, wantStdout: []string{
			"Usage:\n  fluxfed-manager [manager] [flags]\n  fluxfed-manager version\n", "as `fluxfed manager` does", "--leader-elect", "--hub ", "--dial-allow", "--zap-log-level", "--pprof-bind-address", "--version"}},
		{name: "help after the word manager", args: []string{"manager", "-h"}, wantStdout: []string{"Usage:\n  fluxfed-manager [manager] [flags]\n"}},
		{name: "version", args: []string{"--version"}, wantStdout: []string{"fluxfed-manager devel (" + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"}},
		{name: "version as a command", args: []string{"version"}, wantStdout: []string{"fluxfed-manager devel (" + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"}},
		{name: "member probe without endpoints", args: []string{"member", "probe"}, wantErr: "member probe takes one or more HOST:PORT endpoints"},
		{name: "member probe of an endpoint without a port", args: []string{"member", "probe", "127.0.0.1"},
			wantErr: `member probe: "127.0.0.1" is not HOST:PORT: address 127.0.0.1: missing port in address`},
		{name: "an unknown flag", args: []string{"--no-such-flag"},
			wantErr: "unknown flag: --no-such-flag\nRun 'fluxfed-manager --help' for usage"},
		{name: "an argument", args: []string{"manager", "status"},
			wantErr: "fluxfed-manager takes no arguments, got [\"status\"]\nRun 'fluxfed-manager --help' for usage"},
		{name: "a kubeconfig that cannot be read", args: []string{"--hub", "--kubeconfig", filepath.Join(t.TempDir(), "missing")},
			wantErr: "loading kubeconfig"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tc.args, &stdout, &stderr)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			for _, want := range tc.wantStdout {
				require.Contains(t, stdout.String(), want)
			}
			require.Empty(t, stderr.String())
		})
	}
}

// TestMemberProbeGreetsTheEndpoints: the data-path check of `fluxfed member add` runs
// `/fluxfed member probe HOST:PORT...` with the image of the member's manager, which holds this
// binary at /fluxfed.
func TestMemberProbeGreetsTheEndpoints(t *testing.T) {
	closedAddr := freeAddr(t)
	var stdout bytes.Buffer
	err := run(context.Background(), []string{"member", "probe", closedAddr}, &stdout, &bytes.Buffer{})
	require.EqualError(t, err, "1 of 1 endpoints did not answer as a Flux broker: "+closedAddr)
	require.Contains(t, stdout.String(), closedAddr+": no Flux broker answers from the member: lead broker "+closedAddr+": cannot connect: ")
}

// TestTheManagerServesProbesAndStops runs fluxfed-manager against a real API server, as the
// image's Deployment does (its arguments begin with the word manager): it must come up, answer
// its probes and exit cleanly when cancelled.
func TestTheManagerServesProbesAndStops(t *testing.T) {
	env := testenv.Shared(t)
	data, err := env.Kubeconfig()
	require.NoError(t, err)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, data, 0o600))
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
		defer func() { _ = resp.Body.Close() }()
		return resp.StatusCode == http.StatusOK
	}, time.Minute, 100*time.Millisecond, "the manager never became ready; log:\n%s", &stderr)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("the manager did not stop after cancel; log:\n%s", &stderr)
	}
	require.Contains(t, stderr.String(), "Starting manager")
}

// TestItLinksNoneOfTheCommandLine: the point of this binary is what it does not link, the
// fluxfed command line's packages (cmd/fluxfed and its internal packages: member, status).
func TestItLinksNoneOfTheCommandLine(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for dep := range strings.FieldsSeq(string(out)) {
		require.False(t, strings.HasPrefix(dep, "github.com/fluxfed/fluxfed/cmd/fluxfed/") || dep == "github.com/fluxfed/fluxfed/cmd/fluxfed",
			"fluxfed-manager links %s", dep)
	}
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
