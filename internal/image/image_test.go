package image

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"github.com/stretchr/testify/require"
)

const testVersion = "v9.8.7-test"

var (
	buildOnce sync.Once
	built     Binaries
	buildErr  error
)

// realBinaries builds the real ./cmd/fluxfed and ./cmd/fluxfed-manager, as the image needs them,
// once per test binary.
func realBinaries(t *testing.T) Binaries {
	t.Helper()
	buildOnce.Do(func() { built, buildErr = buildInto(t.Context(), "") })
	require.NoError(t, buildErr)
	return built
}

// buildInto builds the binaries in a new directory under parent and returns their bytes.
func buildInto(ctx context.Context, parent string) (Binaries, error) {
	dir, err := os.MkdirTemp(parent, "fluxfed-image-test-")
	if err != nil {
		return Binaries{}, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	return BuildBinaries(ctx, repoRoot(), dir, testVersion, runtime.GOARCH)
}

// fakeBinaries are two different contents that stand for the binaries where they are not run.
var fakeBinaries = Binaries{Fluxfed: []byte("#!/not/a/real/fluxfed\n"), Manager: []byte("#!/not/a/real/fluxfed-manager\n")}

// layerFiles returns the entries of img's only layer: their headers and contents, in order.
func layerFiles(t *testing.T, img v1.Image) ([]*tar.Header, [][]byte) {
	t.Helper()
	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1)
	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	var hdrs []*tar.Header
	var contents [][]byte
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return hdrs, contents
		}
		require.NoError(t, err)
		content, err := io.ReadAll(tr)
		require.NoError(t, err)
		hdrs, contents = append(hdrs, hdr), append(contents, content)
	}
}

func repoRoot() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return filepath.Join(wd, "..", "..")
}

var testSpec = Spec{
	Version:  testVersion,
	Revision: "0123456789abcdef0123456789abcdef01234567",
	Arch:     runtime.GOARCH,
	Created:  time.Date(2026, 5, 4, 3, 2, 1, 0, time.UTC),
}

var testTag = name.MustParseReference("ghcr.io/fluxfed/fluxfed:" + testVersion).(name.Tag)

func TestTheConfigRunsTheBinaryAsANonRootUser(t *testing.T) {
	img, err := Build(fakeBinaries, testSpec)
	require.NoError(t, err)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, []string{"/fluxfed"}, cf.Config.Entrypoint)
	require.Empty(t, cf.Config.Cmd)
	require.Equal(t, "65532:65532", cf.Config.User)
	require.Equal(t, "linux", cf.OS)
	require.Equal(t, runtime.GOARCH, cf.Architecture)
	require.True(t, testSpec.Created.Equal(cf.Created.Time), "created %s", cf.Created)
	require.Equal(t, map[string]string{
		"org.opencontainers.image.title":    "fluxfed",
		"org.opencontainers.image.source":   "https://github.com/fluxfed/fluxfed",
		"org.opencontainers.image.version":  testVersion,
		"org.opencontainers.image.revision": testSpec.Revision,
		"org.opencontainers.image.licenses": "Apache-2.0",
	}, cf.Config.Labels)
	require.Len(t, cf.RootFS.DiffIDs, 1, "one layer on an empty base")
	require.Len(t, cf.History, 1)

	m, err := img.Manifest()
	require.NoError(t, err)
	require.Equal(t, types.OCIManifestSchema1, m.MediaType)
	require.Equal(t, types.OCIConfigJSON, m.Config.MediaType)
	require.Len(t, m.Layers, 1)
	require.Equal(t, types.OCILayer, m.Layers[0].MediaType)

	arm, err := Build(fakeBinaries, Spec{Version: testVersion, Arch: "arm64"})
	require.NoError(t, err)
	cf, err = arm.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, "arm64", cf.Architecture)
	require.True(t, time.Unix(0, 0).Equal(cf.Created.Time), "no time given is the Unix epoch, got %s", cf.Created)
}

func TestTheLayerHoldsExactlyTheTwoBinariesOwnedByRoot(t *testing.T) {
	img, err := Build(fakeBinaries, testSpec)
	require.NoError(t, err)
	hdrs, contents := layerFiles(t, img)
	var names []string
	for _, hdr := range hdrs {
		names = append(names, hdr.Name)
		require.Equal(t, byte(tar.TypeReg), hdr.Typeflag, hdr.Name)
		require.Equal(t, int64(0o755), hdr.Mode, hdr.Name)
		require.Equal(t, 0, hdr.Uid, hdr.Name)
		require.Equal(t, 0, hdr.Gid, hdr.Name)
		require.Empty(t, hdr.Uname, hdr.Name)
		require.Empty(t, hdr.Gname, hdr.Name)
		require.True(t, testSpec.Created.Equal(hdr.ModTime), "%s: mtime %s", hdr.Name, hdr.ModTime)
	}
	require.Equal(t, []string{"fluxfed", "fluxfed-manager"}, names, "the two binaries and nothing else")
	require.Equal(t, [][]byte{fakeBinaries.Fluxfed, fakeBinaries.Manager}, contents)
}

func TestBuildSaysWhatIsMissing(t *testing.T) {
	for _, c := range []struct {
		binary Binaries
		spec   Spec
		want   string
	}{
		{Binaries{Manager: []byte("x")}, testSpec, "the binary /fluxfed is empty"},
		{Binaries{Fluxfed: []byte("x")}, testSpec, "the binary /fluxfed-manager is empty"},
		{fakeBinaries, Spec{Version: "v1"}, "no architecture"},
		{fakeBinaries, Spec{Arch: "amd64"}, "no version"},
	} {
		_, err := Build(c.binary, c.spec)
		require.ErrorContains(t, err, c.want)
	}
}

