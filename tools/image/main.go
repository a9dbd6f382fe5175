// Command image builds the fluxfed image without a container engine (`make image`): it builds
// static ./cmd/fluxfed and ./cmd/fluxfed-manager for linux, puts them in an image with
// internal/image, writes the image as a docker-archive tarball and, with -push, pushes it. Run it
// from the root of the repository.
//
//	go run ./tools/image -image ghcr.io/fluxfed/fluxfed:v0.1.0 -o dist/fluxfed-image.tar [-push]
//
// The creation time of the image and of its files is SOURCE_DATE_EPOCH (seconds since the Unix
// epoch; the Makefile sets it to the time of the last commit), else the Unix epoch.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/fluxfed/fluxfed/internal/image"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "image:", err)
		}
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ref := fs.String("image", "", "the image's reference, a repository and a tag (required), e.g. ghcr.io/fluxfed/fluxfed:v0.1.0")
	version := fs.String("version", "", "the version stamped into the binaries and the version label (default: the tag of -image)")
	revision := fs.String("revision", "", "the commit, for the revision label")
	arch := fs.String("arch", runtime.GOARCH, "the architecture (GOARCH) to build for")
	out := fs.String("o", filepath.Join("dist", "fluxfed-image.tar"), "where to write the image archive")
	push := fs.Bool("push", false, "also push the image to the registry of -image")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *ref == "" {
		return errors.New("-image is required, e.g. -image ghcr.io/fluxfed/fluxfed:v0.1.0")
	}
	tag, err := name.NewTag(*ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("-image %q is not a repository with a tag: %w", *ref, err)
	}
	if *version == "" {
		*version = tag.TagStr()
	}
	created, err := sourceDateEpoch(os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		return err
	}

	tmp, err := os.MkdirTemp("", "fluxfed-image-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	binaries, err := image.BuildBinaries(ctx, ".", tmp, *version, *arch)
	if err != nil {
		return err
	}
	img, err := image.Build(binaries, image.Spec{Version: *version, Revision: *revision, Arch: *arch, Created: created})
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return fmt.Errorf("computing the image's digest: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	if err := image.WriteArchive(*out, tag, img); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "image %s\ndigest %s\narchive %s (docker load -i, kind load image-archive, ctr images import)\n", tag, digest, *out)
	if *push {
		if err := image.Push(ctx, tag, img); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "pushed %s@%s\n", tag.Context(), digest)
	}
	return nil
}

// sourceDateEpoch parses SOURCE_DATE_EPOCH; empty is the Unix epoch.
func sourceDateEpoch(s string) (time.Time, error) {
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil || sec < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a number of seconds since the Unix epoch", s)
	}
	return time.Unix(sec, 0).UTC(), nil
}
