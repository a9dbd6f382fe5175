package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

func TestRunDispatch(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantErr    string
		wantStdout []string
	}{
		{name: "no command prints help", args: nil, wantStdout: []string{"Commands:", "manager", "status", "completion"}},
		{name: "help", args: []string{"help"}, wantStdout: []string{"manager"}},
		{name: "unknown command", args: []string{"frobnicate"}, wantErr: `unknown command "frobnicate"` + "\nRun 'fluxfed --help' for usage"},
		{name: "misspelt command", args: []string{"mangaer"}, wantErr: `unknown command "mangaer" (did you mean manager?)`},
		{name: "unknown flag", args: []string{"--frobnicate"}, wantErr: "unknown flag: --frobnicate\nRun 'fluxfed --help' for usage"},
		{name: "version", args: []string{"version"}, wantStdout: []string{"fluxfed devel (go"}},
		{name: "--version", args: []string{"--version"}, wantStdout: []string{"fluxfed devel (go"}},
		{name: "version help", args: []string{"version", "--help"}, wantStdout: []string{"Usage:\n  fluxfed version [flags]"}},
		{name: "version rejects arguments", args: []string{"version", "extra"}, wantErr: `version takes no arguments, got ["extra"]`},
		{name: "manager rejects arguments", args: []string{"manager", "extra"}, wantErr: "manager takes no arguments"},
		{name: "manager rejects unknown flags", args: []string{"manager", "--no-such-flag"},
			wantErr: "unknown flag: --no-such-flag\nRun 'fluxfed manager --help' for usage"},
		{name: "manager help groups flags", args: []string{"manager", "--help"}, wantStdout: []string{
			"\nFlags:\n", "      --leader-elect ",
			"\nHub flags (used with --hub):\n", "      --dial-allow string ",
			"\nLogging flags:\n", "      --zap-log-level level ",
		}},
		{name: "completion", args: []string{"completion", "bash"}, wantStdout: []string{"bash completion"}},
		{name: "member lists its commands", args: []string{"member"}, wantStdout: []string{"add ", "list ", "remove "}},
		{name: "member add needs a name", args: []string{"member", "add"}, wantErr: "add takes the name of one member, got 0 arguments"},
		{name: "member add needs the member's context", args: []string{"member", "add", "member-a"},
			wantErr: "--member-context is required: the kubeconfig context of the member to register\nRun 'fluxfed member add --help' for usage"},
		{name: "member add names a missing kubeconfig", args: []string{"member", "add", "member-a", "--member-context", "nowhere", "--kubeconfig", "testdata/no-such-kubeconfig"},
			wantErr: `--context: the kubeconfig testdata/no-such-kubeconfig cannot be read: no such file or directory`},
		{name: "member remove needs the member's context or --force", args: []string{"member", "remove", "member-a"},
			wantErr: "--member-context is required (or --force, to remove the member from the hub only)"},
		{name: "member list takes no arguments", args: []string{"member", "list", "x"}, wantErr: `list takes no arguments, got ["x"]`},
		{name: "member has no such command", args: []string{"member", "join"}, wantErr: `unknown command "join"`},
		{name: "member list knows its formats", args: []string{"member", "list", "-o", "name"},
			wantErr: "--output \"name\" is not one of wide, yaml, json\nRun 'fluxfed member list --help' for usage"},
		{name: "member add prints objects only in a dry run", args: []string{"member", "add", "member-a", "--member-context", "m", "-o", "yaml"},
			wantErr: "printing the objects (yaml or json) is for a dry run: add --dry-run"},
		{name: "member probe needs endpoints", args: []string{"member", "probe"}, wantErr: "probe takes one or more HOST:PORT endpoints"},
		{name: "member probe checks endpoints", args: []string{"member", "probe", "127.0.0.1"}, wantErr: `"127.0.0.1" is not HOST:PORT`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, &stdout, &stderr)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
			}
			for _, want := range tt.wantStdout {
				require.Contains(t, stdout.String(), want)
			}
		})
	}
}

