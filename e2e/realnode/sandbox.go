package realnode

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Where every Sandbox of this machine lives, so that a run finds what a crashed one left.
const (
	// RunRoot holds a directory per Sandbox: its network namespace and who owns it.
	RunRoot = "/run/fluxfed-realnode"
	// CgroupRoot is the group, in every cgroup hierarchy, under which each Sandbox has its own.
	CgroupRoot = "/fluxfed-realnode"
)

// Sandbox is what the real nodes of one cluster share and what goes with them: a network
// namespace with nothing but lo (and then the bridges and pods of the nodes), and a cgroup under
// which the nodes' daemons, the containers' shims and the pods run, so that killing the group
// kills everything, even what outlived a crashed run.
type Sandbox struct {
	// ID names the sandbox's directory under RunRoot and its group under CgroupRoot.
	ID string `json:"id"`
}

// Dir is the sandbox's directory.
func (s *Sandbox) Dir() string { return filepath.Join(RunRoot, s.ID) }

// Netns is the file that pins the sandbox's network namespace.
func (s *Sandbox) Netns() string { return filepath.Join(s.Dir(), "netns") }

// Cgroup is the sandbox's group, the same path in every hierarchy.
func (s *Sandbox) Cgroup() string { return CgroupRoot + "/" + s.ID }

// ownersFile lists "pid executable" of the processes whose life keeps the sandbox in use: the
// program that made it, then the daemons it started.
func (s *Sandbox) ownersFile() string { return filepath.Join(s.Dir(), "owners") }

// NewSandbox removes what earlier runs left (RemoveStale), then creates a sandbox owned by this
// process: its directory, its network namespace (checked: CheckIsolated) and its cgroup.
func NewSandbox() (*Sandbox, error) {
	if _, err := RemoveStale(); err != nil {
		return nil, fmt.Errorf("removing what earlier runs left: %w", err)
	}
	id := make([]byte, 6)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	s := &Sandbox{ID: hex.EncodeToString(id)}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	// The directory appears complete with its owners file, or RemoveStale, in another program
	// at the same moment, would take it for a stale one.
	tmp := s.Dir() + ".new"
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("creating the sandbox directory: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "owners"), fmt.Appendf(nil, "%d %s\n", os.Getpid(), exe), 0o600); err != nil {
		return nil, errors.Join(err, os.RemoveAll(tmp))
	}
	if err := os.Rename(tmp, s.Dir()); err != nil {
		return nil, errors.Join(err, os.RemoveAll(tmp))
	}
	if err := CreateNetns(s.Netns()); err != nil {
		return nil, errors.Join(err, s.Remove())
	}
	if err := createCgroup(s.Cgroup()); err != nil {
		return nil, errors.Join(err, s.Remove())
	}
	return s, nil
}

// Own records a daemon the sandbox's nodes run, so that the sandbox counts as in use while it
// runs, even after the program that made it exited (clusters left up on purpose).
func (s *Sandbox) Own(pid int) error {
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil {
		return fmt.Errorf("recording process %d in sandbox %s: %w", pid, s.ID, err)
	}
	f, err := os.OpenFile(s.ownersFile(), os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%d %s\n", pid, exe)
	return errors.Join(err, f.Close())
}

// inUse reports whether a process of the owners file still runs its executable.
func (s *Sandbox) inUse() bool {
	data, err := os.ReadFile(s.ownersFile())
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(data)) {
		pidText, exe, ok := strings.Cut(strings.TrimSpace(line), " ")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil {
			continue
		}
		if got, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); err == nil && got == exe {
			return true
		}
	}
	return false
}

// Remove kills every process in the sandbox's cgroup (containers, shims, daemons), removes the
// groups, the network namespace and the directory. Mounts the nodes made are in their daemons'
// own mount namespace and go with its last process. Remove may be called more than once.
func (s *Sandbox) Remove() error {
	var errs []error
	errs = append(errs, removeCgroup(s.Cgroup()))
	errs = append(errs, RemoveNetns(s.Netns()))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("removing sandbox %s: %w", s.ID, err)
	}
	if err := os.RemoveAll(s.Dir()); err != nil {
		return fmt.Errorf("removing sandbox %s: %w", s.ID, err)
	}
	return nil
}

// RemoveStale removes every sandbox of this machine that nothing uses any more (no process of
// its owners file runs), and every group under CgroupRoot without a sandbox directory, and
// returns the IDs it removed: what runs killed before they could clean up left behind.
func RemoveStale() ([]string, error) {
	ids := map[string]bool{}
	entries, err := os.ReadDir(RunRoot)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, e := range entries {
		if e.IsDir() && !strings.HasSuffix(e.Name(), ".new") {
			ids[e.Name()] = true
		}
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	for _, m := range mounts {
		groups, _ := os.ReadDir(filepath.Join(m.dir, CgroupRoot)) // none yet is fine
		for _, g := range groups {
			if g.IsDir() {
				if _, err := os.Stat(filepath.Join(RunRoot, g.Name())); errors.Is(err, fs.ErrNotExist) {
					ids[g.Name()] = true
				}
			}
		}
	}
	var removed []string
	var errs []error
	for id := range ids {
		s := &Sandbox{ID: id}
		if s.inUse() {
			continue
		}
		if err := s.Remove(); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, id)
	}
	return removed, errors.Join(errs...)
}
