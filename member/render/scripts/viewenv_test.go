package scripts

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// These tests run the entrypoints against a stand-in of a flux view image laid out as spack
// lays out the flux-view images (converged-computing/flux-views): every package in a prefix of
// its own under /opt/software, and the view at /opt/view made of real directories and one
// symbolic link per file of every prefix. flux-core finds nothing of another prefix unless told
// where: the entrypoint must tell it where Fluxion is.

// Files of the stand-in packages, by prefix name.
var (
	fluxCoreFiles = []string{
		"bin/flux",
		"etc/flux/rc1",
		"etc/flux/rc3",
		"etc/flux/rc1.d/01-enclosing-instance",
		"etc/flux/rc1.d/02-cron",
		"etc/flux/system/cron.d/kvs-backup.cron",
		"lib/flux/modules/kvs.so",
		"lib/flux/modules/sched-simple.so",
		"libexec/flux/cmd/flux-resource.py",
		"share/flux/modprobe/modprobe.toml",
	}
	fluxSchedFiles = []string{
		"etc/flux/rc1.d/01-sched-fluxion",
		"etc/flux/rc3.d/01-sched-fluxion",
		"etc/flux/modprobe/modprobe.d/fluxion.toml",
		"etc/flux/modprobe/rc1.d/fluxion.py",
		"lib/flux/modules/sched-fluxion-resource.so",
		"lib/flux/modules/sched-fluxion-qmanager.so",
		"libexec/flux/cmd/flux-ion-R.py",
	}
	// An older Fluxion, built where modules went to lib/flux/modules/sched and lib64.
	fluxSchedOlderFiles = []string{
		"etc/flux/rc1.d/01-sched-fluxion",
		"etc/flux/rc3.d/01-sched-fluxion",
		"lib/flux/modules/sched/sched-fluxion-resource.so",
		"lib64/flux/modules/sched-fluxion-qmanager.so",
	}
)

// spackView installs each package's files in the sandbox's software/<name> (standing in for
// /opt/software) and links every file into the stand-in image's view, as spack does.
func (s sandbox) spackView(t *testing.T, packages map[string][]string) {
	t.Helper()
	for name, files := range packages {
		for _, f := range files {
			file := filepath.Join(s.root, "software", name, f)
			require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
			require.NoError(t, os.WriteFile(file, []byte("#!/bin/sh\n"), 0o755))
			link := filepath.Join(s.imageView(), f)
			require.NoError(t, os.MkdirAll(filepath.Dir(link), 0o755))
			require.NoError(t, os.Symlink(file, link))
		}
	}
}

// readEnv reads what the fake flux start wrote with $FAKE_FLUX_ENV.
func readEnv(t *testing.T, file string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	env := map[string]string{}
	for _, kv := range strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00") {
		k, v, ok := strings.Cut(kv, "=")
		require.True(t, ok, "%q", kv)
		env[k] = v
	}
	return env
}

// fluxVars are the variables through which flux-core finds files of other prefixes.
var fluxVars = []string{"FLUX_RC_EXTRA", "FLUX_MODPROBE_PATH_APPEND", "FLUX_MODULE_PATH_PREPEND", "FLUX_EXEC_PATH_PREPEND"}

