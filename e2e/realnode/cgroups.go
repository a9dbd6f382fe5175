package realnode

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupMount is one mounted cgroup hierarchy.
type cgroupMount struct {
	dir string
	v2  bool
	// cpuset says the hierarchy has the cpuset controller, whose new groups hold no CPU and no
	// memory node until given some.
	cpuset bool
}

// cgroupMounts lists the cgroup hierarchies mounted here, v1 and v2, from /proc/self/mountinfo.
func cgroupMounts() ([]cgroupMount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("listing the cgroup hierarchies: %w", err)
	}
	defer f.Close()
	var out []cgroupMount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fields, after := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(after) < 3 {
			continue
		}
		switch after[0] {
		case "cgroup":
			out = append(out, cgroupMount{dir: fields[4], cpuset: slices.Contains(strings.Split(after[2], ","), "cpuset")})
		case "cgroup2":
			out = append(out, cgroupMount{dir: fields[4], v2: true})
		}
	}
	return out, sc.Err()
}

// createCgroup creates the group path (absolute within each hierarchy, such as /fluxfed/x) in
// every v1 hierarchy, as the kubelet wants its cgroupRoot, with every cpuset level given its
// parent's CPUs and memory nodes.
func createCgroup(path string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if m.v2 {
			continue
		}
		dir := m.dir
		for part := range strings.SplitSeq(strings.Trim(path, "/"), "/") {
			parent := dir
			dir = filepath.Join(dir, part)
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("creating cgroup %s: %w", dir, err)
			}
			if m.cpuset {
				for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
					if err := copyDown(parent, dir, file); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// copyDown gives a new cpuset group its parent's value of file, unless it has one already.
func copyDown(parent, dir, file string) error {
	own, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return fmt.Errorf("reading %s: %w", filepath.Join(dir, file), err)
	}
	if strings.TrimSpace(string(own)) != "" {
		return nil
	}
	value, err := os.ReadFile(filepath.Join(parent, file))
	if err != nil {
		return fmt.Errorf("reading %s: %w", filepath.Join(parent, file), err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), value, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Join(dir, file), err)
	}
	return nil
}

// cgroupProcsFiles are the cgroup.procs files of path in every v1 hierarchy: writing a PID to
// each puts the process in the group everywhere.
func cgroupProcsFiles(path string) ([]string, error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range mounts {
		if !m.v2 {
			out = append(out, filepath.Join(m.dir, path, "cgroup.procs"))
		}
	}
	return out, nil
}

// cgroupDirs lists path and every group below it, in every hierarchy (v2 too: runc may make
// groups there on a hybrid system), deepest first.
func cgroupDirs(path string) ([]string, error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, m := range mounts {
		root := filepath.Join(m.dir, path)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("listing cgroup %s: %w", root, err)
		}
	}
	// Longer paths are deeper; removing them first empties their parents.
	slices.SortStableFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return dirs, nil
}

// removeCgroup kills every process in the group path and below, in every hierarchy, and
// removes the groups. What a crashed run left (containers and their shims, which outlive the
// daemons that started them) goes this way.
func removeCgroup(path string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		dirs, err := cgroupDirs(path)
		if err != nil {
			return err
		}
		if len(dirs) == 0 {
			return nil
		}
		procs := 0
		for _, dir := range dirs {
			for _, pid := range readPIDs(filepath.Join(dir, "cgroup.procs")) {
				procs++
				_ = syscall.Kill(pid, syscall.SIGKILL) // gone already is as good
			}
		}
		var left []string
		for _, dir := range dirs {
			if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
				left = append(left, fmt.Sprintf("%s (%v)", dir, err))
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("removing cgroups: %d processes killed, still there: %s", procs, strings.Join(left, ", "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func readPIDs(path string) []int {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var pids []int
	for f := range strings.FieldsSeq(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
