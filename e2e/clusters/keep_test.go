package clusters

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestKeepForDiagnosisMakesADirectoryNamedForTheTest checks that what a failed test keeps goes
// under FLUXFED_FAILED_DIR, in a new directory named for the test (its subtest's slash made safe),
// and that two calls never share one.
func TestKeepForDiagnosisMakesADirectoryNamedForTheTest(t *testing.T) {
	root := t.TempDir()
	t.Setenv("FLUXFED_FAILED_DIR", root)
	t.Run("a subtest", func(t *testing.T) {
		first, err := KeepForDiagnosis(t)
		require.NoError(t, err)
		second, err := KeepForDiagnosis(t)
		require.NoError(t, err)
		require.NotEqual(t, first, second)
		for _, dir := range []string{first, second} {
			require.Equal(t, root, filepath.Dir(dir))
			require.True(t, strings.HasPrefix(filepath.Base(dir), "TestKeepForDiagnosisMakesADirectoryNamedForTheTest_a_subtest-"), dir)
			info, err := os.Stat(dir)
			require.NoError(t, err)
			require.True(t, info.IsDir())
		}
	})
}

// TestCopyFileMakesItsDirectory checks that a kept log lands under directories made for it, with
// its content.
func TestCopyFileMakesItsDirectory(t *testing.T) {
	dir := t.TempDir()
	from := filepath.Join(dir, "etcd.log")
	require.NoError(t, os.WriteFile(from, []byte("one\ntwo\n"), 0o600))
	to := filepath.Join(dir, "kept", "hub", "etcd.log")
	require.NoError(t, copyFile(from, to))
	data, err := os.ReadFile(to)
	require.NoError(t, err)
	require.Equal(t, "one\ntwo\n", string(data))
	require.Error(t, copyFile(filepath.Join(dir, "missing.log"), to))
}
