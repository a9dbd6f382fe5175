package scripts

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// These tests run the rendered entrypoint through the ways a broker pod ends: its job succeeds
// or fails, its broker crashes, or the pod is deleted (SIGTERM). The fake flux stands for the
// brokers (see fakeFlux).

// exitSandbox renders MiniCluster "end" of size 2 (mutated), provisions its volume and returns
// the sandbox and the entrypoint of its Flux container.
func exitSandbox(t *testing.T, mutate func(*fluxv1alpha2.MiniClusterSpec)) (sandbox, string) {
	t.Helper()
	s := newSandbox(t, "end-[0-1]")
	mc := s.miniCluster("end", func(spec *fluxv1alpha2.MiniClusterSpec) {
		spec.Size = 2
		spec.Containers[0].Command = "app --run"
		if mutate != nil {
			mutate(spec)
		}
	})
	got, err := Render(mc, Inputs{Hostlist: "end-[0-1]", Quorum: 2})
	require.NoError(t, err)
	s.provision(t, got[ProvisionerKey])
	return s, got["container-end.sh"]
}

// jobStatus reads the termination message back as the MiniCluster's status does.
func jobStatus(t *testing.T, message string) int {
	t.Helper()
	var status int
	_, err := fmt.Sscanf(strings.TrimSpace(message), JobStatusMessage, &status)
	require.NoError(t, err, "termination message %q", message)
	return status
}

func TestAJobEndsTheLeadWithItsStatusOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		jobRC int
	}{
		{"success", 0},
		{"failure", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, script := exitSandbox(t, nil)
			env := []string{"JOB_COMPLETION_INDEX=0", fmt.Sprintf("FAKE_JOB_RC=%d", tc.jobRC)}
			out, err := s.run(t, "bash", script, env)
			require.Equal(t, tc.jobRC, exitCode(t, err), out)
			require.Equal(t, tc.jobRC, jobStatus(t, s.terminationMessage(t)))
			require.Len(t, s.starts(t), 1, out)

			// The container starts again, as the kubelet does with restartPolicy OnFailure:
			// the job is not run again and no broker waits for followers that have finished.
			require.NoError(t, os.Remove(s.terminationLog()))
			out, err = s.run(t, "bash", script, env)
			require.NoError(t, err, out)
			require.Contains(t, out, fmt.Sprintf("The job ended with status %d before this container started again", tc.jobRC))
			require.Len(t, s.starts(t), 1, "a broker started again after the job ended: %s", out)
			require.Equal(t, tc.jobRC, jobStatus(t, s.terminationMessage(t)))
		})
	}
}

func TestALeadBrokerThatCrashesStartsAgain(t *testing.T) {
	s, script := exitSandbox(t, nil)
	out, err := s.run(t, "bash", script, []string{"JOB_COMPLETION_INDEX=0", "FAKE_FLUX_CRASHES=2", "FAKE_JOB_RC=0"})
	require.NoError(t, err, out)
	require.Len(t, s.starts(t), 3, out)
	require.Contains(t, out, "starting it again in 0s (2 of at most 100)")
	require.Equal(t, 0, jobStatus(t, s.terminationMessage(t)))
}

func TestALeadBrokerThatKeepsCrashingEndsAfterBackoffLimitRestarts(t *testing.T) {
	s, script := exitSandbox(t, func(spec *fluxv1alpha2.MiniClusterSpec) { spec.BackoffLimit = 2 })
	out, err := s.run(t, "bash", script, []string{"JOB_COMPLETION_INDEX=0", "FAKE_FLUX_RC=7"})
	require.Equal(t, 7, exitCode(t, err), out)
	require.Len(t, s.starts(t), 3, out)
	require.Equal(t, "the lead broker exited with status 7 before its work ended, 2 times started again\n", s.terminationMessage(t))
	require.NoFileExists(t, filepath.Join(s.mount, "fluxfed/job-status"))
}

func TestPostRunsOnTheLeadOnly(t *testing.T) {
	for _, strict := range []bool{false, true} {
		t.Run(fmt.Sprintf("strict=%v", strict), func(t *testing.T) {
			s, script := exitSandbox(t, func(spec *fluxv1alpha2.MiniClusterSpec) {
				spec.Logging.Strict = strict
				spec.Containers[0].Commands.Post = `touch "$HOME/post-ran-on-$JOB_COMPLETION_INDEX"`
			})
			out, err := s.run(t, "bash", script, []string{"JOB_COMPLETION_INDEX=1"})
			require.NoError(t, err, out)
			require.NoFileExists(t, filepath.Join(s.root, "post-ran-on-1"), "commands.post ran on a follower: %s", out)
			out, err = s.run(t, "bash", script, []string{"JOB_COMPLETION_INDEX=0"})
			require.NoError(t, err, out)
			require.FileExists(t, filepath.Join(s.root, "post-ran-on-0"), out)
		})
	}
}

