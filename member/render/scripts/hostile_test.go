package scripts

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
)

// These tests render the scripts with hostile values in every spec field that is data (paths,
// names, environment values, words of a command line) and run them, with a fake flux, to prove
// that nothing runs that the spec did not ask for: each value tries to create the canary file
// ($FLUXFED_CANARY), and must arrive where it belongs byte for byte. Fields that are code by
// design (commands.*, preCommand, command, commands.prefix) run, as asked, but cannot break out
// of their place; they have cases of their own in TestHostileSpecsRunSafely.

// canary is what hostile values run to show that they escaped.
const canary = `touch "$` + v1alpha2test.CanaryVar + `"`

// hostileValues are the seed corpus of FuzzScripts, run by every go test as a table of cases.
var hostileValues = []string{
	"",
	"plain",
	"$(" + canary + ")",
	"`" + canary + "`",
	"'; " + canary + "; '",
	`"; ` + canary + `; "`,
	`\'; ` + canary + "; #",
	"\n" + canary + "\n",
	"\r" + canary + "\r",
	"x\n#!/bin/sh\n" + canary,
	"$'\\x27'; " + canary,
	"${" + v1alpha2test.CanaryVar + ":?$(" + canary + ")}",
	"$((1+1))",
	"<(" + canary + ")",
	`>"$` + v1alpha2test.CanaryVar + `"`,
	"| " + canary,
	"&& " + canary,
	"; " + canary + " #",
	"FLUXFED_SCRIPT_EOF\n" + canary + "\nFLUXFED_SCRIPT_EOF",
	"# END VALUES\n" + canary,
	"\u202e" + canary,
	"\u2028" + canary,
	"*", "~", "!!", "-n", "--", "a b\tc", "x\\", "\\", "'", `"`, "$", "`", "a=b", "PATH=/nowhere",
	"\xff\xfe not UTF-8",
	"\x1b]0;title\x07",
	strings.Repeat("$("+canary+")`"+canary+"`'\"", 300),
}

// FuzzScripts puts one value in every data field of the spec at once, renders the scripts and
// runs them: go test -run='^$' -fuzz=FuzzScripts ./member/render/scripts.
func FuzzScripts(f *testing.F) {
	for _, v := range hostileValues {
		f.Add(v)
	}
	f.Add("a\x00b")
	f.Fuzz(runHostileValue)
}

// pathPart turns a hostile value into one file name under the sandbox: no '/' (so no '..'
// element can leave the sandbox), no ',' (refused by Render, tested separately), and short enough
// for a file name.
func pathPart(v string) string {
	v = strings.NewReplacer("/", "_", ",", "_").Replace(v)
	if len(v) > 100 {
		v = v[:100]
	}
	return "p" + v
}

// mountPart is pathPart without white space, which Render refuses in the mount path (tested
// separately).
func mountPart(v string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return '_'
		}
		return r
	}, pathPart(v))
}

