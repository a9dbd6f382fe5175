package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fluxfed/fluxfed/e2e/fluxcheck"
	"github.com/fluxfed/fluxfed/e2e/testenv"
)

func TestPlanWritesOneFolderPerHost(t *testing.T) {
	out := t.TempDir()
	example := filepath.Join(testenv.RepoRoot(), "examples", "bursting-root.yaml")
	var stdout bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"plan", "-f", example, "--out", out}, &stdout, &bytes.Buffer{}))

	summary := stdout.String()
	for _, want := range []string{
		"Hostlist:  bursting-root-[0-1],burst-a-[0-2],burst-b-[0-1]",
		"Quorum:    2",
		"2-4    burst-a-[0-2]",
		"2→0, 3-4→2",
		"Wrote 2 host folders",
	} {
		require.Contains(t, summary, want)
	}

	var configs []fluxcheck.HostConfig
	for _, host := range []string{"bursting-root-0", "bursting-root-1"} {
		dir := filepath.Join(out, host)
		read := func(name string) []byte {
			data, err := os.ReadFile(filepath.Join(dir, name))
			require.NoError(t, err)
			return data
		}
		require.Equal(t, host+"\n", string(read("hostname")))
		require.Equal(t, "bursting-root-[0-1],burst-a-[0-2],burst-b-[0-1]\n", string(read("hostlist")))
		info, err := os.Stat(filepath.Join(dir, "curve.cert"))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o400), info.Mode().Perm(), "the broker refuses a certificate others can read")
		configs = append(configs, fluxcheck.HostConfig{Hostname: host, BrokerTOML: read("broker.toml"), CurveCert: read("curve.cert")})
	}
	require.NoError(t, fluxcheck.Check(configs))

	manifests, err := os.ReadFile(filepath.Join(out, "manifests.yaml"))
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(string(manifests), "kind: ConfigMap\n"))
	require.Contains(t, string(manifests), "kind: Job\n")
	require.NotContains(t, string(manifests), "secret-key")
}

func TestPlanRefusesAnInvalidMiniClusterLikeTheAPIServer(t *testing.T) {
	manifest := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(`apiVersion: flux-framework.org/v1alpha2
kind: MiniCluster
metadata: {name: bad}
spec:
  size: 4
  maxSize: 2
  containers: [{image: rockylinux:9}]
  flux: {logLevel: 9}
`), 0o644))
	err := run(context.Background(), []string{"plan", "-f", manifest}, &bytes.Buffer{}, &bytes.Buffer{})
	require.ErrorContains(t, err, `MiniCluster "bad" is invalid`)
	require.ErrorContains(t, err, "spec.maxSize: Invalid value")
	require.ErrorContains(t, err, "spec.size must not exceed spec.maxSize")
	require.ErrorContains(t, err, "spec.flux.logLevel: Invalid value: 9")
}

func TestPlanNeedsAFile(t *testing.T) {
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"plan"}, &bytes.Buffer{}, &stderr)
	require.ErrorIs(t, err, errUsage)
	require.Contains(t, stderr.String(), "Usage: fluxfed plan -f minicluster.yaml")
}
