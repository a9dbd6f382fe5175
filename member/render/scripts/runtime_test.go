package scripts

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// These tests run the rendered scripts for real, with a fake flux command, in a temporary
// directory standing in for the pod's volumes.

// fakeFlux answers "flux R encode" with a small R naming the hosts, and records the arguments
// of every "flux start" in $FAKE_FLUX_LOG (the number of words, then the words, each followed by
// a NUL, so that any word survives); with $FAKE_FLUX_ENV set, it also writes its environment
// there, NAME=VALUE each followed by a NUL. A start whose $FAKE_FLUX_RC is set and not 0 is a
// broker that fails: it exits with that status; the first $FAKE_FLUX_CRASHES starts exit with
// 1. Otherwise the broker ends as real Flux does, with the exit status of its initial program:
// the lead's program records the job's status in the file after "fluxfed-job", and the fake
// stands for a job that exited with $FAKE_JOB_RC (0 when unset); with $FAKE_FLUX_RUN set, it
// runs the initial program for real. With $FAKE_FLUX_WAIT set, a broker without an initial
// program (a follower) runs until it gets SIGTERM, then exits with $FAKE_FLUX_WAIT, as a
// follower broker that is stopped does.
const fakeFlux = `#!/bin/bash
case "$1" in
R)
	for a in "$@"; do
		case "$a" in --hosts=*) printf '{"nodelist": ["%s"]}\n' "${a#--hosts=}" ;; esac
	done
	;;
start)
	shift
	printf '%s\0' "$#" "$@" >>"$FAKE_FLUX_LOG"
	if [ -n "${FAKE_FLUX_ENV-}" ]; then
		for n in $(compgen -e); do printf '%s=%s\0' "$n" "${!n}"; done >"$FAKE_FLUX_ENV"
	fi
	if [ "${FAKE_FLUX_RC:-0}" != 0 ]; then
		exit "$FAKE_FLUX_RC"
	fi
	if [ -n "${FAKE_FLUX_CRASHES:-}" ]; then
		crashed=$(cat "$FAKE_FLUX_LOG.crashes" 2>/dev/null || echo 0)
		if [ "$crashed" -lt "$FAKE_FLUX_CRASHES" ]; then
			echo $((crashed + 1)) >"$FAKE_FLUX_LOG.crashes"
			exit 1
		fi
	fi
	while [ "$#" -gt 0 ]; do
		case "$1" in
		-o) shift 2 ;;
		-*) shift ;;
		*) break ;;
		esac
	done
	if [ "$#" = 0 ]; then
		if [ -n "${FAKE_FLUX_WAIT:-}" ]; then
			trap 'exit "$FAKE_FLUX_WAIT"' TERM
			# A broker that does not stop on SIGTERM (one waiting for its parent's goodbye).
			[ -z "${FAKE_FLUX_STUBBORN:-}" ] || trap '' TERM
			while :; do sleep 0.05; done
		fi
		exit 0
	fi
	if [ -n "${FAKE_FLUX_RUN:-}" ]; then
		# The job runs in a process group of its own, which a stopped broker signals whole.
		set -m
		"$@" &
		job=$!
		set +m
		trap 'kill -TERM -- "-$job"; wait "$job"; exit 143' TERM
		[ -z "${FAKE_FLUX_STUBBORN:-}" ] || trap '' TERM
		wait "$job"
		exit
	fi
	for ((i = 1; i < $#; i++)); do
		if [ "${!i}" = fluxfed-job ]; then
			j=$((i + 1))
			printf '%s\n' "${FAKE_JOB_RC:-0}" >"${!j}"
		fi
	done
	exit "${FAKE_JOB_RC:-0}"
	;;
getattr)
	# The broker answers, unless $FAKE_FLUX_GONE says it died.
	[ -z "${FAKE_FLUX_GONE:-}" ] || exit 1
	echo 0
	;;
*)
	echo "fake flux: unexpected $*" >&2
	exit 99
	;;
esac
`

// secretKey stands for the secret half of the certificate; it must never be printed.
const secretKey = "NEVER-PRINT-THIS-SECRET"

type sandbox struct {
	root, mount, config, curve, bin, log string
}

