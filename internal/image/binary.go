package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// BuildBinary builds ./cmd/fluxfed of the module at repoRoot into out as a static linux binary
// for goarch, stamped with version, the way the image needs it: no cgo, no file paths, no VCS
// stamp and no symbol table, so the same source builds to the same bytes.
func BuildBinary(ctx context.Context, repoRoot, out, version, goarch string) error {
	if strings.ContainsAny(version, " \t\n'\"") {
		return fmt.Errorf("building fluxfed: version %q has white space or quotes", version)
	}
	cmd := exec.CommandContext(ctx, "go", "build",
		"-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -buildid= -X main.version="+version,
		"-o", out, "./cmd/fluxfed")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building fluxfed for linux/%s: %w\n%s", goarch, err, b)
	}
	return nil
}
