//go:build realnode

package realnode

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A run killed before it could clean up leaves its sandbox: the network namespace, the cgroup,
// and whatever outlived the daemons in it (shims, containers). The next sandbox removes it.
func TestNewSandboxRemovesWhatACrashedRunLeft(t *testing.T) {
	requireRoot(t)
	old, err := NewSandbox()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, old.Remove()) }) // a no-op once removed

	// A process in a group of the sandbox, as a container would be, started the way the
	// daemons are.
	require.NoError(t, createCgroup(old.Cgroup()+"/node-1/pods"))
	enter, err := joinCgroup(old.Cgroup() + "/node-1/pods")
	require.NoError(t, err)
	leftover := exec.Command("/bin/sh", "-c", enter+"exec sleep 600")
	leftover.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // survives its starter, as a shim does
	require.NoError(t, leftover.Start())
	exited := make(chan struct{})
	go func() { _ = leftover.Wait(); close(exited) }()
	require.Eventually(t, func() bool {
		return len(readPIDs(filepath.Join("/sys/fs/cgroup/memory", old.Cgroup(), "node-1/pods/cgroup.procs"))) == 1
	}, 10*time.Second, 20*time.Millisecond)

	// The run that made it is gone: its owners file names a process that has exited.
	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	require.NoError(t, os.WriteFile(old.ownersFile(), []byte(strconv.Itoa(gone.Process.Pid)+" /usr/bin/true\n"), 0o600))

	next, err := NewSandbox()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, next.Remove()) })

	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the process left in the old sandbox still runs")
	}
	_, err = os.Stat(old.Dir())
	require.ErrorIs(t, err, os.ErrNotExist, "the old sandbox's directory, with its network namespace")
	mounts, err := cgroupMounts()
	require.NoError(t, err)
	for _, m := range mounts {
		_, err := os.Stat(filepath.Join(m.dir, old.Cgroup()))
		require.ErrorIs(t, err, os.ErrNotExist, "the old sandbox's group in %s", m.dir)
	}
	// The new one is in use: removing stale sandboxes leaves it alone.
	removed, err := RemoveStale()
	require.NoError(t, err)
	require.NotContains(t, removed, next.ID)
	require.DirExists(t, next.Dir())
}
