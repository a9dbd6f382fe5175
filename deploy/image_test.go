package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fluxfed/fluxfed/internal/testenv"
)

// TestTheManifestsRunTheImageMakeImageBuilds: the manager's Deployment, as deploy/default and
// deploy/hub install it, names the image `make image` writes, whose tag is the release in VERSION.
func TestTheManifestsRunTheImageMakeImageBuilds(t *testing.T) {
	root := testenv.RepoRoot()
	b, err := os.ReadFile(filepath.Join(root, "VERSION"))
	require.NoError(t, err)
	version := strings.TrimSpace(string(b))
	require.Regexp(t, regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`), version, "VERSION holds a release such as v0.1.0")

	// What the Makefile builds, with none of its variables overridden from the environment.
	cmd := exec.Command("make", "--no-print-directory", "-s", "image-ref")
	cmd.Dir = root
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "REGISTRY", "IMAGE", "IMAGE_VERSION", "MAKEFLAGS", "MFLAGS", "MAKELEVEL":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.Output()
	require.NoError(t, err, "make image-ref")
	ref := strings.TrimSpace(string(out))
	require.Equal(t, "ghcr.io/fluxfed/fluxfed:"+version, ref)

	for _, dir := range []string{"default", "hub", "manager"} {
		var images []string
		for _, o := range kustomize(t, dir) {
			if o.GetKind() != "Deployment" {
				continue
			}
			containers, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			require.NoError(t, err)
			for _, c := range containers {
				images = append(images, c.(map[string]any)["image"].(string))
			}
		}
		require.Equal(t, []string{ref}, images, "deploy/%s", dir)
	}
}
