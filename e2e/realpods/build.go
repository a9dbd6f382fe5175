package realpods

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

//go:embed cmd/pause/main.go
var pauseSource []byte

// layoutVersion changes whenever the way the images are put together changes, so that every
// cached archive is rebuilt.
const layoutVersion = "1"

// Debian is what the application image is made of: a debootstrap of Suite, Variant.
const (
	Suite   = "bookworm"
	Variant = "minbase"
)

// AppPackages returns the Debian packages added to the minbase of the application image: the
// libraries flux-core's programs and modules link (found with ldd on its build), the Python
// modules its commands import, Lua and lua-posix for its job shell, and procps for ps.
func AppPackages() []string {
	return []string{
		"libarchive13", "libhwloc15", "libjansson4", "liblua5.3-0", "liblz4-1", "libncursesw6",
		"libpython3.11", "libsqlite3-0", "libuuid1", "libzmq5",
		"python3", "python3-cffi-backend", "python3-ply", "python3-yaml",
		"lua5.3", "lua-posix", "procps",
	}
}

// Builder builds the images' archives into Dir, each only when what it is made of changed: every
// archive has beside it a .key file holding the hash of its inputs.
type Builder struct {
	// Dir is the cache of archives (CacheDir()).
	Dir string
	// Repo is the root of the fluxfed checkout, whose e2e/fluxcore/build.sh builds flux-core.
	Repo string
	// Log receives one line per step, and the output of the commands that fail.
	Log io.Writer
}

// Result says what Build did for one image.
type Result struct {
	Ref     string
	Archive string
	// Built is false when the cached archive was up to date.
	Built bool
	// Took is how long finding or building it took.
	Took time.Duration
	// Size is the archive's size in bytes.
	Size int64
}

func (b *Builder) logf(format string, args ...any) {
	if b.Log != nil {
		fmt.Fprintf(b.Log, "real-pod-images: "+format+"\n", args...)
	}
}

// Build builds the archive of ref (one of Images()) unless the cached one is up to date.
func (b *Builder) Build(ctx context.Context, ref string) (Result, error) {
	start := time.Now()
	var (
		key   string
		build func(ctx context.Context, work string) (v1.Image, error)
		err   error
	)
	switch ref {
	case PauseImage:
		key, build, err = b.pause(ctx)
	case ViewImage:
		key, build, err = b.view(ctx)
	case AppImage:
		key, build = b.app()
	default:
		return Result{}, fmt.Errorf("%s is not one of the real-pod images (%s)", ref, strings.Join(Images(), ", "))
	}
	if err != nil {
		return Result{}, fmt.Errorf("building %s: %w", ref, err)
	}
	res := Result{Ref: ref, Archive: filepath.Join(b.Dir, archiveName(ref))}
	keyFile := strings.TrimSuffix(res.Archive, ".tar") + ".key"
	if old, err := os.ReadFile(keyFile); err == nil && string(old) == key {
		if info, err := os.Stat(res.Archive); err == nil {
			res.Took, res.Size = time.Since(start), info.Size()
			return res, nil
		}
	}
	if err := os.MkdirAll(b.Dir, 0o755); err != nil {
		return Result{}, err
	}
	work, err := os.MkdirTemp(b.Dir, ".build-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(work)
	img, err := build(ctx, work)
	if err != nil {
		return Result{}, fmt.Errorf("building %s: %w", ref, err)
	}
	if err := writeArchive(res.Archive, ref, img); err != nil {
		return Result{}, err
	}
	if err := os.WriteFile(keyFile, []byte(key), 0o644); err != nil {
		return Result{}, err
	}
	info, err := os.Stat(res.Archive)
	if err != nil {
		return Result{}, err
	}
	res.Built, res.Took, res.Size = true, time.Since(start), info.Size()
	b.logf("built %s in %s: %s, %d MB", ref, res.Took.Round(time.Second), res.Archive, res.Size>>20)
	return res, nil
}

// pause builds the pause program first: the image's key is the binary's hash.
func (b *Builder) pause(ctx context.Context) (string, func(context.Context, string) (v1.Image, error), error) {
	src, err := os.MkdirTemp("", "fluxfed-pause-")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(src)
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module fluxfed.local/pause\n\ngo 1.26\n"), 0o644); err != nil {
		return "", nil, err
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), pauseSource, 0o644); err != nil {
		return "", nil, err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", "pause", ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOFLAGS=-mod=mod")
	if err := b.run(cmd); err != nil {
		return "", nil, fmt.Errorf("compiling the pause program: %w", err)
	}
	binary, err := os.ReadFile(filepath.Join(src, "pause"))
	if err != nil {
		return "", nil, err
	}
	key := hashOf("pause", layoutVersion, string(binary))
	return key, func(_ context.Context, work string) (v1.Image, error) {
		dir := filepath.Join(work, "root")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, "pause"), binary, 0o755); err != nil {
			return nil, err
		}
		return image(work, []layer{{
			comment: "the pause program (e2e/realpods/cmd/pause)",
			trees:   []tree{{Src: dir, RootOwned: true}},
		}}, v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535"})
	}, nil
}

