package realflux

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxfed/fluxfed/e2e/fluxcore"
	"github.com/fluxfed/fluxfed/flux"
	"github.com/fluxfed/fluxfed/hostlist"
)

// System is a real Flux instance bootstrapped from a config file, as a MiniCluster's brokers
// are: one broker process per host, started and stopped one by one, each with its own
// hostname (the broker attribute, not the machine's), talking TCP over 127.0.0.1 with a CURVE
// certificate. Unlike an [Instance], a rank may be absent: the instance runs once its quorum
// has joined, and the other ranks join and leave it while it runs, as a burst's do.
type System struct {
	// Prefix is the flux-core installation that runs it.
	Prefix string
	// Hosts are the hosts in rank order.
	Hosts []string

	dir     string
	config  string
	quorum  int
	brokers map[int]*broker
}

type broker struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// SystemConfig describes a System.
type SystemConfig struct {
	// Hosts are the hosts in rank order.
	Hosts []string
	// Quorum is how many ranks, from 0, must join before the instance runs.
	Quorum int
	// Cores is the number of cores that R gives every host (not verified against this machine).
	Cores int
}

// NewSystem writes the config and certificate of an instance; no broker runs until Start.
func NewSystem(t testing.TB, c SystemConfig) *System {
	t.Helper()
	prefix, err := fluxcore.Prefix()
	if err != nil {
		t.Fatal(err)
	}
	s := &System{Prefix: prefix, Hosts: c.Hosts, dir: t.TempDir(), quorum: c.Quorum, brokers: map[int]*broker{}}
	cert := filepath.Join(s.dir, "curve.cert")
	if out, err := exec.Command(fluxcore.Flux(prefix), "keygen", cert).CombinedOutput(); err != nil {
		t.Fatalf("flux keygen: %v: %s", err, out)
	}
	cores := make([]int, c.Cores)
	for i := range cores {
		cores[i] = i
	}
	var entries []string
	for _, h := range c.Hosts {
		uri := "tcp://" + freePort(t)
		entries = append(entries, fmt.Sprintf("  { host = %q, bind = %q, connect = %q },", h, uri, uri))
	}
	s.config = filepath.Join(s.dir, "config")
	config := fmt.Sprintf(`[bootstrap]
curve_cert = %q
hosts = [
%s
]

[resource]
noverify = true

[[resource.config]]
hosts = %q
cores = %q
`, cert, strings.Join(entries, "\n"), hostlist.Compress(c.Hosts), flux.FormatIDSet(cores, false))
	if err := os.MkdirAll(s.config, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.config, "system.toml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for r := range s.brokers {
			s.kill(r)
		}
	})
	return s
}

// freePort returns a free address of 127.0.0.1, for a broker to bind.
func freePort(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func (s *System) rankDir(rank int) string { return filepath.Join(s.dir, "rank"+strconv.Itoa(rank)) }

// URI is the local URI of the broker of rank.
func (s *System) URI(rank int) string {
	return "local://" + filepath.Join(s.rankDir(rank), "run", "local-"+strconv.Itoa(rank))
}

// Config returns the instance's config file, which every broker reads.
func (s *System) Config() string {
	data, _ := os.ReadFile(filepath.Join(s.config, "system.toml")) // written by NewSystem
	return string(data)
}

// Start starts the brokers of ranks, without waiting for them to join.
func (s *System) Start(t testing.TB, ranks ...int) {
	t.Helper()
	for _, r := range ranks {
		s.StartAs(t, r, s.Hosts[r], "")
	}
}

// StartAs starts a broker in the directory of rank with hostname and, when config is not
// empty, that config file instead of the instance's: a broker that is wrong somehow.
func (s *System) StartAs(t testing.TB, r int, hostname, config string) {
	t.Helper()
	if _, running := s.brokers[r]; running {
		t.Fatalf("rank %d runs already", r)
	}
	dir := s.rankDir(r)
	run := filepath.Join(dir, "run")
	_ = os.RemoveAll(run)
	if err := os.MkdirAll(run, 0o700); err != nil {
		t.Fatal(err)
	}
	configDir := s.config
	if config != "" {
		configDir = filepath.Join(dir, "config")
		if err := os.MkdirAll(configDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(configDir, "system.toml"), []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"broker", "--config-path=" + configDir,
		"-Shostname=" + hostname, "-Srundir=" + run, "-Sstatedir=" + dir,
		"-Sbroker.quorum=" + strconv.Itoa(s.quorum), "-Sbroker.rc2_none=1"}
	cmd := exec.Command(fluxcore.Flux(s.Prefix), args...)
	b := &broker{cmd: cmd, done: make(chan struct{}), log: filepath.Join(dir, "broker.log")}
	logFile, err := os.OpenFile(b.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	logFile.Close()
	if err != nil {
		t.Fatalf("starting the broker of rank %d: %v", r, err)
	}
	go func() { _ = cmd.Wait(); close(b.done) }()
	s.brokers[r] = b
}

// Exited reports whether the broker of rank ended by itself, and how.
func (s *System) Exited(rank int) (bool, string) {
	b, ok := s.brokers[rank]
	if !ok {
		return false, ""
	}
	select {
	case <-b.done:
		return true, b.cmd.ProcessState.String()
	default:
		return false, ""
	}
}

// Keygen writes a new CURVE certificate, another than the instance's, and returns its path.
func (s *System) Keygen(t testing.TB) string {
	t.Helper()
	f, err := os.CreateTemp(s.dir, "other-*.cert")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	_ = os.Remove(f.Name())
	if out, err := exec.Command(fluxcore.Flux(s.Prefix), "keygen", f.Name()).CombinedOutput(); err != nil {
		t.Fatalf("flux keygen: %v: %s", err, out)
	}
	return f.Name()
}

// Cert is the path of the instance's certificate.
func (s *System) Cert() string { return filepath.Join(s.dir, "curve.cert") }

// Stop stops the brokers of ranks with SIGTERM, as a kubelet stops a container, and waits until
// they exited.
func (s *System) Stop(t testing.TB, ranks ...int) {
	t.Helper()
	for _, r := range ranks {
		b, ok := s.brokers[r]
		if !ok {
			t.Fatalf("rank %d does not run", r)
		}
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.done:
		case <-time.After(startTimeout):
			t.Fatalf("the broker of rank %d did not stop within %v", r, startTimeout)
		}
		s.kill(r)
	}
}

func (s *System) kill(r int) {
	b := s.brokers[r]
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	<-b.done
	delete(s.brokers, r)
}

// Log returns what the broker of rank printed.
func (s *System) Log(rank int) string {
	data, _ := os.ReadFile(filepath.Join(s.rankDir(rank), "broker.log"))
	return string(data)
}

// Flux runs flux with args against rank 0 and returns its standard output; an error carries its
// standard error.
func (s *System) Flux(args ...string) (string, error) { return s.FluxOn(0, args...) }

// FluxOn runs flux with args against the broker of rank.
func (s *System) FluxOn(rank int, args ...string) (string, error) {
	return (&Instance{Prefix: s.Prefix, URI: s.URI(rank)}).Command(append([]string{"flux"}, args...)...)
}