func TestViewEnvironment(t *testing.T) {
	tests := []struct {
		name     string
		packages map[string][]string
		mutate   func(*fluxv1alpha2.MiniClusterSpec)
		// want holds the values of fluxVars in the container that runs Flux, __SW__
		// standing for the real path of the stand-in /opt/software; a variable not in want
		// must not be set. side, when set, is what the other container holds instead.
		want, side map[string]string
	}{
		{
			name:     "a view without Fluxion sets nothing",
			packages: map[string][]string{"flux-core": fluxCoreFiles},
			want:     map[string]string{},
		},
		{
			name:     "a view with Fluxion points flux-core at Fluxion's prefix",
			packages: map[string][]string{"flux-core": fluxCoreFiles, "flux-sched": fluxSchedFiles},
			want: map[string]string{
				"FLUX_RC_EXTRA":             "__SW__/flux-sched/etc/flux",
				"FLUX_MODPROBE_PATH_APPEND": "__SW__/flux-sched/etc/flux/modprobe",
				"FLUX_MODULE_PATH_PREPEND":  "__SW__/flux-sched/lib/flux/modules",
				"FLUX_EXEC_PATH_PREPEND":    "__SW__/flux-sched/libexec/flux/cmd",
			},
		},
		{
			name:     "the same under logging.strict",
			packages: map[string][]string{"flux-core": fluxCoreFiles, "flux-sched": fluxSchedFiles},
			mutate:   func(spec *fluxv1alpha2.MiniClusterSpec) { spec.Logging.Strict = true },
			want: map[string]string{
				"FLUX_RC_EXTRA":             "__SW__/flux-sched/etc/flux",
				"FLUX_MODPROBE_PATH_APPEND": "__SW__/flux-sched/etc/flux/modprobe",
				"FLUX_MODULE_PATH_PREPEND":  "__SW__/flux-sched/lib/flux/modules",
				"FLUX_EXEC_PATH_PREPEND":    "__SW__/flux-sched/libexec/flux/cmd",
			},
		},
		{
			name:     "an older Fluxion with modules in lib/flux/modules/sched and lib64",
			packages: map[string][]string{"flux-core": fluxCoreFiles, "flux-sched": fluxSchedOlderFiles},
			want: map[string]string{
				"FLUX_RC_EXTRA":            "__SW__/flux-sched/etc/flux",
				"FLUX_MODULE_PATH_PREPEND": "__SW__/flux-sched/lib/flux/modules/sched:__SW__/flux-sched/lib64/flux/modules",
			},
		},
		{
			name:     "values from flux.environment come first",
			packages: map[string][]string{"flux-core": fluxCoreFiles, "flux-sched": fluxSchedFiles},
			mutate: func(spec *fluxv1alpha2.MiniClusterSpec) {
				spec.Flux.Environment = map[string]string{
					"FLUX_RC_EXTRA":            "/site/etc/flux",
					"FLUX_MODULE_PATH_PREPEND": "/site/modules",
				}
			},
			want: map[string]string{
				"FLUX_RC_EXTRA":             "/site/etc/flux:__SW__/flux-sched/etc/flux",
				"FLUX_MODPROBE_PATH_APPEND": "__SW__/flux-sched/etc/flux/modprobe",
				"FLUX_MODULE_PATH_PREPEND":  "/site/modules:__SW__/flux-sched/lib/flux/modules",
				"FLUX_EXEC_PATH_PREPEND":    "__SW__/flux-sched/libexec/flux/cmd",
			},
			// flux.environment is the environment of the Flux processes only.
			side: map[string]string{
				"FLUX_RC_EXTRA":             "__SW__/flux-sched/etc/flux",
				"FLUX_MODPROBE_PATH_APPEND": "__SW__/flux-sched/etc/flux/modprobe",
				"FLUX_MODULE_PATH_PREPEND":  "__SW__/flux-sched/lib/flux/modules",
				"FLUX_EXEC_PATH_PREPEND":    "__SW__/flux-sched/libexec/flux/cmd",
			},
		},
		{
			name:     "scheduler.simple finds Fluxion's modules but does not load it",
			packages: map[string][]string{"flux-core": fluxCoreFiles, "flux-sched": fluxSchedFiles},
			mutate:   func(spec *fluxv1alpha2.MiniClusterSpec) { spec.Flux.Scheduler.Simple = true },
			want: map[string]string{
				"FLUX_MODULE_PATH_PREPEND": "__SW__/flux-sched/lib/flux/modules",
				"FLUX_EXEC_PATH_PREPEND":   "__SW__/flux-sched/libexec/flux/cmd",
			},
		},
		{
			name:     "the image's own Flux (container.disable) gets nothing",
			packages: map[string][]string{"flux-core": fluxCoreFiles, "flux-sched": fluxSchedFiles},
			mutate:   func(spec *fluxv1alpha2.MiniClusterSpec) { spec.Flux.Container.Disable = true },
			want:     map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSandbox(t, "view-0")
			s.spackView(t, tt.packages)
			mc := s.miniCluster("view", func(spec *fluxv1alpha2.MiniClusterSpec) {
				spec.Flux.Container.Disable = false
				spec.Flux.NoWaitSocket = true
				spec.Interactive = true
				// A container next to the one that runs Flux sets up the same environment.
				spec.Containers[0].RunFlux = true
				spec.Containers = append(spec.Containers, fluxv1alpha2.Container{
					Name:    "side",
					Image:   "app",
					Command: `for n in $(compgen -e); do printf '%s=%s\0' "$n" "${!n}"; done >"$FLUXFED_SIDE_ENV"`,
				})
				if tt.mutate != nil {
					tt.mutate(spec)
				}
			})
			got, err := Render(mc, Inputs{Hostlist: "view-0", Quorum: 1})
			require.NoError(t, err)
			s.provision(t, got[ProvisionerKey])
			if mc.Spec.Flux.Container.Disable {
				// The volume holds what a view would, to show that it is not looked at.
				require.NoError(t, os.CopyFS(filepath.Join(s.mount, "view"), os.DirFS(s.imageView())))
			}

			software, err := filepath.EvalSymlinks(filepath.Join(s.root, "software"))
			require.NoError(t, err)
			expand := func(m map[string]string) map[string]string {
				out := map[string]string{}
				for k, v := range m {
					out[k] = strings.ReplaceAll(v, "__SW__", software)
				}
				return out
			}
			sideWant := tt.side
			if sideWant == nil {
				sideWant = tt.want
			}
			lead := filepath.Join(s.root, "lead.env")
			side := filepath.Join(s.root, "side.env")
			env := []string{"JOB_COMPLETION_INDEX=0", "FAKE_FLUX_ENV=" + lead, "FLUXFED_SIDE_ENV=" + side}
			for _, c := range []struct {
				key, file string
				want      map[string]string
			}{
				{"container-view.sh", lead, tt.want},
				{"container-side.sh", side, sideWant},
			} {
				out, err := s.run(t, "bash", got[c.key], env)
				require.NoError(t, err, "%s: %s", c.key, out)
				vars := readEnv(t, c.file)
				have := map[string]string{}
				for _, name := range fluxVars {
					if v, ok := vars[name]; ok {
						have[name] = v
					}
				}
				require.Equal(t, expand(c.want), have, "%s: %s", c.key, out)
			}
		})
	}
}