// view builds flux-core for ViewPrefix (e2e/fluxcore/build.sh with FLUX_CORE_PREFIX) and finds
// a static busybox first: the image's key is the hash of both.
func (b *Builder) view(ctx context.Context) (string, func(context.Context, string) (v1.Image, error), error) {
	cmd := exec.CommandContext(ctx, filepath.Join(b.Repo, "e2e", "fluxcore", "build.sh"))
	cmd.Env = append(os.Environ(), "FLUX_CORE_PREFIX="+ViewPrefix)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := b.run(cmd); err != nil {
		return "", nil, fmt.Errorf("building flux-core for %s: %w", ViewPrefix, err)
	}
	dest := lastLine(out.String())
	fluxTree := filepath.Join(dest, ViewPrefix)
	if _, err := os.Stat(filepath.Join(fluxTree, "bin", "flux")); err != nil {
		return "", nil, fmt.Errorf("e2e/fluxcore/build.sh printed %q, which has no .%s/bin/flux", dest, ViewPrefix)
	}
	busybox, err := b.busybox(ctx)
	if err != nil {
		return "", nil, err
	}
	applets, err := b.output(exec.CommandContext(ctx, busybox, "--list-full"))
	if err != nil {
		return "", nil, fmt.Errorf("listing the applets of %s: %w", busybox, err)
	}
	treeHash, err := hashTree(fluxTree)
	if err != nil {
		return "", nil, err
	}
	busyboxBinary, err := os.ReadFile(busybox)
	if err != nil {
		return "", nil, err
	}
	key := hashOf("view", layoutVersion, ViewPrefix, ImageViewDir, treeHash, string(busyboxBinary))
	return key, func(_ context.Context, work string) (v1.Image, error) {
		return viewImage(work, busybox, strings.Fields(applets), fluxTree)
	}, nil
}

// viewImage is the view image: busybox at /bin/busybox with a link for each of applets (their
// paths in the image, bin/sh ...), then the flux-core tree at ImageViewDir.
func viewImage(work, busybox string, applets []string, fluxTree string) (v1.Image, error) {
	base := filepath.Join(work, "base", "bin")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, err
	}
	if err := copyFile(busybox, filepath.Join(base, "busybox"), 0o755); err != nil {
		return nil, err
	}
	entries := []entry{{Name: "tmp", Mode: 0o1777}}
	for _, a := range applets {
		a = strings.Trim(a, "/")
		if a == "bin/busybox" || a == "" {
			continue
		}
		entries = append(entries, entry{Name: a, Link: "/bin/busybox"})
	}
	return image(work, []layer{
		{comment: "a static busybox: the shell and cp of the flux-view init container", trees: []tree{{Src: filepath.Dir(base), RootOwned: true}}, entries: entries},
		{comment: "flux-core configured for " + ViewPrefix + ", at " + ImageViewDir, trees: []tree{{Src: fluxTree, Dst: ImageViewDir, RootOwned: true}}},
	}, v1.Config{Cmd: []string{"/bin/sh"}})
}

