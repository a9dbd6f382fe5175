// Package image builds the fluxfed container image without a container engine: one layer that
// holds two static binaries on an empty base, run as a non-root user: fluxfed at /fluxfed, the
// entrypoint (`fluxfed manager --hub`, the command line), and fluxfed-manager at
// /fluxfed-manager, the MiniCluster operator alone, which a cluster that is not a hub runs (it
// maps less of its binary). Every byte of the image is a function of the binaries and the Spec
// (file times, owners and the creation time are fixed), so two builds of the same source give
// the same digest.
//
// The image is written as a docker-archive tarball (the format of `docker save`: manifest.json,
// the config and the gzipped layer), which `docker load`, `podman load`, `ctr images import`
// and `kind load image-archive` (which runs ctr on every node) accept, or pushed to a registry.
package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// BinaryPath is where fluxfed is in the image, and the entrypoint.
	BinaryPath = "/fluxfed"
	// ManagerPath is where fluxfed-manager is in the image: deploy/manager's command.
	ManagerPath = "/fluxfed-manager"
	// User is the numeric user and group the image runs as: not root, and numeric so that
	// Kubernetes can check runAsNonRoot without an /etc/passwd in the image.
	User = "65532:65532"
	// Source is the repository the image is built from (label org.opencontainers.image.source).
	Source = "https://github.com/fluxfed/fluxfed"
	// License is the SPDX identifier of the license (label org.opencontainers.image.licenses).
	License = "Apache-2.0"
	// Title is the image's name (label org.opencontainers.image.title).
	Title = "fluxfed"
)

// Binaries are the contents of the image's static linux binaries.
type Binaries struct {
	// Fluxfed is ./cmd/fluxfed, at BinaryPath.
	Fluxfed []byte
	// Manager is ./cmd/fluxfed-manager, at ManagerPath.
	Manager []byte
}

// files are the binaries by their path in the layer, in the order the layer holds them.
func (b Binaries) files() []file {
	return []file{{BinaryPath, b.Fluxfed}, {ManagerPath, b.Manager}}
}

// file is a file of the layer: its path in the image and its contents.
type file struct {
	path    string
	content []byte
}

// Spec says what goes into the image besides the binaries.
type Spec struct {
	// Version of fluxfed (the tag of a release, e.g. v0.1.0): label org.opencontainers.image.version.
	Version string
	// Revision is the commit the binary was built from: label org.opencontainers.image.revision.
	Revision string
	// Arch is the GOARCH the binary was built for (amd64, arm64, ...); the image's architecture.
	Arch string
	// Created is the time recorded as the image's creation time and as the time of every file
	// in the layer. The zero time stands for the Unix epoch. Pass the commit's time (as
	// SOURCE_DATE_EPOCH does) to keep builds reproducible.
	Created time.Time
}

func (s Spec) created() time.Time {
	if s.Created.IsZero() {
		return time.Unix(0, 0).UTC()
	}
	return s.Created.UTC()
}

// Labels returns the OCI annotation labels the image's config carries.
func (s Spec) Labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    Title,
		"org.opencontainers.image.source":   Source,
		"org.opencontainers.image.version":  s.Version,
		"org.opencontainers.image.revision": s.Revision,
		"org.opencontainers.image.licenses": License,
	}
}

// Build returns the image holding binaries, static binaries for linux/s.Arch.
func Build(binaries Binaries, s Spec) (v1.Image, error) {
	for _, f := range binaries.files() {
		if len(f.content) == 0 {
			return nil, fmt.Errorf("building the image: the binary %s is empty", f.path)
		}
	}
	if s.Arch == "" {
		return nil, errors.New("building the image: no architecture given")
	}
	if s.Version == "" {
		return nil, errors.New("building the image: no version given")
	}
	created := s.created()
	layerBlob, err := layerTarGzip(binaries.files(), created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBlob)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("building the image's layer: %w", err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "fluxfed internal/image: " + BinaryPath + " " + ManagerPath,
			Comment:   "static fluxfed and fluxfed-manager binaries",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("adding the layer to the empty image: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading the image's config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = s.Arch
	cf.Created = v1.Time{Time: created}
	cf.Config = v1.Config{
		Entrypoint: []string{BinaryPath},
		User:       User,
		WorkingDir: "/",
		Labels:     s.Labels(),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("setting the image's config: %w", err)
	}
	return img, nil
}

// layerTarGzip returns the gzipped tar of the only layer: the binaries, owned by root (the
// image's user may run them but not replace them), with every time set to created.
func layerTarGzip(files []file, created time.Time) ([]byte, error) {
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	for _, f := range files {
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     f.path[1:], // layer paths are relative to the root
			Mode:     0o755,
			Size:     int64(len(f.content)),
			ModTime:  created,
			Format:   tar.FormatUSTAR,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("writing the layer's tar header of %s: %w", f.path, err)
		}
		if _, err := tw.Write(f.content); err != nil {
			return nil, fmt.Errorf("writing %s into the layer: %w", f.path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing the layer's tar: %w", err)
	}
	var gzBuf bytes.Buffer
	// No name and no time in the gzip header: the same tar always compresses to the same bytes
	// with the same Go release.
	zw, err := gzip.NewWriterLevel(&gzBuf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(tarBuf.Bytes()); err != nil {
		return nil, fmt.Errorf("compressing the layer: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compressing the layer: %w", err)
	}
	return gzBuf.Bytes(), nil
}

// WriteArchive writes img, tagged ref (e.g. ghcr.io/fluxfed/fluxfed:v0.1.0), as a docker-archive
// tarball to path, through a temporary file in the same directory so that path is never half
// written.
func WriteArchive(path string, ref name.Tag, img v1.Image) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), ".fluxfed-image-*.tar")
	if err != nil {
		return fmt.Errorf("writing the image archive: %w", err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if err := tarball.Write(ref, img, f); err != nil {
		return fmt.Errorf("writing the image archive %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("writing the image archive: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing the image archive %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("writing the image archive: %w", err)
	}
	return nil
}

// Push pushes img to the registry of ref under ref's tag, with the credentials the Docker config
// (~/.docker/config.json, $DOCKER_CONFIG) has for that registry, or anonymously if it has none.
// Registries at localhost or 127.0.0.1 are spoken to over plain HTTP.
func Push(ctx context.Context, ref name.Tag, img v1.Image) error {
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}
