package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/internal/manager"
	"github.com/fluxfed/fluxfed/internal/manager/hubmanager"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

// envRunMain makes the test binary run main instead of the tests, so that a test can run
// fluxfed-manager as a process of its own and see its exit status.
const envRunMain = "FLUXFED_MANAGER_TEST_RUN_MAIN"

// The test that runs the operator shares one API server (testenv.Shared) with nothing else.
func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		main()
		return
	}
	testenv.Main(m)
}

func TestRunOutput(t *testing.T) {
	const usage = "\nRun 'fluxfed-manager --help' for usage"
	hubRefused := func(flag string) string {
		return "--" + flag + " is a flag of the hub, which fluxfed-manager does not run: the hub is `fluxfed manager --hub` " +
			"(/fluxfed in the same image)" + usage
	}
	tests := []struct {
		name       string
		args       []string
		wantErr    string
		wantStdout []string
	}{
		{name: "help", args: []string{"--help"}, wantStdout: []string{
			"Runs the MiniCluster operator: it reconciles the MiniClusters of its cluster.",
			"the hub is `fluxfed manager --hub`.\n",
			"\nUsage:\n  fluxfed-manager [flags]\n",
			"\nExamples:\n  fluxfed-manager --leader-elect\n",
			"\nFlags:\n", "      --leader-elect ", "  -h, --help ", "      --version ",
			"\nLogging flags:\n", "      --zap-log-level level ",
		}},
		{name: "-h", args: []string{"-h"}, wantStdout: []string{"\nUsage:\n  fluxfed-manager [flags]\n"}},
		{name: "version", args: []string{"--version"}, wantStdout: []string{"fluxfed-manager devel (go"}},
		{name: "--hub", args: []string{"--leader-elect", "--hub"}, wantErr: hubRefused("hub")},
		{name: "--hub=false is refused too", args: []string{"--hub=false"}, wantErr: hubRefused("hub")},
		{name: "another hub flag", args: []string{"--dial-allow=10.0.0.0/8", "--hub"}, wantErr: hubRefused("dial-allow")},
		{name: "unknown flag", args: []string{"--no-such-flag"}, wantErr: "unknown flag: --no-such-flag" + usage},
		{name: "unknown shorthand", args: []string{"-x"}, wantErr: `unknown shorthand flag: 'x' in -x` + usage},
		{name: "a flag's bad value", args: []string{"--kube-api-qps=many"}, wantErr: `invalid argument "many" for "--kube-api-qps" flag`},
		{name: "a negative window", args: []string{"--bulk-create-window=-1s"},
			wantErr: "--bulk-create-window is -1s: it must be 0 (each MiniCluster is rendered as soon as it is created) or a positive duration"},
		{name: "arguments", args: []string{"extra"}, wantErr: `unexpected arguments ["extra"]: only flags are taken` + usage},
		{name: "the word manager", args: []string{"manager", "--leader-elect"},
			wantErr: `unexpected arguments ["manager"]: only flags are taken (this binary is ` + "`fluxfed manager`" +
				` already: leave the word manager out)` + usage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), tt.args, &stdout, &stderr)
			if tt.wantErr != "" {
				require.Error(t, err)
				if strings.HasSuffix(tt.wantErr, usage) {
					require.Equal(t, tt.wantErr, err.Error())
				} else {
					require.ErrorContains(t, err, tt.wantErr)
				}
			} else {
				require.NoError(t, err)
			}
			for _, want := range tt.wantStdout {
				require.Contains(t, stdout.String(), want)
			}
			require.Empty(t, stderr.String(), "nothing is logged before the operator starts")
		})
	}
}

// TestAHubFlagExitsWithItsMessage runs fluxfed-manager as a process: a hub flag is an error on
// stderr, prefixed with the command's name, and exit status 1, as fluxfed's flag errors.
func TestAHubFlagExitsWithItsMessage(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), os.Args[0], "--hub", "--leader-elect")
	cmd.Env = append(os.Environ(), envRunMain+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "%v", err)
	require.Equal(t, 1, exit.ExitCode())
	require.Equal(t, "fluxfed-manager: --hub is a flag of the hub, which fluxfed-manager does not run: "+
		"the hub is `fluxfed manager --hub` (/fluxfed in the same image)\nRun 'fluxfed-manager --help' for usage\n", stderr.String())
	require.Empty(t, stdout.String())
}

