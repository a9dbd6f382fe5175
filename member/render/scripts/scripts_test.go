package scripts

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/member/render/names"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestRenderGolden renders every fixture and compares each script with
// testdata/<case>/<key>.golden; go test -run TestRenderGolden -update rewrites them.
func TestRenderGolden(t *testing.T) {
	for _, f := range fixtures() {
		t.Run(f.name, func(t *testing.T) {
			got, err := Render(f.mc, f.in)
			require.NoError(t, err)
			dir := filepath.Join("testdata", f.name)
			if *update {
				require.NoError(t, os.RemoveAll(dir))
				require.NoError(t, os.MkdirAll(dir, 0o755))
				for key, script := range got {
					require.NoError(t, os.WriteFile(filepath.Join(dir, key+".golden"), []byte(script), 0o644))
				}
			}
			files, err := filepath.Glob(filepath.Join(dir, "*.golden"))
			require.NoError(t, err)
			var keys []string
			for _, file := range files {
				keys = append(keys, strings.TrimSuffix(filepath.Base(file), ".golden"))
			}
			require.ElementsMatch(t, keys, mapKeys(got), "keys of the ConfigMap")
			for key, script := range got {
				want, err := os.ReadFile(filepath.Join(dir, key+".golden"))
				require.NoError(t, err)
				require.Equal(t, string(want), script, "%s differs from its golden file; rerun with -update if the change is intended", key)
			}
		})
	}
}

func mapKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestRenderedSyntax checks every rendered script with bash -n, and the provisioner also with
// dash -n, because it runs under whatever /bin/sh the init image has.
func TestRenderedSyntax(t *testing.T) {
	requireBash(t)
	for _, f := range fixtures() {
		got, err := Render(f.mc, f.in)
		require.NoError(t, err)
		for key, script := range got {
			t.Run(f.name+"/"+key, func(t *testing.T) {
				shellSyntax(t, "bash", script)
				if key == ProvisionerKey {
					if _, err := exec.LookPath("dash"); err == nil {
						shellSyntax(t, "dash", script)
					}
				}
			})
		}
	}
}

// requireBash fails tests that run scripts on a machine without bash: the pods' entrypoints are
// bash scripts, so these tests are the only proof that they parse and run.
func requireBash(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("bash is required to test the entrypoint scripts")
	}
}

func shellSyntax(t *testing.T, shell, script string) {
	t.Helper()
	cmd := exec.Command(shell, "-n")
	cmd.Stdin = strings.NewReader(script)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s -n: %s\n%s", shell, out, script)
}

// values runs the BEGIN VALUES block of a rendered script in bash and returns what the named
// variables hold, one line per element for arrays: the proof that quoting round-trips.
func values(t *testing.T, script string, names ...string) map[string][]string {
	t.Helper()
	requireBash(t)
	start := strings.Index(script, "# BEGIN VALUES\n")
	end := strings.Index(script, "# END VALUES\n")
	require.True(t, start >= 0 && end > start, "no values block")
	block := script[start:end]
	var probe strings.Builder
	probe.WriteString(block)
	for _, n := range names {
		// NUL-separated elements, then a record separator, so that any byte survives.
		probe.WriteString("for fluxfed_probe in \"${" + n + "[@]}\"; do printf '%s\\0' \"$fluxfed_probe\"; done; printf '\\036'\n")
	}
	cmd := exec.Command("bash", "-c", probe.String())
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.Output()
	require.NoError(t, err)
	records := strings.Split(string(out), "\x1e")
	require.Len(t, records, len(names)+1)
	got := map[string][]string{}
	for i, n := range names {
		elems := strings.Split(records[i], "\x00")
		got[n] = elems[:len(elems)-1]
	}
	return got
}

func TestRenderKeys(t *testing.T) {
	tests := []struct {
		name string
		fix  string
		want []string
	}{
		{name: "unnamed flux container is named after the MiniCluster", fix: "root-size-1", want: []string{"container-hello.sh", ProvisionerKey}},
		{name: "named flux container", fix: "root-size-4-tasks", want: []string{"container-lammps.sh", ProvisionerKey}},
		{
			name: "sidecars with a wrapped command and services with a command",
			fix:  "services",
			// raw has noWrapEntrypoint and registry has no command: their images' own
			// entrypoints run. nginx has no command either.
			want: []string{"container-client.sh", "container-monitor.sh", ProvisionerKey, "service-registry.sh"},
		},
	}
	all := map[string]fixture{}
	for _, f := range fixtures() {
		all[f.name] = f
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := all[tt.fix]
			got, err := Render(f.mc, f.in)
			require.NoError(t, err)
			require.Equal(t, tt.want, mapKeys(got))
		})
	}
}

