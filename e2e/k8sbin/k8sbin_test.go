package k8sbin

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseVersions(t *testing.T) {
	tests := []struct {
		name    string
		env     string
		want    Versions
		wantErr string
	}{
		{name: "all", env: "# c\nKUBE_VERSION=v1.36.3\n\nKWOK_VERSION=v0.8.0\nPROMETHEUS_OPERATOR_VERSION=v0.80.1\n",
			want: Versions{Kube: "v1.36.3", Kwok: "v0.8.0", PrometheusOperator: "v0.80.1"}},
		{name: "missing kwok", env: "KUBE_VERSION=v1.36.3\nPROMETHEUS_OPERATOR_VERSION=v0.80.1\n", wantErr: "all required"},
		{name: "missing prometheus operator", env: "KUBE_VERSION=v1.36.3\nKWOK_VERSION=v0.8.0\n", wantErr: "all required"},
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