// TestViewEnvironmentPathsExist checks the directories the entrypoint gives flux-core in the
// view with Fluxion: each exists and is what flux-core expects there (rc1.d under FLUX_RC_EXTRA,
// modprobe.d under FLUX_MODPROBE_PATH_APPEND, modules and commands).
func TestViewEnvironmentPathsExist(t *testing.T) {
	s := newSandbox(t, "view-0")
	s.spackView(t, map[string][]string{"flux-core": fluxCoreFiles, "flux-sched": fluxSchedFiles})
	mc := s.miniCluster("view", func(spec *fluxv1alpha2.MiniClusterSpec) {
		spec.Flux.Container.Disable = false
		spec.Interactive = true
	})
	got, err := Render(mc, Inputs{Hostlist: "view-0", Quorum: 1})
	require.NoError(t, err)
	s.provision(t, got[ProvisionerKey])
	file := filepath.Join(s.root, "lead.env")
	out, err := s.run(t, "bash", got["container-view.sh"], []string{"JOB_COMPLETION_INDEX=0", "FAKE_FLUX_ENV=" + file})
	require.NoError(t, err, out)
	env := readEnv(t, file)

	has := func(dir, pattern string) {
		t.Helper()
		found, err := fs.Glob(os.DirFS(dir), pattern)
		require.NoError(t, err)
		require.NotEmpty(t, found, "%s/%s", dir, pattern)
	}
	has(env["FLUX_RC_EXTRA"], "rc1.d/*")
	has(env["FLUX_RC_EXTRA"], "rc3.d/*")
	has(env["FLUX_MODPROBE_PATH_APPEND"], "modprobe.d/*.toml")
	has(env["FLUX_MODULE_PATH_PREPEND"], "sched-fluxion-*.so")
	has(env["FLUX_EXEC_PATH_PREPEND"], "flux-ion-*")
	// flux-core's own rc1.d runs from its prefix: listing it again would run its scripts twice.
	for _, dir := range strings.Split(env["FLUX_RC_EXTRA"], ":") {
		require.NoFileExists(t, filepath.Join(dir, "rc1.d/01-enclosing-instance"))
	}

	// A user's shell that sources flux-view.sh (to run flux proxy) gets the same directories,
	// after its own.
	shell := `FLUX_EXEC_PATH_PREPEND=/mine; . "$1"; for n in ` + strings.Join(fluxVars, " ") + `; do printf '%s=%s\0' "$n" "${!n}"; done >"$2"`
	file = filepath.Join(s.root, "shell.env")
	out, err = s.exec(t, nil, "bash", "-c", shell, "user", filepath.Join(s.mount, "flux-view.sh"), file)
	require.NoError(t, err, out)
	user := readEnv(t, file)
	for _, name := range fluxVars {
		want := env[name]
		if name == "FLUX_EXEC_PATH_PREPEND" {
			want = "/mine:" + want
		}
		require.Equal(t, want, user[name], name)
	}
}
