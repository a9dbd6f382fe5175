package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/fluxfed/fluxfed/internal/image"
	"github.com/fluxfed/fluxfed/internal/manager"
	"github.com/fluxfed/fluxfed/internal/manager/hubmanager"
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

// TestEachInstallRunsItsBinaryWithItsFlags: deploy/default and deploy/manager run the
// MiniCluster operator alone, /fluxfed-manager, and deploy/hub runs `/fluxfed manager --hub`
// (the binaries internal/image puts in the image); every argument is a flag of the binary it is
// given to.
func TestEachInstallRunsItsBinaryWithItsFlags(t *testing.T) {
	flagsOf := func(hub bool) []string {
		var o manager.Options
		var h hubmanager.Options
		fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
		o.BindGeneral(fs)
		o.BindLogging(fs)
		if hub {
			h.Bind(fs)
		}
		var names []string
		fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
		return names
	}
	for dir, hub := range map[string]bool{"default": false, "manager": false, "hub": true} {
		var ctrs []corev1.Container
		for _, o := range kustomize(t, dir) {
			if o.GetKind() != "Deployment" {
				continue
			}
			var d appsv1.Deployment
			require.NoError(t, k8sruntime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d))
			ctrs = append(ctrs, d.Spec.Template.Spec.Containers...)
		}
		require.Len(t, ctrs, 1, "deploy/%s", dir)
		ctr := ctrs[0]
		args := ctr.Args
		if hub {
			require.Equal(t, []string{image.BinaryPath}, ctr.Command, "deploy/%s", dir)
			require.Equal(t, "manager", args[0], "deploy/%s", dir)
			require.Contains(t, args, "--hub", "deploy/%s", dir)
			args = args[1:]
		} else {
			require.Equal(t, []string{image.ManagerPath}, ctr.Command, "deploy/%s", dir)
		}
		flags := flagsOf(hub)
		for _, a := range args {
			require.True(t, strings.HasPrefix(a, "--"), "deploy/%s: %s is not a flag", dir, a)
			name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			require.Contains(t, flags, name, "deploy/%s: %s is not a flag of %s", dir, a, ctr.Command[0])
		}
	}
}