func TestContainerCommand(t *testing.T) {
	f := fixtureNamed(t, "services")
	tests := []struct {
		name string
		i    int
		want []string
	}{
		{name: "flux container", i: 0, want: []string{"/bin/bash", "/fluxfed/entrypoint/container-client.sh"}},
		{name: "wrapped sidecar", i: 1, want: []string{"/bin/bash", "/fluxfed/entrypoint/container-monitor.sh"}},
		{name: "noWrapEntrypoint", i: 2, want: []string{"/bin/sh", "-c", "sleep infinity"}},
		{name: "no command keeps the image entrypoint", i: 3, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, ContainerCommand(f.mc, tt.i))
		})
	}
	require.Nil(t, ServiceCommand(f.mc, 0))
	require.Equal(t, []string{"/bin/bash", "/fluxfed/entrypoint/service-registry.sh"}, ServiceCommand(f.mc, 1))
	require.Equal(t, []string{"/bin/sh", "/fluxfed/entrypoint/provision.sh"}, ProvisionerCommand())
}

func fixtureNamed(t *testing.T, name string) fixture {
	t.Helper()
	for _, f := range fixtures() {
		if f.name == name {
			return f
		}
	}
	t.Fatalf("no fixture %q", name)
	return fixture{}
}

// TestFluxScriptValues checks, by running the values block in bash, the words each spec turns
// into: the broker options, the lead broker's initial program and the quoted snippets.
func TestFluxScriptValues(t *testing.T) {
	tests := []struct {
		name string
		fix  string
		want map[string][]string
	}{
		{
			name: "tasks 1 gives -n 1",
			fix:  "root-size-1",
			want: map[string][]string{
				"fluxfed_start": {"flux", "start"},
				"fluxfed_broker_options": {
					"-o", "--config-path=/mnt/flux/view/etc/flux/config",
					"-Scron.directory=/mnt/flux/fluxfed/cron.d",
					"-Sstatedir=/mnt/flux/view/var/lib/flux",
					"-Srundir=/mnt/flux/view/run/flux",
					"-Slocal-uri=local:///mnt/flux/view/run/flux/local",
					"-Slog-stderr-mode=local",
					"-Slog-stderr-level=6",
					"-Stbon.connect_timeout=5s",
					"-Sbroker.quorum=1",
				},
				"fluxfed_lead_options":    {},
				"fluxfed_initial_program": recorded("flux", "submit", "-n", "1", "--quiet", "--watch", "bash", "-c", "echo hello world"),
			},
		},
		{
			name: "more tasks than pods gives -N and -n, with option flags",
			fix:  "root-size-4-tasks",
			want: map[string][]string{
				"fluxfed_initial_program": recorded("flux", "submit", "-N", "4", "-n", "16", "-ompi=openmpi@5", "-o", "cpu-affinity=per-task", "--quiet", "--watch", "bash", "-c", "lmp -v x 2 -v y 2 -v z 2 -in in.reaxc.hns -nocite"),
			},
		},
		{
			name: "tasks 0 gives only -N, in batch mode",
			fix:  "batch",
			want: map[string][]string{
				"fluxfed_initial_program": recorded("bash", "-c", `flux batch "$@" && flux job wait --all`, "fluxfed-batch", "-N", "2", "--flags", "waitable", "/mnt/flux/fluxfed/batch.sh"),
				"fluxfed_batch_script": {"#!/bin/bash\n" +
					"flux submit --flags waitable --error=/tmp/another-out/job-0.err --output=/tmp/another-out/job-0.out echo hello world 1\n" +
					"flux submit --flags waitable --error=/tmp/another-out/job-1.err --output=/tmp/another-out/job-1.out echo \"hello world 2\" > /dev/null\n" +
					"flux submit --flags waitable --error=/tmp/another-out/job-2.err --output=/tmp/another-out/job-2.out echo $HOSTNAME 3\n" +
					"flux queue idle\nflux jobs -a\n"},
				"fluxfed_output_dir": {"/tmp/another-out"},
			},
		},
		{
			name: "tasks equal to size gives only -n",
			fix:  "job-script",
			want: map[string][]string{
				"fluxfed_initial_program": recorded("flux", "submit", "-n", "2", "--quiet", "--watch", "/mnt/flux/fluxfed/job-script"),
			},
		},
		{
			name: "interactive runs no initial program",
			fix:  "interactive",
			want: map[string][]string{
				"fluxfed_lead_options":    {"-Sbroker.rc2_none=1"},
				"fluxfed_initial_program": {},
			},
		},
		{
			name: "launcher runs the command itself, under prefix, wrap applies to flux start",
			fix:  "launcher",
			want: map[string][]string{
				"fluxfed_start":           {"fusion", "--debug", "flux", "start", "--wrap=strace,-e,network,-tt"},
				"fluxfed_initial_program": recorded("fusion", "--debug", "bash", "-c", "snakemake --cores 1 --jobs 2 --executor flux"),
			},
		},
		{
			name: "timed, debug, zeromq, submitCommand, prefix, empty connectTimeout",
			fix:  "custom-commands",
			want: map[string][]string{
				"fluxfed_start": {"/usr/bin/time", "-f", "FLUXTIME fluxstart wall time %E", "env", "LABEL=a b", "flux", "start"},
				"fluxfed_broker_options": {
					"-o", "--config-path=/mnt/flux/view/etc/flux/config",
					"-Scron.directory=/mnt/flux/fluxfed/cron.d",
					"-Sstatedir=/mnt/flux/view/var/lib/flux",
					"-Srundir=/mnt/flux/view/run/flux",
					"-Slocal-uri=local:///mnt/flux/view/run/flux/local",
					"-Slog-stderr-mode=local",
					"-Slog-stderr-level=6",
					"-Sbroker.quorum=2",
					"-Stbon.zmqdebug=1",
				},
				"fluxfed_initial_program": recorded(
					"/usr/bin/time", "-f", "FLUXTIME fluxsubmit wall time %E", "env", "LABEL=a b",
					"flux", "mini", "submit", "-n", "1", "-vvv", "--quiet", "--watch",
					"bash", "-c", `echo "rank $FLUX_TASK_RANK" 'single' | tee -a /tmp/out.txt`,
				),
				"fluxfed_init":       {"export LD_LIBRARY_PATH=/opt/conda/lib"},
				"fluxfed_preCommand": {"asFlux=\"sudo -E\"\necho pre-command"},
				"fluxfed_pre":        {"echo 'pre with a quote: '\\''x'\\'''"},
				"GREETING":           {`it's "quoted" $HOME ` + "`date`"},
			},
		},
		{
			name: "quiet sets the log level to 0",
			fix:  "volumes",
			want: map[string][]string{
				"fluxfed_broker_options": {
					"-o", "--config-path=/mnt/flux/view/etc/flux/config",
					"-Scron.directory=/mnt/flux/fluxfed/cron.d",
					"-Sstatedir=/mnt/flux/view/var/lib/flux",
					"-Srundir=/mnt/flux/view/run/flux",
					"-Slocal-uri=local:///mnt/flux/view/run/flux/local",
					"-Slog-stderr-mode=local",
					"-Slog-stderr-level=0",
					"-Stbon.connect_timeout=5s",
					"-Sbroker.quorum=2",
				},
			},
		},
		{
			name: "disableSocket leaves rundir and local-uri to Flux; topology input",
			fix:  "pod-options",
			want: map[string][]string{
				"fluxfed_broker_options": {
					"-o", "--config-path=/mnt/flux/view/etc/flux/config",
					"-Scron.directory=/mnt/flux/fluxfed/cron.d",
					"-Sstatedir=/mnt/flux/view/var/lib/flux",
					"-Slog-stderr-mode=local",
					"-Slog-stderr-level=6",
					"-Stbon.connect_timeout=5s",
					"-Sbroker.quorum=2",
					"-Stbon.topo=kary:2",
				},
				"fluxfed_initial_program": recorded("flux", "submit", "-N", "2", "-n", "4", "--quiet", "--watch", "bash", "-c", "nproc"),
			},
		},
		{
			name: "burst child: no quorum, followers only",
			fix:  "burst-child",
			want: map[string][]string{
				"fluxfed_hostlist": {"10.0.0.5,flux-sample-1,burst-0-[0-2]"},
				"fluxfed_broker_options": {
					"-o", "--config-path=/mnt/flux/view/etc/flux/config",
					"-Scron.directory=/mnt/flux/fluxfed/cron.d",
					"-Sstatedir=/mnt/flux/view/var/lib/flux",
					"-Srundir=/mnt/flux/view/run/flux",
					"-Slocal-uri=local:///mnt/flux/view/run/flux/local",
					"-Slog-stderr-mode=local",
					"-Slog-stderr-level=6",
					"-Stbon.connect_timeout=5s",
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fixtureNamed(t, tt.fix)
			got, err := Render(f.mc, f.in)
			require.NoError(t, err)
			script := got[ContainerKey(names.ContainerName(f.mc, 0))]
			names := mapKeys(toSet(tt.want))
			require.Equal(t, tt.want, values(t, script, names...))
		})
	}
}

func toSet(m map[string][]string) map[string]string {
	s := map[string]string{}
	for k := range m {
		s[k] = ""
	}
	return s
}

// TestFollowerScriptHasNoJob checks that a burst child's script never starts a lead broker or
// a job, whatever its container says.
func TestFollowerScriptHasNoJob(t *testing.T) {
	f := fixtureNamed(t, "burst-child")
	f.mc.Spec.Containers[0].Command = "should never run"
	got, err := Render(f.mc, f.in)
	require.NoError(t, err)
	script := got["container-lammps.sh"]
	require.NotContains(t, script, "should never run")
	require.NotContains(t, script, "fluxfed_initial_program")
	require.NotContains(t, script, "fluxfed_lead=true")
}

// TestNoEffectFields checks that the fields documented as having no effect do not change any
// script.
func TestNoEffectFields(t *testing.T) {
	base := fixtureNamed(t, "root-size-1")
	want, err := Render(base.mc, base.in)
	require.NoError(t, err)
	tests := []struct {
		name   string
		mutate func(*fluxv1alpha2.MiniCluster)
	}{
		{name: "cores", mutate: func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Containers[0].Cores = 8 }},
		{name: "fluxUser", mutate: func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Containers[0].FluxUser = &fluxv1alpha2.FluxUser{Name: "other", UID: 2000}
		}},
		{name: "runFluxAsRoot", mutate: func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Containers[0].Commands.RunFluxAsRoot = true }},
		{name: "diagnostics", mutate: func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Containers[0].Diagnostics = true }},
		{name: "arch", mutate: func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Flux.Arch = "arm" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := base.mc.DeepCopy()
			tt.mutate(mc)
			got, err := Render(mc, base.in)
			require.NoError(t, err)
			require.Equal(t, want, got)
		})
	}
}

