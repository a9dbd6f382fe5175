// Package firstburst follows a new user from nothing to a burst with every rank online, with
// the three commands the README gives, run as a user runs them: the fluxfed and kubectl
// binaries against the local clusters' kubeconfig.
package firstburst

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/fleet"
	"github.com/fluxfed/fluxfed/e2e/netguard"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(netguard.Check(m.Run())) }

// TestFromZeroToABurstInThreeCommands: fluxfed installed on the hub in hub mode and on the
// member (the fleet applies deploy/hub and deploy/default as `kubectl apply --server-side -k`
// does, and runs each manager as a process with the Deployment's permissions: command 1), then
// `fluxfed member add` (command 2) and `kubectl apply` of a root (command 3): every rank of the
// federation online in the root's Flux instance, as `fluxfed status` shows it.
func TestFromZeroToABurstInThreeCommands(t *testing.T) {
	f := fleet.StartT(t, fleet.Options{Members: []string{"member-a"}, Unregistered: true})
	ctx := context.Background()
	kubectl := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	require.FileExists(t, kubectl, "make test builds kubectl with the other Kubernetes binaries")
	dir := t.TempDir()
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+f.Env.Kubeconfig)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		err := cmd.Run()
		t.Logf("$ %s %v (%v)\n%s", filepath.Base(name), args, time.Since(start).Round(10*time.Millisecond), out.String())
		require.NoError(t, err, out.String())
		return out.String()
	}
	// The user's namespace on the hub.
	require.NoError(t, f.Clients["hub"].Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "research"}}))

	out := run(f.Binary, "member", "add", "member-a", "--member-context", "member-a", "--context", "hub", "--lend", "research")
	require.Contains(t, out, "member-a: Ready after")
	require.Contains(t, out, "kubectl --context hub apply -n research -f")

	// examples/first-burst.yaml: two brokers on the hub, three on member-a.
	file := filepath.Join(testenv.RepoRoot(), "examples", "first-burst.yaml")
	start := time.Now()
	run(kubectl, "--context", "hub", "apply", "-n", "research", "-f", file)

	// A stand-in Flux answers in the lead broker's container (kwok's pods run nothing); it sees
	// a rank online when its broker pod runs.
	mc := &fluxv1alpha2.MiniCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "research", Name: "first-burst"}}
	instance, err := f.StartFlux(ctx, mc, filepath.Join(dir, "flux"))
	require.NoError(t, err)
	t.Cleanup(instance.Stop)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, f.Clients["hub"].Get(ctx, client.ObjectKeyFromObject(mc), mc))
		require.NotNil(c, mc.Status.Flux)
		require.Equal(c, int32(5), mc.Status.Flux.Online)
		require.Len(c, mc.Status.Bursts, 1)
		require.Equal(c, fluxv1alpha2.BurstJoined, mc.Status.Bursts[0].Phase, mc.Status.Bursts[0].Message)
	}, 3*time.Minute, 500*time.Millisecond)
	t.Logf("kubectl apply to every rank online: %v", time.Since(start).Round(100*time.Millisecond))

	status := run(f.Binary, "status", "first-burst", "-n", "research", "--context", "hub")
	require.Contains(t, status, "Flux:         run, 5/5 ranks online\n")
	require.Contains(t, status, "3 of 3 brokers ready and online in the root's Flux instance")
	for _, want := range [][]string{
		{"burst-a", "member-a", "research", "3", "3", "3", "Joined", "3", "0", "0"},
		{"4", "member-a", "research/burst-a-2-"},
	} {
		require.True(t, hasRow(status, want), "no row %v in\n%s", want, status)
	}
	require.NotContains(t, status, "Problems:")
}

// hasRow says whether a line of a table in text starts with the cells want (the last one a
// prefix of its cell).
func hasRow(text string, want []string) bool {
	for _, line := range strings.Split(text, "\n") {
		cells := strings.Fields(line)
		if len(cells) < len(want) {
			continue
		}
		n := len(want) - 1
		if slices.Equal(cells[:n], want[:n]) && strings.HasPrefix(cells[n], want[n]) {
			return true
		}
	}
	return false
}
