package realpods

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fluxfed/fluxfed/e2e/fluxcore"
	"github.com/fluxfed/fluxfed/member/render/names"
)

func TestTheNamesAgreeWithWhatThePodsUse(t *testing.T) {
	require.Equal(t, names.DefaultMountPath+"/view", ViewPrefix, "the view image's flux-core must be configured where the broker pods find it")
	require.True(t, strings.HasSuffix(ViewImage, ":"+fluxcore.Pinned().FluxCore), "the view image's tag is flux-core's version: %s", ViewImage)
	require.Equal(t, []string{PauseImage, ViewImage, AppImage}, Images())
	for _, ref := range Images() {
		require.True(t, strings.HasPrefix(ref, "fluxfed.test/"), ref)
	}
	require.Equal(t, "flux-view_"+fluxcore.Pinned().FluxCore+".tar", archiveName(ViewImage))
	require.Equal(t, "flux-app_bookworm.tar", archiveName(AppImage))
	require.Equal(t, "pause_3.10.tar", archiveName(PauseImage))
}

func TestArchive(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvCache, dir)
	_, err := Archive(AppImage)
	require.ErrorContains(t, err, "the archive of fluxfed.test/flux-app:bookworm ("+filepath.Join(dir, "flux-app_bookworm.tar")+") is missing: run `make real-pod-images`")
	_, err = Archive("docker.io/library/busybox:latest")
	require.ErrorContains(t, err, "is not one of the real-pod images")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "flux-app_bookworm.tar"), []byte("x"), 0o644))
	got, err := Archive(AppImage)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "flux-app_bookworm.tar"), got)
}