func TestTwoBuildsAreByteIdentical(t *testing.T) {
	first := realBinaries(t)
	second, err := buildInto(t.Context(), t.TempDir())
	require.NoError(t, err)
	require.Equal(t, sha256.Sum256(first.Fluxfed), sha256.Sum256(second.Fluxfed), "the same source builds to the same fluxfed")
	require.Equal(t, sha256.Sum256(first.Manager), sha256.Sum256(second.Manager), "the same source builds to the same fluxfed-manager")

	archive := func(binary Binaries, s Spec) (v1.Hash, [32]byte) {
		img, err := Build(binary, s)
		require.NoError(t, err)
		digest, err := img.Digest()
		require.NoError(t, err)
		path := filepath.Join(t.TempDir(), "fluxfed-image.tar")
		require.NoError(t, WriteArchive(path, testTag, img))
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		return digest, sha256.Sum256(b)
	}
	d1, sum1 := archive(first, testSpec)
	d2, sum2 := archive(second, testSpec)
	require.Equal(t, d1, d2, "image digests")
	require.Equal(t, sum1, sum2, "archive bytes")
	t.Logf("image %s, archive sha256:%x", d1, sum1)

	later := testSpec
	later.Created = later.Created.Add(time.Second)
	d3, _ := archive(first, later)
	require.NotEqual(t, d1, d3, "the creation time is part of the image")
}

func TestTheArchiveLoadsBackWithItsTagAndItsBinariesRun(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the image's binary is built for linux")
	}
	img, err := Build(realBinaries(t), testSpec)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "fluxfed-image.tar")
	require.NoError(t, WriteArchive(path, testTag, img))

	// The docker-archive manifest names the tag, as docker load and ctr images import read it.
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
	require.NoError(t, err)
	require.Len(t, m, 1)
	require.Equal(t, []string{"ghcr.io/fluxfed/fluxfed:" + testVersion}, m[0].RepoTags)

	loaded, err := tarball.ImageFromPath(path, &testTag)
	require.NoError(t, err)
	// What a runtime checks on import: every digest, diff ID and size the manifest and the config
	// name matches the bytes in the archive.
	require.NoError(t, validate.Image(loaded))
	wantCfg, err := img.ConfigName()
	require.NoError(t, err)
	gotCfg, err := loaded.ConfigName()
	require.NoError(t, err)
	require.Equal(t, wantCfg, gotCfg)
	other := name.MustParseReference("ghcr.io/fluxfed/fluxfed:other").(name.Tag)
	_, err = tarball.ImageFromPath(path, &other)
	require.Error(t, err, "the archive holds only its own tag")

	// Take the binaries out of the loaded image's layer and run them.
	hdrs, contents := layerFiles(t, loaded)
	require.Len(t, hdrs, 2)
	dir := t.TempDir()
	for i, hdr := range hdrs {
		require.NoError(t, os.WriteFile(filepath.Join(dir, hdr.Name), contents[i], os.FileMode(hdr.Mode)))
	}
	for _, c := range []struct{ binary, arg string }{{"fluxfed", "version"}, {"fluxfed-manager", "--version"}} {
		out, err := exec.CommandContext(t.Context(), filepath.Join(dir, c.binary), c.arg).CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.True(t, strings.HasPrefix(string(out), c.binary+" "+testVersion+" ("), "%s", out)
		require.Contains(t, string(out), "linux/"+runtime.GOARCH)
	}
}

func TestPushToARegistryOnLoopbackAndPullBack(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	require.True(t, strings.HasPrefix(host, "127.0.0.1:"), "the registry listens on loopback: %s", host)

	img, err := Build(fakeBinaries, testSpec)
	require.NoError(t, err)
	tag, err := name.NewTag(host+"/fluxfed:"+testVersion, name.StrictValidation)
	require.NoError(t, err)
	require.NoError(t, Push(t.Context(), tag, img))

	want, err := img.Digest()
	require.NoError(t, err)
	desc, err := remote.Get(tag, remote.WithContext(t.Context()))
	require.NoError(t, err)
	require.Equal(t, want, desc.Digest)
	require.Equal(t, types.OCIManifestSchema1, desc.MediaType)
	pulled, err := desc.Image()
	require.NoError(t, err)
	require.NoError(t, validate.Image(pulled))
	cf, err := pulled.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, []string{"/fluxfed"}, cf.Config.Entrypoint)

	gone := name.MustParseReference("127.0.0.1:1/fluxfed:x").(name.Tag)
	err = Push(t.Context(), gone, img)
	require.ErrorContains(t, err, "pushing 127.0.0.1:1/fluxfed:x")
}

func TestWriteArchiveLeavesNothingBehindOnFailure(t *testing.T) {
	dir := t.TempDir()
	img, err := Build(fakeBinaries, testSpec)
	require.NoError(t, err)
	err = WriteArchive(filepath.Join(dir, "missing", "fluxfed-image.tar"), testTag, img)
	require.Error(t, err)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
	require.NoError(t, WriteArchive(filepath.Join(dir, "fluxfed-image.tar"), testTag, img))
	entries, err = os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left")
}