func TestRenderErrors(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*fluxv1alpha2.MiniCluster, *Inputs)
		wantErr string
	}{
		{name: "empty hostlist", mutate: func(_ *fluxv1alpha2.MiniCluster, in *Inputs) { in.Hostlist = "" }, wantErr: "hostlist is empty"},
		{name: "bad hostlist", mutate: func(_ *fluxv1alpha2.MiniCluster, in *Inputs) { in.Hostlist = "a-[0-" }, wantErr: "hostlist"},
		{name: "hostlist with blanks", mutate: func(_ *fluxv1alpha2.MiniCluster, in *Inputs) { in.Hostlist = "a-0 a-1" }, wantErr: "blanks"},
		{name: "negative quorum", mutate: func(_ *fluxv1alpha2.MiniCluster, in *Inputs) { in.Quorum = -1 }, wantErr: "negative"},
		{name: "no flux container", mutate: func(mc *fluxv1alpha2.MiniCluster, _ *Inputs) {
			mc.Spec.Containers = append(mc.Spec.Containers, fluxv1alpha2.Container{Name: "b"})
		}, wantErr: "no container runs Flux"},
		{name: "container named like the flux container", mutate: func(mc *fluxv1alpha2.MiniCluster, _ *Inputs) {
			mc.Spec.Containers[0].RunFlux = true
			mc.Spec.Containers = append(mc.Spec.Containers, fluxv1alpha2.Container{Name: "hello", Command: "x"})
		}, wantErr: "used twice"},
		{name: "bad environment name", mutate: func(mc *fluxv1alpha2.MiniCluster, _ *Inputs) {
			mc.Spec.Flux.Environment = map[string]string{"A-B": "x"}
		}, wantErr: "not a valid variable name"},
		{name: "reserved environment name", mutate: func(mc *fluxv1alpha2.MiniCluster, _ *Inputs) {
			mc.Spec.Flux.Environment = map[string]string{"fluxfed_rc": "x"}
		}, wantErr: "reserve"},
		{name: "unterminated quote in prefix", mutate: func(mc *fluxv1alpha2.MiniCluster, _ *Inputs) {
			mc.Spec.Containers[0].Commands.Prefix = `env "A=b`
		}, wantErr: "commands.prefix"},
		{name: "unterminated quote in optionFlags", mutate: func(mc *fluxv1alpha2.MiniCluster, _ *Inputs) {
			mc.Spec.Flux.OptionFlags = `-o 'x`
		}, wantErr: "optionFlags"},
		{name: "unterminated quote in submitCommand", mutate: func(mc *fluxv1alpha2.MiniCluster, _ *Inputs) {
			mc.Spec.Flux.SubmitCommand = `flux "submit`
		}, wantErr: "submitCommand"},
		{name: "comma in the mount path", mutate: func(mc *fluxv1alpha2.MiniCluster, _ *Inputs) {
			mc.Spec.Flux.Container.MountPath = "/mnt/a,b"
		}, wantErr: "comma"},
		{name: "space in the mount path", mutate: func(mc *fluxv1alpha2.MiniCluster, _ *Inputs) {
			mc.Spec.Flux.Container.MountPath = "/mnt/a b"
		}, wantErr: "white space"},
		{name: "no-break space in the mount path", mutate: func(mc *fluxv1alpha2.MiniCluster, _ *Inputs) {
			mc.Spec.Flux.Container.MountPath = "/mnt/a\u00a0b"
		}, wantErr: "white space"},
		{name: "ideographic space in the mount path", mutate: func(mc *fluxv1alpha2.MiniCluster, _ *Inputs) {
			mc.Spec.Flux.Container.MountPath = "/mnt/a\u3000b"
		}, wantErr: "white space"},
		{name: "tab in the mount path", mutate: func(mc *fluxv1alpha2.MiniCluster, _ *Inputs) {
			mc.Spec.Flux.Container.MountPath = "/mnt/a\tb"
		}, wantErr: "white space"},
		{name: "comma in the archive path", mutate: func(mc *fluxv1alpha2.MiniCluster, _ *Inputs) {
			mc.Spec.Archive.Path = "/state/a,b.tar"
		}, wantErr: "comma"},
		{name: "no name", mutate: func(mc *fluxv1alpha2.MiniCluster, _ *Inputs) { mc.ObjectMeta = metav1.ObjectMeta{} }, wantErr: "metadata.name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fixtureNamed(t, "root-size-1")
			in := f.in
			tt.mutate(f.mc, &in)
			_, err := Render(f.mc, in)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

// TestCurveCertNeverPrinted guards the rule that the CURVE secret key never reaches a log: no
// script prints the certificate or traces commands.
func TestCurveCertNeverPrinted(t *testing.T) {
	for _, f := range fixtures() {
		got, err := Render(f.mc, f.in)
		require.NoError(t, err)
		for key, script := range got {
			t.Run(f.name+"/"+key, func(t *testing.T) {
				for _, line := range strings.Split(script, "\n") {
					code := strings.TrimSpace(line)
					if strings.HasPrefix(code, "#") {
						continue
					}
					require.NotRegexp(t, `\bset\s+-[a-zA-Z]*x`, code, "tracing would print the certificate's path and more")
					require.NotRegexp(t, `\bset\s+-o\s+xtrace`, code)
					if strings.Contains(code, "curve") {
						require.NotRegexp(t, `\b(cat|head|tail|less|more|od|xxd|base64)\b`, code, "a line that touches the certificate must not print it")
					}
				}
			})
		}
	}
}

// recorded is the lead broker's initial program for job in the fixtures, whose view is mounted
// at /mnt/flux: the job, run by the wrapper that records its exit status.
func recorded(job ...string) []string {
	return recordingStatus("/mnt/flux", job)
}