func TestAFailingPostFailsTheLeadUnderStrict(t *testing.T) {
	s, script := exitSandbox(t, func(spec *fluxv1alpha2.MiniClusterSpec) {
		spec.Logging.Strict = true
		spec.Containers[0].Commands.Post = "(exit 5)"
	})
	out, err := s.run(t, "bash", script, []string{"JOB_COMPLETION_INDEX=0"})
	require.Equal(t, 1, exitCode(t, err), out)
	require.Equal(t, "fluxfed: error: commands.post failed with status 5\n", s.terminationMessage(t))
}

// TestAPostThatExitsEndsOnlyThePost runs a commands.post that calls exit: the lead still ends as
// its job did, or, under logging.strict, fails saying that the post did.
func TestAPostThatExitsEndsOnlyThePost(t *testing.T) {
	for _, strict := range []bool{false, true} {
		t.Run(fmt.Sprintf("strict=%v", strict), func(t *testing.T) {
			s, script := exitSandbox(t, func(spec *fluxv1alpha2.MiniClusterSpec) {
				spec.Logging.Strict = strict
				spec.Containers[0].Commands.Post = "exit 4"
			})
			out, err := s.run(t, "bash", script, []string{"JOB_COMPLETION_INDEX=0"})
			if strict {
				require.Equal(t, 1, exitCode(t, err), out)
				require.Equal(t, "fluxfed: error: commands.post failed with status 4\n", s.terminationMessage(t))
				return
			}
			require.NoError(t, err, out)
			require.Equal(t, "the job exited with status 0\n", s.terminationMessage(t))
		})
	}
}

// TestAJobWhoseBrokerDiedIsNotTakenForEnded runs the lead's job for real while its broker is gone
// once the job returns (flux submit --watch exits 0 when it loses its broker): no status is
// recorded, and the lead, out of restarts, fails instead of reporting a success.
func TestAJobWhoseBrokerDiedIsNotTakenForEnded(t *testing.T) {
	s, script := exitSandbox(t, func(spec *fluxv1alpha2.MiniClusterSpec) {
		spec.Containers[0].Command = "true"
		spec.Containers[0].Launcher = true
		spec.BackoffLimit = 1
	})
	out, err := s.run(t, "bash", script, []string{"JOB_COMPLETION_INDEX=0", "FAKE_FLUX_RUN=1", "FAKE_FLUX_GONE=1"})
	require.Equal(t, 1, exitCode(t, err), out)
	require.Contains(t, out, "the broker went away before the job ended; its status is not recorded")
	require.NoFileExists(t, filepath.Join(s.mount, "fluxfed/job-status"))
	require.Len(t, s.starts(t), 2, "started once, and again once (backoffLimit 1)")
	require.Equal(t, "the lead broker exited with status 0 before its work ended, 1 times started again\n", s.terminationMessage(t))
}

// TestABrokerThatDoesNotStopIsKilledInTime stops containers whose broker ignores SIGTERM (a
// follower waiting up to 60 s for a parent that is gone): the broker is killed after
// fluxfed_stop_seconds, and the container still ends as it says, well before a kubelet would
// kill it.
func TestABrokerThatDoesNotStopIsKilledInTime(t *testing.T) {
	s, script := exitSandbox(t, nil)
	st := s.start(t, script, []string{"JOB_COMPLETION_INDEX=1", "FAKE_FLUX_WAIT=143", "FAKE_FLUX_STUBBORN=1"})
	require.Equal(t, 0, st.stop(t), st.out.String())
	require.Equal(t, "the follower broker finished\n", s.terminationMessage(t))

	s, script = exitSandbox(t, func(spec *fluxv1alpha2.MiniClusterSpec) {
		spec.Containers[0].Command = "sleep 30"
		spec.Containers[0].Launcher = true
	})
	st = s.start(t, script, []string{"JOB_COMPLETION_INDEX=0", "FAKE_FLUX_RUN=1", "FAKE_FLUX_STUBBORN=1"})
	require.Equal(t, 143, st.stop(t), st.out.String())
	require.Equal(t, "the lead broker was stopped before its job ended (the broker exited with status 137)\n", s.terminationMessage(t))
}

