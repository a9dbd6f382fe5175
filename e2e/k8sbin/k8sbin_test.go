package k8sbin

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseVersions(t *testing.T) {
	const coreDNS = "COREDNS_VERSION=v1.15.0\nCOREDNS_PLUGINS=errors,kubernetes\n"
	tests := []struct {
		name    string
		env     string
		want    Versions
		wantErr string
	}{
		{name: "all", env: "# c\nKUBE_VERSION=v1.36.3\n\nKWOK_VERSION=v0.8.0\nPROMETHEUS_OPERATOR_VERSION=v0.80.1\n" + coreDNS,
			want: Versions{Kube: "v1.36.3", Kwok: "v0.8.0", PrometheusOperator: "v0.80.1", CoreDNS: "v1.15.0", CoreDNSPlugins: []string{"errors", "kubernetes"}}},
		{name: "missing kwok", env: "KUBE_VERSION=v1.36.3\nPROMETHEUS_OPERATOR_VERSION=v0.80.1\n" + coreDNS, wantErr: "all required"},
		{name: "missing prometheus operator", env: "KUBE_VERSION=v1.36.3\nKWOK_VERSION=v0.8.0\n" + coreDNS, wantErr: "all required"},
		{name: "missing coredns", env: "KUBE_VERSION=v1.36.3\nKWOK_VERSION=v0.8.0\nPROMETHEUS_OPERATOR_VERSION=v0.80.1\nCOREDNS_PLUGINS=kubernetes\n", wantErr: "all required"},
		{name: "missing coredns plugins", env: "KUBE_VERSION=v1.36.3\nKWOK_VERSION=v0.8.0\nPROMETHEUS_OPERATOR_VERSION=v0.80.1\nCOREDNS_VERSION=v1.15.0\n", wantErr: "all required"},
		{name: "forward plugin", env: "KUBE_VERSION=v1.36.3\nKWOK_VERSION=v0.8.0\nPROMETHEUS_OPERATOR_VERSION=v0.80.1\nCOREDNS_VERSION=v1.15.0\nCOREDNS_PLUGINS=kubernetes,forward\n",
			wantErr: "COREDNS_PLUGINS names forward"},
		{name: "not key=value", env: "KUBE_VERSION v1\n", wantErr: "not KEY=VALUE"},
		{name: "unknown key", env: "ETCD_VERSION=v3\n", wantErr: `unknown key "ETCD_VERSION"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseVersions(tt.env)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestPinnedIsEmbedded(t *testing.T) {
	v := Pinned()
	require.Regexp(t, `^v1\.\d+\.\d+$`, v.Kube)
	require.Regexp(t, `^v0\.\d+\.\d+$`, v.Kwok)
	require.Regexp(t, `^v0\.\d+\.\d+$`, v.PrometheusOperator)
	require.Regexp(t, `^v1\.\d+\.\d+$`, v.CoreDNS)
	require.Contains(t, v.CoreDNSPlugins, "kubernetes")
}

// TestTheCacheHoldsThePinnedBinaries checks what build.sh built (make test and make test-fast run
// it first): every binary is there, kubelet and CoreDNS are the pinned versions, CoreDNS has its
// plugins and refuses a Corefile that forwards.
func TestTheCacheHoldsThePinnedBinaries(t *testing.T) {
	dir, err := Dir(Binaries()...)
	require.NoError(t, err)
	v := Pinned()

	out, err := exec.Command(filepath.Join(dir, "kubelet"), "--version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "Kubernetes "+v.Kube, strings.TrimSpace(string(out)))

	coredns := filepath.Join(dir, "coredns")
	out, err = exec.Command(coredns, "-version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "CoreDNS-"+strings.TrimPrefix(v.CoreDNS, "v"), strings.SplitN(string(out), "\n", 2)[0])

	out, err = exec.Command(coredns, "-plugins").CombinedOutput()
	require.NoError(t, err, "%s", out)
	listed := strings.Fields(string(out))
	for _, p := range v.CoreDNSPlugins {
		require.Contains(t, listed, p, "coredns -plugins")
	}
	require.NotContains(t, listed, "forward", "coredns -plugins")

	corefile := filepath.Join(t.TempDir(), "Corefile")
	require.NoError(t, os.WriteFile(corefile, []byte(".:0 {\n\tforward . 127.0.0.1:1\n}\n"), 0o644))
	// A CoreDNS that took the Corefile would serve it: the deadline ends it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err = exec.CommandContext(ctx, coredns, "-conf", corefile).CombinedOutput()
	require.Error(t, err, "coredns started with a forward plugin: %s", out)
	require.Contains(t, string(out), "Unknown directive 'forward'")
}

func TestServiceMonitorCRD(t *testing.T) {
	assets := t.TempDir()
	t.Setenv(EnvAssets, assets)
	_, err := ServiceMonitorCRD()
	require.ErrorContains(t, err, "make k8s-binaries")
	path := filepath.Join(assets, ServiceMonitorCRDFile)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, nil, 0o644))
	_, err = ServiceMonitorCRD()
	require.ErrorContains(t, err, "is missing", "an empty file is not the CRD")
	require.NoError(t, os.WriteFile(path, []byte("kind: CustomResourceDefinition\n"), 0o644))
	got, err := ServiceMonitorCRD()
	require.NoError(t, err)
	require.Equal(t, path, got)
}

func TestDir(t *testing.T) {
	assets := t.TempDir()
	for _, name := range []string{"etcd", "kube-apiserver"} {
		require.NoError(t, os.WriteFile(filepath.Join(assets, name), []byte("#!/bin/sh\n"), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(assets, "kwok"), nil, 0o644))

	t.Run("assets variable wins", func(t *testing.T) {
		t.Setenv(EnvAssets, assets)
		dir, err := Dir("etcd", "kube-apiserver")
		require.NoError(t, err)
		require.Equal(t, assets, dir)
	})
	t.Run("missing and non-executable binaries are named with the fix", func(t *testing.T) {
		t.Setenv(EnvAssets, assets)
		_, err := Dir("etcd", "kwok", "kube-scheduler")
		require.ErrorContains(t, err, "lacks kwok, kube-scheduler")
		require.ErrorContains(t, err, "make k8s-binaries")
	})
	t.Run("cache under FLUXFED_K8S_CACHE", func(t *testing.T) {
		root := t.TempDir()
		t.Setenv(EnvAssets, "")
		t.Setenv(EnvCache, root)
		want := filepath.Join(root, Pinned().Kube)
		require.NoError(t, os.MkdirAll(want, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(want, "etcd"), nil, 0o755))
		dir, err := Dir("etcd")
		require.NoError(t, err)
		require.Equal(t, want, dir)
		_, err = Dir("kube-apiserver")
		require.ErrorContains(t, err, "the binary cache")
	})
}