func newSandbox(t *testing.T, hostlist string) sandbox {
	t.Helper()
	requireBash(t)
	root := t.TempDir()
	s := sandbox{
		root:   root,
		mount:  filepath.Join(root, "mnt", "flux"),
		config: filepath.Join(root, "config"),
		curve:  filepath.Join(root, "curve"),
		bin:    filepath.Join(root, "bin"),
		log:    filepath.Join(root, "flux.log"),
	}
	for _, d := range []string{s.config, s.curve, s.bin} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(s.config, names.KeyBrokerTOML), []byte("[bootstrap]\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(s.config, names.KeyHostlist), []byte(hostlist), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(s.curve, names.KeyCurveCert),
		[]byte("curve\n    secret-key = \""+secretKey+"\"\n"), 0o400))
	require.NoError(t, os.WriteFile(filepath.Join(s.bin, "flux"), []byte(fakeFlux), 0o755))
	return s
}

// miniCluster returns a MiniCluster whose volume is in the sandbox and whose image brings its
// own Flux (the fake), so that nothing outside the sandbox is touched.
func (s sandbox) miniCluster(name string, mutate func(*fluxv1alpha2.MiniClusterSpec)) *fluxv1alpha2.MiniCluster {
	return v1alpha2test.Stored(name).Spec(func(spec *fluxv1alpha2.MiniClusterSpec) {
		spec.Flux.Container.MountPath = s.mount
		spec.Flux.Container.Disable = true
		mutate(spec)
	}).Obj()
}

// provision runs the provisioner with the sandbox's config and curve directories.
func (s sandbox) provision(t *testing.T, script string) string {
	t.Helper()
	out, err := s.run(t, "sh", s.provisioner(script), nil)
	require.NoError(t, err, "provisioner: %s", out)
	return out
}

// provisioner returns the provisioner script reading the sandbox's config and curve directories,
// and, with the view, the sandbox's stand-in of the flux view image (see image).
func (s sandbox) provisioner(script string) string {
	script = strings.Replace(script, "\nconfig_dir="+Quote(names.ConfigMountPath)+"\n", "\nconfig_dir="+Quote(s.config)+"\n", 1)
	script = strings.Replace(script, "\nimage_view=/opt/view\n", "\nimage_view="+Quote(s.imageView())+"\n", 1)
	script = strings.Replace(script, "\nimage_software=/opt/software\n", "\nimage_software="+Quote(filepath.Join(s.root, "image", "software"))+"\n", 1)
	return strings.Replace(script, "\ncurve_dir="+Quote(names.CurveMountPath)+"\n", "\ncurve_dir="+Quote(s.curve)+"\n", 1)
}

// imageView is where the sandbox's flux view image keeps its view, standing in for /opt/view.
// The image has no /opt/software: the entrypoints would copy it to the container's own
// /opt/software, outside the sandbox.
func (s sandbox) imageView() string { return filepath.Join(s.root, "image", "view") }

// image fills the stand-in of the flux view image's view with files (path: content) and
// symbolic links (path: "-> target").
func (s sandbox) image(t *testing.T, files map[string]string) {
	t.Helper()
	for p, content := range files {
		file := filepath.Join(s.imageView(), p)
		require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
		if target, ok := strings.CutPrefix(content, "-> "); ok {
			require.NoError(t, os.Symlink(target, file))
			continue
		}
		require.NoError(t, os.WriteFile(file, []byte(content), 0o755))
	}
}

func (s sandbox) run(t *testing.T, shell, script string, env []string) (string, error) {
	t.Helper()
	return s.exec(t, env, shell, "-c", s.sandboxed(script), "entrypoint")
}

// sandboxed returns script with its termination message written in the sandbox (terminationLog),
// no wait before a broker starts again, and 1 s for a broker to stop before it is killed.
func (s sandbox) sandboxed(script string) string {
	script = strings.Replace(script, "\nfluxfed_termination_log=/dev/termination-log\n",
		"\nfluxfed_termination_log="+Quote(s.terminationLog())+"\n", 1)
	script = strings.Replace(script, "\nfluxfed_stop_seconds=25\n", "\nfluxfed_stop_seconds=1\n", 1)
	return strings.Replace(script, "\nfluxfed_retry_seconds=15\n", "\nfluxfed_retry_seconds=0\n", 1)
}

// terminationLog is where the scripts run in the sandbox write their termination message.
func (s sandbox) terminationLog() string { return filepath.Join(s.root, "termination-log") }

// terminationMessage returns the last termination message a script wrote, "" when none did.
func (s sandbox) terminationMessage(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(s.terminationLog())
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	require.NoError(t, err)
	return string(data)
}

