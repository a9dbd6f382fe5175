package clusters

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fluxfed/fluxfed/e2e/k8sbin"
)

func TestStopEndsTheProcessGroup(t *testing.T) {
	dir := t.TempDir()
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	childFile := filepath.Join(dir, "child")
	p, err := startProcess(procSpec{
		component: "shell", path: sh, dir: dir, log: filepath.Join(dir, "shell.log"),
		// The shell starts a child and waits for it, as a component with helpers would.
		args: []string{"-c", "sleep 300 & echo $! > " + childFile + "; wait"},
	}, false)
	require.NoError(t, err)
	var child int
	eventually(t, "the child to start", func() error {
		data, err := os.ReadFile(childFile)
		if err == nil {
			child, err = strconv.Atoi(strings.TrimSpace(string(data)))
		}
		return err
	})
	require.True(t, p.Running())
	require.True(t, alive(child))

	require.NoError(t, p.stop(5*time.Second))
	require.False(t, p.Running())
	require.ErrorIs(t, syscall.Kill(p.PID, 0), syscall.ESRCH, "the leader is reaped")
	eventually(t, "the child to be gone", func() error {
		if alive(child) {
			return os.ErrExist
		}
		return nil
	})
	require.NoError(t, p.stop(time.Second), "stopping twice is fine")
}

// TestStopByRecordedPID stops processes known only from a state file: the one that still runs the
// recorded binary is stopped, a recycled PID that runs something else is left alone.
func TestStopByRecordedPID(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	require.NoError(t, err)
	start := func() *exec.Cmd {
		cmd := exec.Command(sleep, "300")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		return cmd
	}

	ours := start()
	recorded := &Process{Component: "sleep", PID: ours.Process.Pid, Path: sleep}
	require.True(t, recorded.Running())
	require.NoError(t, recorded.stop(5*time.Second))
	require.False(t, alive(ours.Process.Pid))

	recycled := start()
	stranger := &Process{Component: "kube-apiserver", PID: recycled.Process.Pid, Path: "/nonexistent/kube-apiserver"}
	require.False(t, stranger.ours())
	require.NoError(t, stranger.stop(time.Second))
	require.True(t, alive(recycled.Process.Pid), "a PID that runs another binary is not ours to kill")
}

func TestTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	var b strings.Builder
	for i := range 100 {
		b.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	got := tail(path, 3)
	require.Equal(t, "line 97\nline 98\nline 99", got)
	require.Contains(t, tail(filepath.Join(t.TempDir(), "missing"), 3), "cannot read")
}

// fakeBinaries puts scripts named like the Kubernetes binaries in a directory and points
// KUBEBUILDER_ASSETS at it. Every one runs body.
func fakeBinaries(t *testing.T, body string) {
	t.Helper()
	dir := t.TempDir()
	for _, name := range localBinaries {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	}
	t.Setenv(k8sbin.EnvAssets, dir)
}

func TestStartQuotesTheLogOfAComponentThatExits(t *testing.T) {
	fakeBinaries(t, `echo "starting $0"; echo "fatal: the data directory is corrupt" >&2; exit 1`)
	dir := t.TempDir()
	_, err := Start(context.Background(), Options{Count: 2, Dir: dir, Provider: ProviderLocal, Timeout: 30 * time.Second})
	require.Error(t, err)
	require.Regexp(t, `cluster (hub|member-a): waiting for etcd to be ready: etcd \(pid \d+\) exited`, err.Error())
	require.Contains(t, err.Error(), "fatal: the data directory is corrupt")
	require.FileExists(t, filepath.Join(dir, "hub", "logs", "etcd.log"))

	env, err := Load(dir)
	require.NoError(t, err)
	require.False(t, env.Running())
}

func TestStartRetriesOnAPortTakenMeanwhile(t *testing.T) {
	fakeBinaries(t, `echo "listen tcp 127.0.0.1:1: bind: address already in use" >&2; exit 1`)
	dir := t.TempDir()
	_, err := Start(context.Background(), Options{Names: []string{"solo"}, Dir: dir, Provider: ProviderLocal, Timeout: 30 * time.Second})
	require.ErrorContains(t, err, "address already in use")
	data, err := os.ReadFile(filepath.Join(dir, "solo", "logs", "etcd.log"))
	require.NoError(t, err)
	require.Equal(t, startAttempts, strings.Count(string(data), "address already in use"), "one line per attempt")
}

func TestStartRefusesADirectoryInUse(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "hub", "etcd"), 0o755))
	_, err := Start(context.Background(), Options{Names: []string{"hub"}, Dir: dir, Provider: ProviderLocal})
	require.ErrorContains(t, err, "left from an earlier run")
}

func TestStartQuotesTheLogOfAComponentThatIsLate(t *testing.T) {
	fakeBinaries(t, `echo "still compacting, please wait"; exec sleep 60`)
	dir := t.TempDir()
	_, err := Start(context.Background(), Options{Names: []string{"slow"}, Dir: dir, Provider: ProviderLocal, Timeout: time.Second})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "waiting for etcd to be ready")
	require.ErrorContains(t, err, "still compacting, please wait")
	require.ErrorContains(t, err, "the clusters did not come up within 1s; on a busy machine give them longer (Options.Timeout, or clusters up -timeout)")
	env, err := Load(dir)
	require.NoError(t, err)
	require.Len(t, env.Clusters[0].Processes, 1)
	require.False(t, env.Running(), "stopped after the timeout")
}