func runHostileValue(t *testing.T, v string) {
	s := newSandbox(t, "hostile-[0-1]")
	mount := s.mount + "/" + mountPart(v)
	archive := filepath.Join(s.root, "state", pathPart(v))
	logs := filepath.Join(s.root, "out", pathPart(v))
	dump := filepath.Join(s.root, "dump")
	canaryFile := filepath.Join(s.root, "canary")

	words := func(field string) string {
		// A word list with an unterminated quote is refused by Render, naming the field; the
		// rest of the spec is still run without it.
		if _, err := splitWords(v); err != nil {
			mc := s.miniCluster("hostile", func(spec *fluxv1alpha2.MiniClusterSpec) {
				spec.Containers[0].Command = "true"
				if field == "optionFlags" {
					spec.Flux.OptionFlags = v
				} else {
					spec.Flux.SubmitCommand = v
				}
			})
			_, err := Render(mc, Inputs{Hostlist: "hostile-[0-1]", Quorum: 2})
			require.ErrorContains(t, err, "spec.flux."+field)
			return ""
		}
		return v
	}
	build := func(view bool) *fluxv1alpha2.MiniCluster {
		mc := s.miniCluster("hostile", func(spec *fluxv1alpha2.MiniClusterSpec) {
			spec.Size = 2
			spec.Flux.Container.MountPath = mount
			spec.Flux.Container.Disable = !view
			spec.Flux.Container.Name = v
			spec.Flux.Container.PythonPath = v
			spec.Flux.Environment = map[string]string{"FLUXFED_HOSTILE": v}
			spec.Flux.Wrap = v
			spec.Flux.ConnectTimeout = &v
			spec.Flux.OptionFlags = words("optionFlags")
			spec.Flux.SubmitCommand = words("submitCommand")
			spec.Flux.NoWaitSocket = true
			spec.Archive.Path = archive
			spec.Containers[0].Name = "lead"
			spec.Containers[0].RunFlux = true
			spec.Containers[0].Command = "true"
			spec.Containers[0].Logs = logs
			spec.Containers[0].Commands.Post = `printf '%s\0' "$FLUXFED_HOSTILE" "${PYTHONPATH-}" "$FLUX_OUTPUT_DIR" >"$FLUXFED_DUMP"`
			spec.Containers = append(spec.Containers, fluxv1alpha2.Container{Name: "side" + v, Command: "true"})
			spec.Services = []fluxv1alpha2.Container{{Name: "svc" + v, Command: "true"}}
		})
		mc.Name = "mc" + v
		return mc
	}

	in := Inputs{Hostlist: "hostile-[0-1]", Quorum: 2}
	// The provisioner of an image that brings its own Flux: the test has no /opt/view to copy.
	provisioned, err := Render(build(false), in)
	if strings.ContainsRune(v, 0) {
		require.ErrorContains(t, err, "NUL character")
		return
	}
	require.NoError(t, err)
	// The entrypoints with the view, so that its environment (PYTHONPATH) is set up too.
	got, err := Render(build(true), in)
	require.NoError(t, err)

	env := []string{
		v1alpha2test.CanaryVar + "=" + canaryFile,
		"FLUXFED_DUMP=" + dump,
		"JOB_COMPLETION_INDEX=0",
	}
	n := 0
	run := func(shell, key, script string) {
		t.Helper()
		n++
		file := filepath.Join(s.root, "scripts", strconv.Itoa(n)) // a key may be no file name
		require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
		require.NoError(t, os.WriteFile(file, []byte(script), 0o644))
		out, err := s.runFile(t, shell, file, env)
		require.NoFileExists(t, canaryFile, "%s ran a command from a hostile value %q: %s", key, v, out)
		require.NoError(t, err, "%s: %s", key, out)
	}
	run("sh", ProvisionerKey, s.provisioner(provisioned[ProvisionerKey]))
	for _, key := range slices.Sorted(maps.Keys(got)) {
		if key != ProvisionerKey {
			run("bash", key, got[key])
		}
	}

	// The values arrived as they are.
	data, err := os.ReadFile(dump)
	require.NoError(t, err)
	fields := strings.Split(string(data), "\x00")
	require.Len(t, fields, 4)
	require.Equal(t, v, fields[0], "flux.environment")
	if v != "" {
		require.Equal(t, v, fields[1], "flux.container.pythonPath")
	}
	require.Equal(t, logs, fields[2], "containers[].logs")

	calls := s.starts(t)
	require.Len(t, calls, 1)
	args := calls[0]
	want := []string{"--config-path=" + mount + "/view/etc/flux/config", "-Scontent.dump=" + archive}
	if v != "" {
		want = append(want, "--wrap="+v, "-Stbon.connect_timeout="+v)
	}
	for _, w := range want {
		require.Contains(t, args, w)
	}
	for _, field := range []string{"optionFlags", "submitCommand"} {
		if words, err := splitWords(v); err == nil && len(words) > 0 {
			require.True(t, containsRun(args, words), "%s: %q not passed as the words %q: %q", field, v, words, args)
		}
	}
}

