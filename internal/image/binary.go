package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildBinaries builds the image's binaries (./cmd/fluxfed and ./cmd/fluxfed-manager of the
// module at repoRoot) into dir with BuildBinary and returns their contents.
func BuildBinaries(ctx context.Context, repoRoot, dir, version, goarch string) (Binaries, error) {
	var b Binaries
	for _, bin := range []struct {
		pkg, name string
		content   *[]byte
	}{
		{"./cmd/fluxfed", BinaryPath[1:], &b.Fluxfed},
		{"./cmd/fluxfed-manager", ManagerPath[1:], &b.Manager},
	} {
		out := filepath.Join(dir, bin.name)
		if err := BuildBinary(ctx, repoRoot, bin.pkg, out, version, goarch); err != nil {
			return Binaries{}, err
		}
		content, err := os.ReadFile(out)
		if err != nil {
			return Binaries{}, err
		}
		*bin.content = content
	}
	return b, nil
}

// BuildBinary builds the main package pkg (./cmd/...) of the module at repoRoot into out as a
// static linux binary for goarch, stamped with version, the way the image needs it: no cgo, no
// file paths, no VCS stamp and no symbol table, so the same source builds to the same bytes.
func BuildBinary(ctx context.Context, repoRoot, pkg, out, version, goarch string) error {
	if strings.ContainsAny(version, " \t\n'\"") {
		return fmt.Errorf("building %s: version %q has white space or quotes", pkg, version)
	}
	cmd := exec.CommandContext(ctx, "go", "build",
		"-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -buildid= -X main.version="+version,
		"-o", out, pkg)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s for linux/%s: %w\n%s", pkg, goarch, err, b)
	}
	return nil
}
