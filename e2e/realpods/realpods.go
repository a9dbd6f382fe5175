// Package realpods holds what real pods need on this machine besides the Kubernetes binaries: the
// names of the images the real-pod tests run, the archives of those images (built without a
// container engine, see Builder, and cached outside the tree), and the import of the archives into
// a node's containerd. install-deps.sh beside it installs containerd, runc and the CNI plugins.
//
// The images:
//   - ViewImage, the flux view: flux-core built for ViewPrefix (where the broker pods find Flux)
//     and laid out at ImageViewDir, which the MiniCluster's flux-view init container copies to
//     ViewPrefix, on a busybox base that gives that init container its shell and cp;
//   - AppImage, the application image the brokers run in: Debian bookworm (minbase) with the
//     libraries, Python modules and tools flux-core needs at run time, and no Flux of its own;
//   - PauseImage, the pod sandbox's image (containerd's sandbox_image): one static program.
//
// Nothing is ever pulled: every node imports the archives under these names, and pods that name
// them with a tag (imagePullPolicy IfNotPresent) find them there.
package realpods

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The images' references, as the MiniClusters and containerd's sandbox_image name them. The
// registry fluxfed.test is never contacted (.test is a reserved top-level domain).
const (
	// ViewImage is the flux view image; its tag is flux-core's version (e2e/fluxcore/versions.env).
	ViewImage = "fluxfed.test/flux-view:0.88.0"
	// AppImage is the application image: Debian bookworm with flux-core's run-time dependencies.
	AppImage = "fluxfed.test/flux-app:bookworm"
	// PauseImage is the sandbox image of every pod (containerd's sandbox_image).
	PauseImage = "fluxfed.test/pause:3.10"
)

// ViewPrefix is where the containers of a broker pod find Flux: the flux view under the default
// mount path of the shared volume (member/render/names.DefaultMountPath + "/view"). The view
// image's flux-core is configured for this prefix.
const ViewPrefix = "/mnt/flux/view"

// ImageViewDir is where the view image keeps the view, which the flux-view init container copies
// to ViewPrefix (member/render/scripts/templates/provision.sh.tmpl).
const ImageViewDir = "/opt/view"

// Images returns the references of every image, in the order they are built and imported.
func Images() []string { return []string{PauseImage, ViewImage, AppImage} }

// EnvCache names the variable that overrides the directory of the image archives.
const EnvCache = "FLUXFED_IMAGE_CACHE"

// CacheDir returns where the image archives are: $FLUXFED_IMAGE_CACHE, by default
// ~/.cache/fluxfed/images.
func CacheDir() (string, error) {
	if dir := os.Getenv(EnvCache); dir != "" {
		return dir, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the user cache directory: %w", err)
	}
	return filepath.Join(base, "fluxfed", "images"), nil
}

// archiveName returns the file name of ref's archive: fluxfed.test/flux-view:0.88.0 is
// flux-view_0.88.0.tar.
func archiveName(ref string) string {
	return strings.ReplaceAll(strings.TrimPrefix(ref, "fluxfed.test/"), ":", "_") + ".tar"
}

// Archive returns the path of the archive of ref, one of Images(), in the cache. The error says
// how to build it when it is missing.
func Archive(ref string) (string, error) {
	dir, err := CacheDir()
	if err != nil {
		return "", err
	}
	return archiveIn(dir, ref)
}

func archiveIn(dir, ref string) (string, error) {
	known := false
	for _, r := range Images() {
		known = known || r == ref
	}
	if !known {
		return "", fmt.Errorf("%s is not one of the real-pod images (%s)", ref, strings.Join(Images(), ", "))
	}
	path := filepath.Join(dir, archiveName(ref))
	if info, err := os.Stat(path); err != nil || info.Size() == 0 {
		return "", fmt.Errorf("the archive of %s (%s) is missing: run `make real-pod-images` to build it (the application image takes about 7 minutes the first time)", ref, path)
	}
	return path, nil
}

// Namespace is the containerd namespace the kubelet's CRI uses, where images must be for pods.
const Namespace = "k8s.io"

// Import imports the image archive at archive into the containerd listening on the socket
// address, in Namespace, with ctr (the path of the ctr command, or "ctr" to find it on PATH).
func Import(ctx context.Context, ctr, address, archive string) error {
	out, err := exec.CommandContext(ctx, ctr, "--address", address, "-n", Namespace, "images", "import", archive).CombinedOutput()
	if err != nil {
		return fmt.Errorf("importing %s into the containerd at %s: %w: %s", archive, address, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ImportAll imports every image of Images() from the cache into the containerd listening on
// address, PauseImage first: import it before the kubelet starts, since it is the sandbox image.
func ImportAll(ctx context.Context, ctr, address string) error {
	var errs []error
	for _, ref := range Images() {
		archive, err := Archive(ref)
		if err == nil {
			err = Import(ctx, ctr, address, archive)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