// busybox returns a static busybox: Debian's busybox-static package of the candidate version,
// downloaded with apt-get from the machine's Debian mirror the first time and kept in the cache.
func (b *Builder) busybox(ctx context.Context) (string, error) {
	policy, err := b.output(exec.CommandContext(ctx, "apt-cache", "policy", "busybox-static"))
	if err != nil {
		return "", fmt.Errorf("finding Debian's busybox-static (the view image's shell) with apt-cache: %w", err)
	}
	version := ""
	for _, line := range strings.Split(policy, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Candidate:"); ok {
			version = strings.TrimSpace(v)
		}
	}
	if version == "" || version == "(none)" {
		return "", errors.New("apt-cache knows no busybox-static: run apt-get update")
	}
	dir := filepath.Join(b.Dir, "busybox-static_"+strings.ReplaceAll(version, ":", "_"))
	bin := filepath.Join(dir, "bin", "busybox")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	tmp, err := os.MkdirTemp(b.Dir, ".busybox-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	b.logf("downloading busybox-static %s with apt-get", version)
	get := exec.CommandContext(ctx, "apt-get", "download", "busybox-static="+version)
	get.Dir = tmp
	if err := b.run(get); err != nil {
		return "", fmt.Errorf("downloading busybox-static: %w", err)
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "busybox-static_*.deb"))
	if len(debs) != 1 {
		return "", fmt.Errorf("apt-get download busybox-static left %d packages, not one", len(debs))
	}
	if err := b.run(exec.CommandContext(ctx, "dpkg-deb", "-x", debs[0], filepath.Join(tmp, "x"))); err != nil {
		return "", err
	}
	if err := os.Rename(filepath.Join(tmp, "x"), dir); err != nil {
		return "", err
	}
	return bin, nil
}

// app makes the application image's root file system with debootstrap (installed with apt-get
// when missing), from the mirror apt uses for Suite. Its key is what it is made of: the suite,
// the variant and the packages (not the mirror's state: a newer point release does not rebuild it).
func (b *Builder) app() (string, func(context.Context, string) (v1.Image, error)) {
	key := hashOf("app", layoutVersion, Suite, Variant, runtime.GOARCH, strings.Join(AppPackages(), ","))
	return key, func(ctx context.Context, work string) (v1.Image, error) {
		if os.Geteuid() != 0 {
			return nil, errors.New("debootstrap needs root: run make real-pod-images as root")
		}
		if _, err := exec.LookPath("debootstrap"); err != nil {
			b.logf("installing debootstrap with apt-get")
			if err := b.aptInstall(ctx, "debootstrap"); err != nil {
				return nil, err
			}
		}
		mirror, err := b.mirror(ctx)
		if err != nil {
			return nil, err
		}
		root := filepath.Join(work, "rootfs")
		b.logf("debootstrap --variant=%s %s from %s with %d packages (download-bound, minutes)", Variant, Suite, mirror, len(AppPackages()))
		cmd := exec.CommandContext(ctx, "debootstrap", "--variant="+Variant, "--include="+strings.Join(AppPackages(), ","), Suite, root, mirror)
		if err := b.run(cmd); err != nil {
			return nil, fmt.Errorf("debootstrap: %w", err)
		}
		// What apt downloaded and listed is not needed in the image.
		for _, glob := range []string{"var/cache/apt/archives/*.deb", "var/lib/apt/lists/*_Packages", "var/log/*.log", "var/log/apt/*"} {
			matches, _ := filepath.Glob(filepath.Join(root, glob))
			for _, m := range matches {
				if err := os.RemoveAll(m); err != nil {
					return nil, err
				}
			}
		}
		return image(work, []layer{{
			comment: fmt.Sprintf("debootstrap --variant=%s %s with %s", Variant, Suite, strings.Join(AppPackages(), " ")),
			trees:   []tree{{Src: root}},
		}}, v1.Config{
			Cmd: []string{"/bin/bash"},
			Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"},
		})
	}
}