// runFile runs the script in file, as the pods do, so that bytes a command line cannot carry
// reach the shell too.
func (s sandbox) runFile(t *testing.T, shell, file string, env []string) (string, error) {
	t.Helper()
	script, err := os.ReadFile(file)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, []byte(s.sandboxed(string(script))), 0o644))
	return s.exec(t, env, shell, file)
}

func (s sandbox) exec(t *testing.T, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := s.command(env, name, args...)
	out, err := cmd.CombinedOutput()
	require.NotContains(t, string(out), secretKey, "the certificate's secret key was printed")
	return string(out), err
}

// command is a command run in the sandbox, as a container of pod test-0 with the fake flux first
// on PATH, with env added.
func (s sandbox) command(env []string, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = s.root
	cmd.Env = append([]string{
		"PATH=" + s.bin + ":" + os.Getenv("PATH"),
		"HOME=" + s.root,
		"HOSTNAME=test-0",
		"FAKE_FLUX_LOG=" + s.log,
	}, env...)
	return cmd
}

// starts returns the recorded flux start calls, each as its list of arguments.
func (s sandbox) starts(t *testing.T) [][]string {
	t.Helper()
	data, err := os.ReadFile(s.log)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	words := strings.Split(string(data), "\x00")
	words = words[:len(words)-1]
	var calls [][]string
	for len(words) > 0 {
		n, err := strconv.Atoi(words[0])
		require.NoError(t, err)
		require.LessOrEqual(t, 1+n, len(words), "truncated log of flux start")
		calls = append(calls, words[1:1+n])
		words = words[1+n:]
	}
	return calls
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	return exit.ExitCode()
}

