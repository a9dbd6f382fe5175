package realpods

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/require"
)

// TestViewImageLayout builds the view image of a small stand-in for flux-core and busybox and
// checks every file of both layers: busybox and its applets' links, then the view at /opt/view,
// with its symbolic and hard links as they are.
func TestViewImageLayout(t *testing.T) {
	src := t.TempDir()
	busybox := filepath.Join(src, "busybox")
	require.NoError(t, os.WriteFile(busybox, []byte("busybox"), 0o755))
	flux := filepath.Join(src, "mnt", "flux", "view")
	for _, d := range []string{"bin", "lib", "etc/flux/system"} {
		require.NoError(t, os.MkdirAll(filepath.Join(flux, d), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(flux, "bin", "flux"), []byte("flux"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(flux, "lib", "libflux-core.so.2.0.0"), []byte("lib"), 0o755))
	require.NoError(t, os.Symlink("libflux-core.so.2.0.0", filepath.Join(flux, "lib", "libflux-core.so.2")))
	require.NoError(t, os.Link(filepath.Join(flux, "bin", "flux"), filepath.Join(flux, "bin", "flux-again")))

	img, err := viewImage(t.TempDir(), busybox, []string{"bin/busybox", "bin/sh", "bin/cp", "usr/bin/env"}, flux)
	require.NoError(t, err)
	layers := layersOf(t, img)
	require.Len(t, layers, 2)
	require.Equal(t, map[string]string{
		"bin/":        "d 0755 0:0",
		"bin/busybox": "f 0755 0:0",
		"bin/sh":      "l -> /bin/busybox",
		"bin/cp":      "l -> /bin/busybox",
		"tmp/":        "d 1777 0:0",
		"usr/":        "d 0755 0:0",
		"usr/bin/":    "d 0755 0:0",
		"usr/bin/env": "l -> /bin/busybox",
	}, layers[0])
	require.Equal(t, map[string]string{
		"opt/":                               "d 0755 0:0",
		"opt/view/":                          "d 0755 0:0",
		"opt/view/bin/":                      "d 0755 0:0",
		"opt/view/bin/flux":                  "f 0755 0:0",
		"opt/view/bin/flux-again":            "h -> opt/view/bin/flux",
		"opt/view/etc/":                      "d 0755 0:0",
		"opt/view/etc/flux/":                 "d 0755 0:0",
		"opt/view/etc/flux/system/":          "d 0755 0:0",
		"opt/view/lib/":                      "d 0755 0:0",
		"opt/view/lib/libflux-core.so.2":     "l -> libflux-core.so.2.0.0",
		"opt/view/lib/libflux-core.so.2.0.0": "f 0755 0:0",
	}, layers[1])

	cf, err := img.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, []string{"/bin/sh"}, cf.Config.Cmd)
	require.Equal(t, "linux", cf.OS)
}

// TestPauseImageIsBuiltOnce builds the pause image twice into an empty cache: the second time it
// is found up to date. Its only file is the static pause program, its entrypoint.
func TestPauseImageIsBuiltOnce(t *testing.T) {
	b := &Builder{Dir: t.TempDir()}
	first, err := b.Build(context.Background(), PauseImage)
	require.NoError(t, err)
	require.True(t, first.Built)
	require.Equal(t, filepath.Join(b.Dir, "pause_3.10.tar"), first.Archive)
	second, err := b.Build(context.Background(), PauseImage)
	require.NoError(t, err)
	require.False(t, second.Built, "nothing changed: the cached archive is up to date")

	tag, err := name.NewTag(PauseImage)
	require.NoError(t, err)
	img, err := tarball.ImageFromPath(first.Archive, &tag)
	require.NoError(t, err)
	layers := layersOf(t, img)
	require.Equal(t, []map[string]string{{"pause": "f 0755 0:0"}}, layers)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, []string{"/pause"}, cf.Config.Entrypoint)

	// A changed cache key (as a changed pause program makes) rebuilds it.
	require.NoError(t, os.WriteFile(filepath.Join(b.Dir, "pause_3.10.key"), []byte("old"), 0o644))
	third, err := b.Build(context.Background(), PauseImage)
	require.NoError(t, err)
	require.True(t, third.Built)
}

// layersOf lists every layer of img: each name with its type, mode and owner ("f 0755 0:0"), or
// its link ("l -> target", "h -> name").
func layersOf(t *testing.T, img v1.Image) []map[string]string {
	t.Helper()
	layers, err := img.Layers()
	require.NoError(t, err)
	var out []map[string]string
	for _, l := range layers {
		rc, err := l.Compressed()
		require.NoError(t, err)
		zr, err := gzip.NewReader(rc)
		require.NoError(t, err)
		tr := tar.NewReader(zr)
		files := map[string]string{}
		for {
			hdr, err := tr.Next()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			require.NotContains(t, files, hdr.Name, "twice in a layer")
			switch hdr.Typeflag {
			case tar.TypeSymlink:
				files[hdr.Name] = "l -> " + hdr.Linkname
			case tar.TypeLink:
				files[hdr.Name] = "h -> " + hdr.Linkname
			case tar.TypeDir:
				files[hdr.Name] = fmt.Sprintf("d %04o %d:%d", hdr.Mode, hdr.Uid, hdr.Gid)
			default:
				files[hdr.Name] = fmt.Sprintf("f %04o %d:%d", hdr.Mode, hdr.Uid, hdr.Gid)
			}
		}
		require.NoError(t, rc.Close())
		out = append(out, files)
	}
	return out
}