// TestManagerHelpGroupsFlags checks that every flag of manager is listed once, in its section,
// sorted by name within each: a hub flag among the general ones would be easy to miss.
func TestManagerHelpGroupsFlags(t *testing.T) {
	var stdout bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"manager", "--help"}, &stdout, &bytes.Buffer{}))
	sections := map[string][]string{}
	section := ""
	for _, line := range strings.Split(stdout.String(), "\n") {
		switch {
		case strings.HasSuffix(line, ":") && !strings.HasPrefix(line, " "):
			section = line
		case strings.HasPrefix(strings.TrimLeft(line, " "), "--") || strings.HasPrefix(strings.TrimLeft(line, " "), "-h, --"):
			name := strings.Fields(line[strings.Index(line, "--")+2:])[0]
			sections[section] = append(sections[section], name)
		}
	}
	for s, names := range sections {
		require.True(t, slices.IsSorted(names), "%s %v", s, names)
	}
	require.Subset(t, sections["Flags:"], []string{"help", "kubeconfig", "leader-elect", "metrics-bind-address"})
	require.Equal(t, []string{"cleanup-timeout", "dial-allow", "flux-interval", "flux-interval-max", "flux-timeout", "gateway-bind-address", "gateway-cert-dir", "gateway-service", "hub", "hub-name",
		"join-timeout", "lead-address-allow", "lead-probe-interval", "member-api-burst", "member-api-qps", "member-connect-timeout", "member-health-interval",
		"member-health-timeout", "member-timeout", "members-namespace", "orphan-sweep-interval", "skip-member-namespaces"},
		sections["Hub flags (used with --hub):"])
	require.Equal(t, []string{"zap-devel", "zap-encoder", "zap-log-level", "zap-stacktrace-level", "zap-time-encoding"},
		sections["Logging flags:"])
	require.NotContains(t, stdout.String(), " -leader-elect", "every long flag is spelt with two dashes")
}

// TestManagerFlagsParse checks the flags as deploy/ and e2e/fleet spell them.
func TestManagerFlagsParse(t *testing.T) {
	cmd := newManagerCommand()
	require.NoError(t, cmd.ParseFlags([]string{"--leader-elect", "--metrics-bind-address=0", "--hub", "--hub-name=h",
		"--dial-allow=127.0.0.0/8", "--flux-interval=1s", "--flux-interval-max=4s", "--zap-devel", "--zap-log-level", "debug"}))
	for name, want := range map[string]string{"leader-elect": "true", "metrics-bind-address": "0", "hub": "true", "hub-name": "h",
		"dial-allow": "127.0.0.0/8", "flux-interval": "1s", "flux-interval-max": "4s", "zap-devel": "true", "zap-log-level": "debug"} {
		require.Equal(t, want, cmd.Flags().Lookup(name).Value.String(), name)
	}
	require.NoError(t, newManagerCommand().ParseFlags([]string{"--leader-elect=false"}))
}

func TestBuildVersionPrefersStamp(t *testing.T) {
	old := version
	t.Cleanup(func() { version = old })
	version = "v1.2.3"
	require.Equal(t, "v1.2.3", buildVersion())
}

// TestManagerServesProbesAndStops runs `fluxfed manager` against a real API server: it must come
// up with the MiniCluster types registered, answer its probes, and exit cleanly when cancelled.
func TestManagerServesProbesAndStops(t *testing.T) {
	env := testenv.Shared(t)
	kubeconfig := env.WriteKubeconfig(t, t.TempDir())
	probeAddr := testenv.FreeAddr(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr testenv.LogBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"manager", "--kubeconfig", kubeconfig, "--metrics-bind-address", "0",
			"--health-probe-bind-address", probeAddr}, &bytes.Buffer{}, &stderr)
	}()

	testenv.WaitReady(t, probeAddr, &stderr)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("manager did not stop after cancel; log:\n%s", &stderr)
	}
	require.Contains(t, stderr.String(), "Starting manager")
}

