package clusters

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRemoveFilesRemovesWhatProgramsAdded: what a program adds to the run directory for the
// clusters (a fleet's fluxfed binary, the demo's stand-ins) is recorded in the state file, so
// that `clusters down`, which loads it, removes it too and leaves no directory behind.
func TestRemoveFilesRemovesWhatProgramsAdded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	env := &Environment{Provider: ProviderLocal, Dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig"),
		Clusters: []*Cluster{{Name: "hub", Dir: filepath.Join(dir, "hub")}}}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "hub", "logs"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "flux-root", "bin"), 0o755))
	for _, f := range []string{"kubeconfig", "fluxfed", "flux-root/bin/flux"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600))
	}
	require.NoError(t, env.save())
	require.NoError(t, env.AddFiles(filepath.Join(dir, "fluxfed"), filepath.Join(dir, "flux-root")))
	require.NoError(t, env.AddFiles(filepath.Join(dir, "fluxfed")), "adding twice records once")

	loaded, err := Load(dir)
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, "fluxfed"), filepath.Join(dir, "flux-root")}, loaded.Files)
	require.NoError(t, loaded.RemoveFiles())
	_, err = os.Stat(dir)
	require.True(t, os.IsNotExist(err), "the run directory is gone: %v", err)
}