// helpSections returns the flag names of each section of the help, by title.
func helpSections(t *testing.T) map[string][]string {
	t.Helper()
	var stdout bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"--help"}, &stdout, &bytes.Buffer{}))
	sections := map[string][]string{}
	section := ""
	for line := range strings.SplitSeq(stdout.String(), "\n") {
		switch {
		case strings.HasSuffix(line, ":") && !strings.HasPrefix(line, " "):
			section = line
		// A flag's line, not a wrapped description that starts with a flag's name.
		case strings.HasPrefix(line, "      --") || strings.HasPrefix(line, "  -h, --"):
			sections[section] = append(sections[section], strings.Fields(line[strings.Index(line, "--")+2:])[0])
		}
	}
	return sections
}

// TestHelpListsTheFlagsOfFluxfedManagerWithoutTheHub: the help lists exactly the general and
// logging flags of `fluxfed manager` (internal/manager), sorted, with --help and --version, and
// no flag of the hub.
func TestHelpListsTheFlagsOfFluxfedManagerWithoutTheHub(t *testing.T) {
	var o manager.Options
	names := func(bind func(*pflag.FlagSet)) []string {
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		bind(fs)
		var out []string
		fs.VisitAll(func(f *pflag.Flag) { out = append(out, f.Name) })
		slices.Sort(out)
		return out
	}
	general := append(names(o.BindGeneral), "help", "version")
	slices.Sort(general)
	sections := helpSections(t)
	require.Equal(t, general, sections["Flags:"])
	require.Equal(t, names(o.BindLogging), sections["Logging flags:"])
	require.Len(t, sections, 2, "%v", sections)

	var h hubmanager.Options
	hub := names(h.Bind)
	require.Equal(t, hub, hubFlags, "hubFlags are the flags hubmanager binds")
	for _, f := range hub {
		require.NotContains(t, general, f)
	}
}

// notLinked are the packages (and, ending in /, the trees) that fluxfed-manager must not link:
// the hub, with its offline admission (apiextensions-apiserver and CEL), and fluxfed's command
// line.
var notLinked = []string{
	"github.com/fluxfed/fluxfed/hub/",
	"github.com/fluxfed/fluxfed/cmd/fluxfed/",
	"github.com/spf13/cobra/",
	"github.com/google/cel-go/",
	"k8s.io/apiextensions-apiserver/pkg/apiserver/",
	"k8s.io/apiserver/",
}

// TestTheBinaryLinksNeitherTheHubNorTheCommandLine lists what the binary links (go list -deps).
func TestTheBinaryLinksNeitherTheHubNorTheCommandLine(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), "go", "list", "-deps", ".")
	out, err := cmd.Output()
	require.NoError(t, err, "go list -deps: %s", stderrOf(err))
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/fluxfed/fluxfed/member", "go list lists the operator")
	var linked []string
	for _, dep := range deps {
		for _, p := range notLinked {
			if dep == strings.TrimSuffix(p, "/") || strings.HasPrefix(dep, p) {
				linked = append(linked, dep)
			}
		}
	}
	require.Empty(t, linked, "fluxfed-manager links what only the hub or fluxfed's command line needs")
}

func stderrOf(err error) string {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(exit.Stderr)
	}
	return ""
}

// TestTheOperatorReconcilesServesProbesAndStops runs fluxfed-manager against a real API server:
// it comes up, answers its probes, renders a MiniCluster's Job, and exits cleanly when cancelled.
func TestTheOperatorReconcilesServesProbesAndStops(t *testing.T) {
	env := testenv.Shared(t)
	kubeconfig := env.WriteKubeconfig(t, t.TempDir())
	probeAddr := testenv.FreeAddr(t)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stderr testenv.LogBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--kubeconfig", kubeconfig, "--metrics-bind-address", "0",
			"--health-probe-bind-address", probeAddr}, &bytes.Buffer{}, &stderr)
	}()

	testenv.WaitReady(t, probeAddr, &stderr)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fluxfed-manager-"}}
	require.NoError(t, env.Client.Create(ctx, ns))
	mc := v1alpha2test.MiniCluster("alone").Namespace(ns.Name).Obj()
	require.NoError(t, env.Client.Create(ctx, mc))
	require.Eventually(t, func() bool {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "alone"}, &batchv1.Job{}) == nil
	}, 30*time.Second, 100*time.Millisecond, "no Job for MiniCluster alone; log:\n%s", &stderr)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("fluxfed-manager did not stop after cancel; log:\n%s", &stderr)
	}
	require.Contains(t, stderr.String(), "Starting manager")
	require.NotContains(t, stderr.String(), "Running as a hub")
}