// TestALeadWithoutAJobStoppedIsNotShutDown stops the lead of a MiniCluster without a job: its
// broker ends cleanly on SIGTERM, which is no `flux shutdown`: the container ends as a stopped
// one (143), so that deleting the pod does not complete the MiniCluster.
func TestALeadWithoutAJobStoppedIsNotShutDown(t *testing.T) {
	s, script := exitSandbox(t, func(spec *fluxv1alpha2.MiniClusterSpec) { spec.Interactive = true })
	st := s.start(t, script, []string{"JOB_COMPLETION_INDEX=0", "FAKE_FLUX_WAIT=0"})
	require.Equal(t, 143, st.stop(t), st.out.String())
	require.Equal(t, "the instance was stopped (the broker exited with status 0)\n", s.terminationMessage(t))
	require.NoFileExists(t, filepath.Join(s.mount, "fluxfed/job-status"))
}

// started is an entrypoint running in the background.
type started struct {
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan struct{} // closed once the entrypoint ended, with err
	err  error
}

// start runs script in the background, as a container does, once its broker started.
func (s sandbox) start(t *testing.T, script string, env []string) *started {
	t.Helper()
	file := filepath.Join(s.root, "entrypoint.sh")
	require.NoError(t, os.WriteFile(file, []byte(s.sandboxed(script)), 0o644))
	out := &bytes.Buffer{}
	cmd := s.command(env, "bash", file)
	cmd.Stdout, cmd.Stderr = out, out
	// A process the script left behind must not hold the test up by its copy of the output.
	cmd.WaitDelay = time.Second
	require.NoError(t, cmd.Start())
	st := &started{cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		st.err = cmd.Wait()
		close(st.done)
	}()
	t.Cleanup(func() {
		if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("stopping the entrypoint: %v", err)
		}
		<-st.done
	})
	require.Eventually(t, func() bool { return len(s.starts(t)) > 0 }, 10*time.Second, 20*time.Millisecond,
		"the broker never started")
	// The broker runs; give the shell a moment to install its handlers around it.
	time.Sleep(200 * time.Millisecond)
	return st
}

// stop sends SIGTERM, as the kubelet does when the pod is deleted, and returns the exit code.
// A container that is still running after the grace period is killed (137): that is a failure.
func (st *started) stop(t *testing.T) int {
	t.Helper()
	require.NoError(t, st.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-st.done:
		return exitCode(t, st.err)
	case <-time.After(10 * time.Second):
		t.Fatalf("the container did not end on SIGTERM: %s", st.out)
		return 0
	}
}

func TestAFollowerEndsCleanlyOnSIGTERM(t *testing.T) {
	for _, tc := range []struct {
		name     string
		complete bool
	}{
		{"default", false},
		{"completeWorkers", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, script := exitSandbox(t, func(spec *fluxv1alpha2.MiniClusterSpec) { spec.Flux.CompleteWorkers = tc.complete })
			// The follower's broker exits with a status that is not 0 when it is stopped.
			st := s.start(t, script, []string{"JOB_COMPLETION_INDEX=1", "FAKE_FLUX_WAIT=143"})
			require.Equal(t, 0, st.stop(t), st.out.String())
			require.Len(t, s.starts(t), 1, "the follower's broker started again: %s", st.out)
			require.Equal(t, "the follower broker finished\n", s.terminationMessage(t))
		})
	}
}

func TestALeadStoppedBeforeItsJobEndsFails(t *testing.T) {
	s, script := exitSandbox(t, func(spec *fluxv1alpha2.MiniClusterSpec) {
		spec.Containers[0].Command = "sleep 30"
		spec.Containers[0].Launcher = true
	})
	st := s.start(t, script, []string{"JOB_COMPLETION_INDEX=0", "FAKE_FLUX_RUN=1"})
	require.Equal(t, 143, st.stop(t), st.out.String())
	require.Len(t, s.starts(t), 1, st.out.String())
	require.Equal(t, "the lead broker was stopped before its job ended (the broker exited with status 143)\n", s.terminationMessage(t))
	require.NoFileExists(t, filepath.Join(s.mount, "fluxfed/job-status"))
}
