package clusters

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is one program of a local cluster: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler or kwok. It leads its own process group, so that stopping it stops whatever it
// started too.
type Process struct {
	// Component names the program, such as kube-apiserver.
	Component string `json:"component"`
	// PID is its process id, which is also its process group id.
	PID int `json:"pid"`
	// Path is the binary, checked against the running process before it is signalled so that a
	// recycled PID is never killed.
	Path string `json:"path"`
	// Log is the file that holds its standard output and error.
	Log string `json:"log"`

	// done is closed when the process has exited and been reaped; nil for a process this program
	// did not start (loaded from the state file).
	done chan struct{}
}

// procSpec says how to start a process.
type procSpec struct {
	component string
	path      string
	// binary is what the process runs in the end when path is a wrapper that execs it under the
	// same PID (real nodes' daemons enter namespaces and cgroups first); empty means path.
	binary string
	args   []string
	env    []string // nil: inherit
	dir    string
	log    string
}

// startProcess starts spec with its output appended to its log. A detached process outlives this
// program (its own session, no parent-death signal); an attached one is killed by the kernel when
// this program dies, so that even a test binary killed by its timeout leaves nothing behind.
func startProcess(spec procSpec, detach bool) (*Process, error) {
	logFile, err := os.OpenFile(spec.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the log of %s: %w", spec.component, err)
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(spec.path, spec.args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = spec.env
	cmd.Dir = spec.dir
	cmd.SysProcAttr = sysProcAttr(detach)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", spec.component, err)
	}
	recorded := spec.path
	if spec.binary != "" {
		recorded = spec.binary
	}
	p := &Process{Component: spec.component, PID: cmd.Process.Pid, Path: recorded, Log: spec.log, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // how it ended is in its log
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *Process) exited() bool {
	if p.done != nil {
		select {
		case <-p.done:
			return true
		default:
			return false
		}
	}
	return !alive(p.PID)
}

// Running reports whether the process is still running.
func (p *Process) Running() bool { return !p.exited() }

// ours reports whether PID still runs the binary this package started, so that a PID recycled
// since the state file was written is left alone.
func (p *Process) ours() bool {
	if p.done != nil {
		return true
	}
	return runs(p.PID, p.Path)
}

// stop ends the process group: SIGTERM, then SIGKILL after grace, then waits until the process is
// gone. A process that already exited, or whose PID now runs something else, is left alone.
func (p *Process) stop(grace time.Duration) error {
	if p.exited() || !p.ours() {
		return nil
	}
	if err := syscall.Kill(-p.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signalling %s (pid %d): %w", p.Component, p.PID, err)
	}
	if !p.wait(grace) {
		if err := syscall.Kill(-p.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("killing %s (pid %d): %w", p.Component, p.PID, err)
		}
		if !p.wait(killWait) {
			return fmt.Errorf("%s (pid %d) is still running after SIGKILL", p.Component, p.PID)
		}
	}
	// Whatever the leader started and left behind goes with it.
	_ = syscall.Kill(-p.PID, syscall.SIGKILL)
	return nil
}

// kill ends the process group with SIGKILL and waits until the process is gone.
func (p *Process) kill() error {
	if p.exited() || !p.ours() {
		return nil
	}
	if err := syscall.Kill(-p.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing %s (pid %d): %w", p.Component, p.PID, err)
	}
	if !p.wait(killWait) {
		return fmt.Errorf("%s (pid %d) is still running after SIGKILL", p.Component, p.PID)
	}
	return nil
}

// killWait bounds the wait for a process to vanish after SIGKILL.
const killWait = 10 * time.Second

// wait waits up to d for the process to end.
func (p *Process) wait(d time.Duration) bool {
	if p.done != nil {
		select {
		case <-p.done:
			return true
		case <-time.After(d):
			return false
		}
	}
	deadline := time.Now().Add(d)
	for alive(p.PID) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// alive reports whether pid exists and is not a zombie waiting to be reaped (a detached process
// whose parent exited is reaped by init, which in a container may never happen).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist) || !procMounted()
	}
	// The state follows the command name, which is in parentheses and may hold spaces.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

func procMounted() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}

// runs reports whether pid runs the binary at path. Without /proc it trusts the PID.
func runs(pid int, path string) bool {
	if !alive(pid) {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	// A process that has just been exec'd shows an empty command line for a moment.
	for deadline := time.Now().Add(time.Second); err == nil && len(cmdline) == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		cmdline, err = os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	}
	if err != nil {
		return !procMounted()
	}
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	return string(argv0) == path
}

// tailLines is how much of a failing component's log an error quotes.
const tailLines = 25

// tail returns the last n lines of the file at path, or a note saying why it cannot.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	const window = 16 << 10
	if info, err := f.Stat(); err == nil && info.Size() > window {
		if _, err := f.Seek(-window, io.SeekEnd); err != nil {
			return fmt.Sprintf("(cannot read %s: %v)", path, err)
		}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// exitError says a component ended when it should be running, quoting the end of its log.
func exitError(p *Process) error {
	return fmt.Errorf("%s (pid %d) exited; last lines of %s:\n%s", p.Component, p.PID, p.Log, tail(p.Log, tailLines))
}