// mirror returns the Debian mirror apt takes Suite's main component from.
func (b *Builder) mirror(ctx context.Context) (string, error) {
	policy, err := b.output(exec.CommandContext(ctx, "apt-cache", "policy"))
	if err != nil {
		return "", fmt.Errorf("finding apt's Debian mirror: %w", err)
	}
	sc := bufio.NewScanner(strings.NewReader(policy))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// " 500 http://deb.debian.org/debian bookworm/main amd64 Packages"
		if len(f) >= 3 && f[2] == Suite+"/main" && (strings.HasPrefix(f[1], "http://") || strings.HasPrefix(f[1], "https://")) {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("apt has no mirror of Debian %s main (apt-cache policy): configure one in /etc/apt/sources.list.d", Suite)
}

func (b *Builder) aptInstall(ctx context.Context, pkgs ...string) error {
	args := append([]string{"install", "-y", "-q", "--no-install-recommends"}, pkgs...)
	cmd := exec.CommandContext(ctx, "apt-get", args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if err := b.run(cmd); err == nil {
		return nil
	}
	if err := b.run(exec.CommandContext(ctx, "apt-get", "update", "-q")); err != nil {
		return err
	}
	cmd = exec.CommandContext(ctx, "apt-get", args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	return b.run(cmd)
}

// run runs cmd, its output kept and shown only when it fails.
func (b *Builder) run(cmd *exec.Cmd) error {
	var out bytes.Buffer
	if cmd.Stdout == nil {
		cmd.Stdout = &out
	}
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		tail := out.String()
		if len(tail) > 4000 {
			tail = "..." + tail[len(tail)-4000:]
		}
		return fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, tail)
	}
	return nil
}

func (b *Builder) output(cmd *exec.Cmd) (string, error) {
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := b.run(cmd); err != nil {
		return "", err
	}
	return out.String(), nil
}

// layer is one layer of an image.
type layer struct {
	comment string
	entries []entry
	trees   []tree
}

// image returns the image of layers on an empty base, with config; each layer's gzipped tar is
// written once, into work.
func image(work string, layers []layer, config v1.Config) (v1.Image, error) {
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	for i, l := range layers {
		path := filepath.Join(work, fmt.Sprintf("layer-%d.tar.gz", i))
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		err = writeLayer(f, l.entries, l.trees)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		ly, err := tarball.LayerFromFile(path, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, fmt.Errorf("reading back the layer %s: %w", path, err)
		}
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:     ly,
			MediaType: types.OCILayer,
			History:   v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "fluxfed e2e/realpods", Comment: l.comment},
		})
		if err != nil {
			return nil, fmt.Errorf("adding a layer: %w", err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", runtime.GOARCH, v1.Time{Time: epoch}
	if config.WorkingDir == "" {
		config.WorkingDir = "/"
	}
	cf.Config = config
	return mutate.ConfigFile(img, cf)
}

// writeArchive writes img, tagged ref, as a docker-archive tarball (what ctr images import
// takes) to path, through a temporary file in the same directory.
func writeArchive(path, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".image-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := tarball.Write(tag, img, f); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing the archive of %s: %w", ref, err)
	}
	if err := f.Chmod(0o644); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// hashTree returns a hash of the names, modes, link targets and contents of the files under dir.
func hashTree(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%o\x00", rel, info.Mode())
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s\x00", target)
		case d.Type().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := io.Copy(h, f); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hashing %s: %w", dir, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func hashOf(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func copyFile(src, dst string, mode os.FileMode) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, mode)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