// containsRun reports whether sub appears in list as consecutive elements.
func containsRun(list, sub []string) bool {
	for i := 0; i+len(sub) <= len(list); i++ {
		if slices.Equal(list[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// TestHostileSpecsRunSafely renders and runs every spec of v1alpha2test.HostileSpecs that the API
// server accepts: each must render to scripts that run without executing anything the spec did
// not ask for, or be refused by Render naming the field.
func TestHostileSpecsRunSafely(t *testing.T) {
	for _, tc := range v1alpha2test.HostileSpecs() {
		if !tc.Accepted() {
			continue
		}
		t.Run(tc.Name, func(t *testing.T) {
			s := newSandbox(t, "hostile-[0-1]")
			var decoded fluxv1alpha2.MiniClusterSpec
			require.NoError(t, yaml.UnmarshalStrict([]byte(tc.Spec), &decoded))
			build := func(view bool) *fluxv1alpha2.MiniCluster {
				return s.miniCluster("hostile", func(spec *fluxv1alpha2.MiniClusterSpec) {
					mount := spec.Flux.Container.MountPath // the sandbox's
					spec.Containers = decoded.Containers
					spec.Archive = decoded.Archive
					spec.Flux.Environment = decoded.Flux.Environment
					spec.Flux.Wrap = decoded.Flux.Wrap
					spec.Flux.Topology = decoded.Flux.Topology
					spec.Flux.OptionFlags = decoded.Flux.OptionFlags
					spec.Flux.SubmitCommand = decoded.Flux.SubmitCommand
					spec.Flux.Container.PythonPath = decoded.Flux.Container.PythonPath
					spec.Flux.Container.Disable = !view
					spec.Size = 2
					// Paths are taken into the sandbox.
					if p := decoded.Flux.Container.MountPath; p != "" {
						spec.Flux.Container.MountPath = s.root + p
					} else {
						spec.Flux.Container.MountPath = mount
					}
					if spec.Archive.Path != "" {
						spec.Archive.Path = s.root + spec.Archive.Path
					}
					for i := range spec.Containers {
						if spec.Containers[i].Logs != "" {
							spec.Containers[i].Logs = s.root + spec.Containers[i].Logs
						}
					}
				})
			}
			in := Inputs{Hostlist: "hostile-[0-1]", Quorum: 2}
			provisioned, err := Render(build(false), in)
			if tc.Reconcile != "" {
				require.ErrorContains(t, err, tc.Reconcile)
				return
			}
			require.NoError(t, err)
			got, err := Render(build(true), in)
			require.NoError(t, err)

			canaryFile := filepath.Join(s.root, "canary")
			env := []string{v1alpha2test.CanaryVar + "=" + canaryFile, "JOB_COMPLETION_INDEX=0"}
			keys := []string{ProvisionerKey} // first, as the init container
			for _, key := range slices.Sorted(maps.Keys(got)) {
				if key != ProvisionerKey {
					keys = append(keys, key)
				}
			}
			for _, key := range keys {
				shell, script := "bash", got[key]
				if key == ProvisionerKey {
					shell, script = "sh", s.provisioner(provisioned[key])
				}
				file := filepath.Join(s.root, "script.sh")
				require.NoError(t, os.WriteFile(file, []byte(script), 0o644))
				out, err := s.runFile(t, shell, file, env)
				require.NoFileExists(t, canaryFile, "%s ran a command from a hostile value: %s", key, out)
				if decoded.Containers[0].Commands.Prefix == "" {
					// A prefix whose words name no program makes the broker fail to start,
					// which is what the spec asked for.
					require.NoError(t, err, "%s: %s", key, out)
				}
			}
			if script := decoded.Containers[0].Commands.Script; script != "" {
				// The script is written as asked, whatever lines it holds.
				written, err := os.ReadFile(filepath.Join(build(true).Spec.Flux.Container.MountPath, "fluxfed/job-script"))
				require.NoError(t, err)
				// The here-document ends the file with a newline of its own.
				require.Equal(t, strings.ReplaceAll(script, "$"+v1alpha2test.CanaryVar, canaryFile)+"\n", string(written))
			}
		})
	}
}