func TestManagerFailsOnUnreadableKubeconfig(t *testing.T) {
	err := run(context.Background(), []string{"manager", "--kubeconfig", filepath.Join(t.TempDir(), "missing")}, &bytes.Buffer{}, &bytes.Buffer{})
	require.ErrorContains(t, err, "loading kubeconfig")
}

// envRunMain makes the test binary run fluxfed's main instead of the tests, so that a test can
// run fluxfed as a process of its own.
const envRunMain = "FLUXFED_TEST_RUN_MAIN"

// The tests that need an API server but none of their own (the manager reconciles nothing
// there, or refuses its flags) share one (testenv.Shared); those that run a hub and a member
// start theirs.
func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		main()
		return
	}
	testenv.Main(m)
}

// TestHubManagerBurstsARoot runs `fluxfed manager --hub` against a hub API server with one
// member registered: a root's burst reaches the member, labelled with the hub's identity, which
// defaults to the UID of the hub's kube-system namespace.
func TestHubManagerBurstsARoot(t *testing.T) {
	envs := testenv.StartN(t, 2)
	hubEnv, memberEnv := envs[0], envs[1]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, hubEnv.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fluxfed-system"}}))
	kc, err := memberEnv.Kubeconfig()
	require.NoError(t, err)
	require.NoError(t, hubEnv.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "member-a-kubeconfig", Namespace: "fluxfed-system"},
		Data:       map[string][]byte{"kubeconfig": kc},
	}))
	require.NoError(t, hubEnv.Client.Create(ctx, &fedv1alpha1.MemberCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "member-a"},
		Spec: fedv1alpha1.MemberClusterSpec{KubeconfigSecretRef: fedv1alpha1.KubeconfigSecretRef{Name: "member-a-kubeconfig"},
			Namespaces: fedv1alpha1.MemberNamespaces{Allow: fedv1alpha1.NamespaceAllowAny, Create: true}},
	}))

	// A process of its own, as it runs for real: controller names are unique per process, and
	// another test of this package runs a manager too.
	var stderr testenv.LogBuffer
	cmd := exec.Command(os.Args[0], "manager", "--hub", "--kubeconfig", hubEnv.WriteKubeconfig(t, t.TempDir()),
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--dial-allow", "127.0.0.0/8")
	cmd.Env = append(os.Environ(), envRunMain+"=1")
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := false
	t.Cleanup(func() {
		if !exited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})

	root := &fluxv1alpha2.MiniCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: "default"},
		Spec: fluxv1alpha2.MiniClusterSpec{
			Size:       2,
			Containers: []fluxv1alpha2.Container{{Image: "rockylinux:9", Command: "hostname"}},
			Flux: fluxv1alpha2.FluxSpec{Bursting: fluxv1alpha2.Bursting{
				Expose:   &fluxv1alpha2.Expose{Address: "127.0.0.7"},
				Clusters: []fluxv1alpha2.Burst{{Name: "burst", Cluster: "member-a", Size: 3}},
			}},
		},
	}
	require.NoError(t, hubEnv.Client.Create(ctx, root))
	system := &corev1.Namespace{}
	require.NoError(t, hubEnv.Client.Get(ctx, client.ObjectKey{Name: "kube-system"}, system))
	child := &fluxv1alpha2.MiniCluster{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, memberEnv.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "burst"}, child))
	}, 30*time.Second, 100*time.Millisecond, "the child never reached the member; log:\n%s", &stderr)
	require.Equal(t, string(system.UID), child.Labels[fluxv1alpha2.LabelOriginHub])
	require.Equal(t, "127.0.0.7", child.Spec.Flux.Bursting.LeadBroker.Address)
	require.Contains(t, stderr.String(), "Running as a hub")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	exited = true
	require.NoError(t, cmd.Wait(), "the manager exits cleanly on SIGTERM; log:\n%s", &stderr)
}