func TestProvisionerRuns(t *testing.T) {
	s := newSandbox(t, "run-[0-1]")
	mc := s.miniCluster("run", func(*fluxv1alpha2.MiniClusterSpec) {})
	got, err := Render(mc, Inputs{Hostlist: "run-[0-1]", Quorum: 2})
	require.NoError(t, err)
	// A stale config from an earlier attempt must not stay next to broker.toml.
	require.NoError(t, os.MkdirAll(filepath.Join(s.mount, "view/etc/flux/config"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(s.mount, "view/etc/flux/config/old.toml"), nil, 0o644))

	s.provision(t, got[ProvisionerKey])
	// Running it twice (an init container restart) must work too.
	s.provision(t, got[ProvisionerKey])

	read := func(p string) string {
		data, err := os.ReadFile(filepath.Join(s.mount, p))
		require.NoError(t, err)
		return string(data)
	}
	require.Equal(t, "[bootstrap]\n", read("view/etc/flux/config/broker.toml"))
	require.Equal(t, "run-[0-1]", read("view/etc/flux/system/hostlist"))
	require.Contains(t, read("curve/curve.cert"), secretKey)
	require.NoFileExists(t, filepath.Join(s.mount, "view/etc/flux/config/old.toml"))
	for _, d := range []string{"view/etc/flux/system", "view/run/flux", "view/var/lib/flux", "fluxfed"} {
		require.DirExists(t, filepath.Join(s.mount, d))
	}
	cron, err := os.ReadDir(filepath.Join(s.mount, "fluxfed/cron.d"))
	require.NoError(t, err)
	require.Empty(t, cron, "the brokers' cron directory starts empty")
	cert, err := os.Stat(filepath.Join(s.mount, "curve/curve.cert"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o400), cert.Mode().Perm())
	dir, err := os.Stat(filepath.Join(s.mount, "curve"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), dir.Mode().Perm())
	require.Contains(t, read("flux-view.sh"), "export fluxsocket=")
}

// TestProvisionerCopiesTheView runs the provisioner of a MiniCluster that uses the flux view,
// with the sandbox's stand-in of the flux view image: the view arrives in the shared volume with
// its symbolic links as they are.
func TestProvisionerCopiesTheView(t *testing.T) {
	s := newSandbox(t, "view-0")
	s.image(t, map[string]string{
		"bin/flux-real":          "#!/bin/sh\n",
		"bin/flux":               "-> flux-real",
		"etc/flux/rc1.d/01-test": "#!/bin/sh\n",
	})
	mc := s.miniCluster("view", func(spec *fluxv1alpha2.MiniClusterSpec) { spec.Flux.Container.Disable = false })
	got, err := Render(mc, Inputs{Hostlist: "view-0", Quorum: 1})
	require.NoError(t, err)
	s.provision(t, got[ProvisionerKey])

	link, err := os.Readlink(filepath.Join(s.mount, "view/bin/flux"))
	require.NoError(t, err)
	require.Equal(t, "flux-real", link)
	require.FileExists(t, filepath.Join(s.mount, "view/etc/flux/rc1.d/01-test"))
	require.FileExists(t, filepath.Join(s.mount, "view/etc/flux/config/broker.toml"))
	require.NoDirExists(t, filepath.Join(s.mount, "software"), "the image has no software")
}

// TestCronDirectoryIsEmpty runs the provisioner with a flux view that holds flux-core's
// kvs-backup.cron, as the flux view images do, then the lead broker's entrypoint: the broker's
// cron.directory must exist and hold no crontab, after a restart of the init container too.
func TestCronDirectoryIsEmpty(t *testing.T) {
	s := newSandbox(t, "cron-0")
	s.image(t, map[string]string{
		"etc/flux/system/cron.d/kvs-backup.cron": "0 3 * * * flux dump\n",
	})
	mc := s.miniCluster("cron", func(spec *fluxv1alpha2.MiniClusterSpec) {
		spec.Flux.Container.Disable = false
		spec.Interactive = true
	})
	got, err := Render(mc, Inputs{Hostlist: "cron-0", Quorum: 1})
	require.NoError(t, err)
	s.provision(t, got[ProvisionerKey])
	// A crontab left in fluxfed's directory by an earlier run of the pod is gone when the init
	// container runs again.
	left := filepath.Join(s.mount, "fluxfed/cron.d/left.cron")
	require.NoError(t, os.MkdirAll(filepath.Dir(left), 0o755))
	require.NoError(t, os.WriteFile(left, nil, 0o644))
	s.provision(t, got[ProvisionerKey])

	out, err := s.run(t, "bash", got["container-cron.sh"], []string{"JOB_COMPLETION_INDEX=0"})
	require.NoError(t, err, out)
	calls := s.starts(t)
	require.Len(t, calls, 1, out)
	var dir string
	for _, arg := range calls[0] {
		if v, ok := strings.CutPrefix(arg, "-Scron.directory="); ok {
			dir = v
		}
	}
	require.NotEmpty(t, dir, "no -Scron.directory in %q", calls[0])
	// flux-core loads every file of the directory as a crontab: there must be none.
	entries, err := os.ReadDir(dir)
	require.NoError(t, err, "the cron directory must exist")
	require.Empty(t, entries, "the cron directory %s", dir)
	// The view keeps flux-core's file; the broker is not pointed at it.
	require.FileExists(t, filepath.Join(s.mount, "view/etc/flux/system/cron.d/kvs-backup.cron"))
}

func TestLeadBrokerRuns(t *testing.T) {
	tests := []struct {
		name     string
		mutate   func(*fluxv1alpha2.MiniClusterSpec)
		jobRC    string
		wantRC   int
		wantTail []string // the end of flux start's arguments
		check    func(t *testing.T, s sandbox, out string)
	}{
		{
			name: "command and hooks then the status of the job",
			mutate: func(spec *fluxv1alpha2.MiniClusterSpec) {
				spec.Containers[0].Command = `echo "it's $HOME"`
				spec.Containers[0].Commands = fluxv1alpha2.Commands{
					Init:      "FLUXFED_TEST_ORDER=init",
					Pre:       `FLUXFED_TEST_ORDER="$FLUXFED_TEST_ORDER pre"`,
					BrokerPre: `FLUXFED_TEST_ORDER="$FLUXFED_TEST_ORDER brokerPre"`,
					WorkerPre: `FLUXFED_TEST_ORDER="$FLUXFED_TEST_ORDER workerPre"`,
					Post:      `echo "order: $FLUXFED_TEST_ORDER post"`,
				}
				spec.Containers[0].PreCommand = `FLUXFED_TEST_ORDER="$FLUXFED_TEST_ORDER preCommand"`
				spec.Flux.Environment = map[string]string{"FLUXFED_TEST_ENV": "a 'b' $c"}
			},
			jobRC:    "3",
			wantRC:   3,
			wantTail: []string{"flux", "submit", "-n", "1", "--quiet", "--watch", "bash", "-c", `echo "it's $HOME"`},
			check: func(t *testing.T, s sandbox, out string) {
				require.Contains(t, out, "order: init preCommand pre brokerPre post")
				data, err := os.ReadFile(filepath.Join(s.mount, "view/etc/flux/system/R"))
				require.NoError(t, err)
				require.Equal(t, "{\"nodelist\": [\"lead-[0-1]\"]}\n", string(data))
			},
		},
		{
			name: "commands.script keeps the Flux Operator's escaping",
			mutate: func(spec *fluxv1alpha2.MiniClusterSpec) {
				spec.Containers[0].Commands.Script = "echo \"rank \\${FLUX_TASK_RANK}\"\necho $FLUXFED_TEST_VAR\nFLUXFED_SCRIPT_EOF\n"
			},
			wantTail: []string{"flux", "submit", "-n", "1", "--quiet", "--watch", "bash", "__MOUNT__/fluxfed/job-script"},
			check: func(t *testing.T, s sandbox, _ string) {
				data, err := os.ReadFile(filepath.Join(s.mount, "fluxfed/job-script"))
				require.NoError(t, err)
				lines := strings.Split(string(data), "\n")
				require.Equal(t, `echo "rank ${FLUX_TASK_RANK}"`, lines[0])
				require.Equal(t, "echo from-the-pod", lines[1])
				require.Equal(t, "FLUXFED_SCRIPT_EOF", lines[2])
			},
		},
		{
			name: "a broken commands.script stops the pod before any broker starts",
			mutate: func(spec *fluxv1alpha2.MiniClusterSpec) {
				spec.Containers[0].Commands.Script = "echo 'unbalanced $(\n"
			},
			wantRC: 1,
			check: func(t *testing.T, _ sandbox, out string) {
				require.Contains(t, out, "cannot write commands.script")
			},
		},
		{
			name: "interactive",
			mutate: func(spec *fluxv1alpha2.MiniClusterSpec) {
				spec.Interactive = true
				spec.Containers[0].Command = "ignored"
			},
			wantTail: []string{"-Sbroker.quorum=2", "-Sbroker.rc2_none=1"},
		},
		{
			name: "archive restores and dumps",
			mutate: func(spec *fluxv1alpha2.MiniClusterSpec) {
				spec.Interactive = true
				spec.Archive.Path = "__ROOT__/state/archive.tar.gz"
			},
			wantTail: []string{"-Sbroker.rc2_none=1", "-Scontent.restore=__ROOT__/state/archive.tar.gz", "-Scontent.dump=__ROOT__/state/archive.tar.gz"},
		},
		{
			name: "batch writes the batch script",
			mutate: func(spec *fluxv1alpha2.MiniClusterSpec) {
				spec.Containers[0].Batch = true
				spec.Containers[0].Command = "echo one\necho 'two'\n"
			},
			wantTail: []string{"-n", "1", "--flags", "waitable", "__MOUNT__/fluxfed/batch.sh"},
			check: func(t *testing.T, s sandbox, _ string) {
				data, err := os.ReadFile(filepath.Join(s.mount, "fluxfed/batch.sh"))
				require.NoError(t, err)
				require.Contains(t, string(data), "--output=/tmp/fluxout/job-1.out echo 'two'\n")
				shellSyntax(t, "bash", string(data))
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSandbox(t, "lead-[0-1]")
			mc := s.miniCluster("lead", func(spec *fluxv1alpha2.MiniClusterSpec) {
				spec.Size = 2
				tt.mutate(spec)
				if strings.HasPrefix(spec.Archive.Path, "__ROOT__") {
					spec.Archive.Path = strings.Replace(spec.Archive.Path, "__ROOT__", s.root, 1)
					require.NoError(t, os.MkdirAll(filepath.Join(s.root, "state"), 0o755))
					require.NoError(t, os.WriteFile(filepath.Join(s.root, "state/archive.tar.gz"), nil, 0o644))
				}
			})
			got, err := Render(mc, Inputs{Hostlist: "lead-[0-1]", Quorum: 2})
			require.NoError(t, err)
			s.provision(t, got[ProvisionerKey])
			out, err := s.run(t, "bash", got["container-lead.sh"], []string{
				"JOB_COMPLETION_INDEX=0", "FAKE_JOB_RC=" + tt.jobRC, "FLUXFED_TEST_VAR=from-the-pod",
			})
			require.Equal(t, tt.wantRC, exitCode(t, err), out)
			calls := s.starts(t)
			if tt.wantTail == nil {
				require.Empty(t, calls, out)
			} else {
				require.Len(t, calls, 1, out)
			}
			want := make([]string, len(tt.wantTail))
			for i, w := range tt.wantTail {
				w = strings.ReplaceAll(w, "__MOUNT__", s.mount)
				want[i] = strings.ReplaceAll(w, "__ROOT__", s.root)
			}
			if len(want) > 0 {
				require.Equal(t, want, calls[0][len(calls[0])-len(want):])
			}
			if tt.check != nil {
				tt.check(t, s, out)
			}
		})
	}
}

func TestFollowerBrokerRuns(t *testing.T) {
	tests := []struct {
		name      string
		complete  bool
		follower  bool
		resources bool // broker.toml describes the resources: no R is encoded
		index     string
		fluxRC    string
		wantRC    int
		wantCalls int
	}{
		{name: "clean exit ends the pod", index: "1", wantCalls: 1},
		{name: "completeWorkers ends a failed follower successfully", complete: true, index: "1", fluxRC: "4", wantCalls: 1},
		{name: "burst child: index 0 is a follower too", follower: true, index: "0", wantCalls: 1},
		{name: "burst child with resource config: no R is encoded", follower: true, resources: true, index: "1", wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSandbox(t, "f-[0-1]")
			mc := s.miniCluster("f", func(spec *fluxv1alpha2.MiniClusterSpec) {
				spec.Size = 2
				spec.Flux.CompleteWorkers = tt.complete
				spec.Containers[0].Commands.Script = "#!/bin/sh\necho task-ran\n"
				spec.Containers[0].Commands.WorkerPre = "echo worker-pre-ran"
			})
			got, err := Render(mc, Inputs{Hostlist: "f-[0-1]", Quorum: 2, Follower: tt.follower, ResourcesFromConfig: tt.resources})
			require.NoError(t, err)
			s.provision(t, got[ProvisionerKey])
			out, err := s.run(t, "bash", got["container-f.sh"], []string{
				"JOB_COMPLETION_INDEX=" + tt.index, "FAKE_FLUX_RC=" + tt.fluxRC,
			})
			require.Equal(t, tt.wantRC, exitCode(t, err), out)
			require.Contains(t, out, "worker-pre-ran")
			// The job's tasks run commands.script on whichever node they land on, burst
			// nodes included: every broker pod writes it.
			script, err := os.ReadFile(filepath.Join(s.mount, "fluxfed/job-script"))
			require.NoError(t, err)
			require.Equal(t, "#!/bin/sh\necho task-ran", strings.TrimSpace(string(script)))
			// R is encoded from this node unless broker.toml describes the resources.
			_, err = os.Stat(filepath.Join(s.mount, "view/etc/flux/system/R"))
			require.Equal(t, tt.resources, errors.Is(err, os.ErrNotExist), "R encoded: %v", err)
			calls := s.starts(t)
			require.Len(t, calls, tt.wantCalls)
			for _, c := range calls {
				require.NotContains(t, c, "submit")
				require.NotContains(t, c, "-Sbroker.rc2_none=1")
			}
		})
	}
}

// TestServiceScriptForwardsSIGTERM checks that deleting a pod stops the service's command and
// still runs commands.post: the script is PID 1 of its container and must handle SIGTERM.
func TestServiceScriptForwardsSIGTERM(t *testing.T) {
	s := newSandbox(t, "svc-0")
	mc := s.miniCluster("svc", func(spec *fluxv1alpha2.MiniClusterSpec) {
		spec.Containers[0].Command = "true"
		spec.Services = []fluxv1alpha2.Container{{
			Name:     "web",
			Command:  "echo started; sleep 30",
			Commands: fluxv1alpha2.Commands{Post: "echo post-ran"},
		}}
	})
	got, err := Render(mc, Inputs{Hostlist: "svc-0", Quorum: 1})
	require.NoError(t, err)

	cmd := exec.Command("bash", "-c", got[ServiceKey("web")])
	var out strings.Builder
	cmd.Stdout = &out
	cmd.Stderr = &out
	require.NoError(t, cmd.Start())
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "started") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	err = cmd.Wait()
	require.Less(t, time.Since(start), 10*time.Second, "the command was not stopped")
	require.Equal(t, 143, exitCode(t, err), out.String())
	require.Contains(t, out.String(), "post-ran")
}
