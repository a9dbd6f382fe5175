package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fluxfed/fluxfed/e2e/clusters"
	"github.com/fluxfed/fluxfed/e2e/netguard"
)

func TestMain(m *testing.M) { netguard.Main(m) }

func TestUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	require.ErrorContains(t, run(context.Background(), nil, &out, &errOut), "no command")
	require.Contains(t, errOut.String(), "usage: clusters up|status|down")
	require.ErrorContains(t, run(context.Background(), []string{"sideways"}, &out, &errOut), `unknown command "sideways"`)
	require.ErrorContains(t, run(context.Background(), []string{"up", "extra"}, &out, &errOut), "unexpected arguments")
}

func TestNothingRecorded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "none")
	for _, command := range []string{"status", "down"} {
		var out bytes.Buffer
		require.NoError(t, run(context.Background(), []string{command, "-dir", dir}, &out, &out))
		require.Contains(t, out.String(), "no clusters recorded in "+dir)
	}
}

// TestUpStatusDown runs the commands as `make clusters-up` and `make clusters-down` do: up leaves
// the cluster running, status finds it, down stops every process and removes the files.
func TestUpStatusDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	dir := filepath.Join(t.TempDir(), "run")
	ctx := context.Background()
	var out, errOut bytes.Buffer
	require.NoError(t, run(ctx, []string{"up", "-dir", dir, "-names", "solo", "-nodes", "1"}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "1 clusters up (local provider)")

	env, err := clusters.Load(dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Stop() })
	require.True(t, env.Running())
	require.Len(t, env.Clusters[0].NodeAddresses, 1)

	out.Reset()
	require.NoError(t, run(ctx, []string{"status", "-dir", dir}, &out, &errOut))
	require.Contains(t, out.String(), "readyz ok")
	require.Contains(t, out.String(), "kube-apiserver")

	require.ErrorContains(t, run(ctx, []string{"up", "-dir", dir, "-names", "solo"}, &out, &errOut), "already running")

	out.Reset()
	require.NoError(t, run(ctx, []string{"down", "-dir", dir}, &out, &errOut))
	require.Contains(t, out.String(), "stopped 1 clusters")
	require.False(t, env.Running())
	require.NoDirExists(t, dir)
}
