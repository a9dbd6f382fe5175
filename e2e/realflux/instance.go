// Package realflux runs real Flux (flux-core, built by e2e/fluxcore) for tests: instances of test
// brokers on this machine, to read what real Flux prints; and real brokers behind the simulated
// pods of the local clusters.
package realflux

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxfed/fluxfed/e2e/fluxcore"
)

// Instance is a real Flux instance of test brokers on this machine (flux start --test-size): every
// broker is a process of this machine, and they talk over local sockets, so no network is
// involved. It runs until the test ends.
type Instance struct {
	// Prefix is the flux-core installation that runs it.
	Prefix string
	// URI is rank 0's local URI, for FLUX_URI.
	URI string

	cmd *exec.Cmd
}

// startTimeout bounds the wait for an instance to run: a few seconds on an idle machine.
const startTimeout = 2 * time.Minute

// StartInstance starts an instance of size brokers, with config (TOML, the contents of a file of the
// instance's config directory) when not empty, and waits until rank 0 runs its initial program.
func StartInstance(t testing.TB, size int, config string) *Instance {
	t.Helper()
	prefix, err := fluxcore.Prefix()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	args := []string{"start", fmt.Sprintf("--test-size=%d", size)}
	if config != "" {
		conf := filepath.Join(dir, "conf")
		if err := os.MkdirAll(conf, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(conf, "test.toml"), []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-o,--config-path="+conf)
	}
	uriFile := filepath.Join(dir, "uri")
	// The initial program says where rank 0 is, then waits to be stopped with the instance.
	args = append(args, "sh", "-c", `printf '%s' "$FLUX_URI" >"$1.tmp" && mv "$1.tmp" "$1" && exec sleep 86400`, "fluxfed", uriFile)
	cmd := exec.Command(fluxcore.Flux(prefix), args...)
	// A file, not a pipe: the brokers hold what they inherit, and Wait would wait for them.
	logPath := filepath.Join(dir, "flux-start.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	readLog := func() string { data, _ := os.ReadFile(logPath); return string(data) }
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting flux start: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	deadline := time.Now().Add(startTimeout)
	for {
		data, err := os.ReadFile(uriFile)
		if err == nil {
			return &Instance{Prefix: prefix, URI: string(data), cmd: cmd}
		}
		select {
		case <-done:
			t.Fatalf("flux start --test-size=%d ended before its instance ran:\n%s", size, readLog())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("flux start --test-size=%d did not run within %v:\n%s", size, startTimeout, readLog())
		}
	}
}

// Env is the environment in which flux commands reach the instance: FLUX_URI, and the
// installation's bin first on PATH.
func (i *Instance) Env() []string {
	return append(os.Environ(), "FLUX_URI="+i.URI, "PATH="+filepath.Join(i.Prefix, "bin")+":"+os.Getenv("PATH"))
}

// Flux runs flux with args against the instance and returns its standard output; it fails the
// test if flux fails.
func (i *Instance) Flux(t testing.TB, args ...string) string {
	t.Helper()
	out, err := i.Command(append([]string{"flux"}, args...)...)
	if err != nil {
		t.Fatalf("flux %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// Command runs argv (flux first: Command("flux", "uptime")) against the instance and returns its
// standard output; an error carries its standard error.
func (i *Instance) Command(argv ...string) (string, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	if argv[0] == "flux" {
		cmd = exec.Command(fluxcore.Flux(i.Prefix), argv[1:]...)
	}
	cmd.Env = i.Env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