func TestHubManagerRefusesBadFlags(t *testing.T) {
	env := testenv.Shared(t)
	err := run(context.Background(), []string{"manager", "--hub", "--hub-name", "not a label", "--kubeconfig", env.WriteKubeconfig(t, t.TempDir())},
		&bytes.Buffer{}, &bytes.Buffer{})
	require.ErrorContains(t, err, `--hub-name "not a label" must be a non-empty label value`)

	err = run(context.Background(), []string{"manager", "--hub", "--hub-name", "h", "--dial-allow", "127.0.0.1", "--kubeconfig", env.WriteKubeconfig(t, t.TempDir())},
		&bytes.Buffer{}, &bytes.Buffer{})
	require.ErrorContains(t, err, `--dial-allow: "127.0.0.1" is not a CIDR such as 127.0.0.0/8`)

	err = run(context.Background(), []string{"manager", "--hub", "--hub-name", "h", "--flux-interval", "1m", "--flux-interval-max", "10s", "--kubeconfig", env.WriteKubeconfig(t, t.TempDir())},
		&bytes.Buffer{}, &bytes.Buffer{})
	require.ErrorContains(t, err, `--flux-interval-max (10s) must be at least --flux-interval (1m0s)`)

	err = run(context.Background(), []string{"manager", "--hub", "--hub-name", "h", "--join-timeout", "-1s", "--kubeconfig", env.WriteKubeconfig(t, t.TempDir())},
		&bytes.Buffer{}, &bytes.Buffer{})
	require.ErrorContains(t, err, `the join timeout must be positive, got -1s`)
}

// TestMemberContexts checks how `fluxfed member` names contexts: --context is the hub's, as in
// `fluxfed status`, --hub-context its other name; a context the kubeconfig lacks is one line.
func TestMemberContexts(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: hub, context: {cluster: c, user: u}}, {name: member-a, context: {cluster: c, user: u}}]
current-context: hub
`), 0o600))
	member := func(args ...string) error {
		return run(context.Background(), append(append([]string{"member"}, args...), "--kubeconfig", kubeconfig), &bytes.Buffer{}, &bytes.Buffer{})
	}
	err := member("add", "member-a", "--member-context", "nowhere")
	require.EqualError(t, err, `--member-context: the kubeconfig `+kubeconfig+` has no context "nowhere" (it has hub, member-a)`)
	err = member("list", "--context", "hub2")
	require.EqualError(t, err, `--context: the kubeconfig `+kubeconfig+` has no context "hub2" (it has hub, member-a)`)
	err = member("list", "--hub-context", "hub2")
	require.EqualError(t, err, `--context: the kubeconfig `+kubeconfig+` has no context "hub2" (it has hub, member-a)`, "--hub-context is --context")
	err = member("list", "--context", "hub", "--hub-context", "member-a")
	require.EqualError(t, err, `--context "hub" and --hub-context "member-a" name two hubs: give one (--hub-context is another name of --context)`)
	start := time.Now()
	err = member("add", "member-a", "--member-context", "member-a", "--hub-context", "hub")
	require.EqualError(t, err, `the hub context "hub" (--context, server https://127.0.0.1:1) cannot be reached: dial tcp 127.0.0.1:1: connect: connection refused: `+
		`is the context right, and does the cluster run?`)
	require.Less(t, time.Since(start), 5*time.Second)

	var stdout bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"member", "add", "--help"}, &stdout, &bytes.Buffer{}))
	require.Contains(t, stdout.String(), "      --context string ")
	require.NotContains(t, stdout.String(), "--hub-context", "the other name is not advertised")
	for _, flag := range []string{"--dry-run", "--check-endpoint strings", "--skip-data-path-check", "-o, --output string"} {
		require.Contains(t, stdout.String(), flag)
	}
}
