//go:build realpods

// The test of this file imports the images into a containerd of its own and runs them. It needs
// root, containerd, ctr and runc (install-deps.sh) and the archives (make real-pod-images): its
// build tag keeps it out of a plain go test. make test and make real-pod-test install and build
// all that first and run it with -tags realpods.

package realpods

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/e2e/fluxcore"
	"github.com/fluxfed/fluxfed/member/render/names"
	"github.com/fluxfed/fluxfed/member/render/scripts"
)

// TestImagesRunInContainerd imports every image into a containerd started for the test, runs the
// provisioner a MiniCluster renders in the view image, as the flux-view init container does, then
// flux from the copied view in the application image, as the broker containers do; every
// program and library of the view must find every library it links there. The containers have
// no network (a network namespace of their own with only loopback).
func TestImagesRunInContainerd(t *testing.T) {
	require.Zero(t, os.Geteuid(), "this test starts containerd and containers: run it as root (make real-pod-test)")
	for _, tool := range []string{"containerd", "ctr", "runc"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "%s is missing: run e2e/realpods/install-deps.sh (make real-pod-deps)", tool)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	address := startContainerd(ctx, t)

	for _, ref := range Images() {
		archive, err := Archive(ref)
		require.NoError(t, err)
		start := time.Now()
		require.NoError(t, Import(ctx, "ctr", address, archive))
		t.Logf("imported %s in %s", ref, time.Since(start).Round(time.Millisecond))
	}
	listed := ctrOut(ctx, t, address, "images", "ls", "-q")
	for _, ref := range Images() {
		require.Contains(t, strings.Fields(listed), ref)
	}

	// The provisioner of a MiniCluster, with its ConfigMaps and Secret as files.
	mc := v1alpha2test.MiniCluster("h2").Image(AppImage).Obj()
	data, err := scripts.Render(mc, scripts.Inputs{Hostlist: "h2-0"})
	require.NoError(t, err)
	dirs := map[string]string{}
	for _, d := range []string{names.EntrypointMountPath, names.ConfigMountPath, names.CurveMountPath, names.DefaultMountPath} {
		dirs[d] = t.TempDir()
	}
	require.NoError(t, os.WriteFile(filepath.Join(dirs[names.EntrypointMountPath], scripts.ProvisionerKey), []byte(data[scripts.ProvisionerKey]), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dirs[names.ConfigMountPath], names.KeyBrokerTOML), []byte("[bootstrap]\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dirs[names.ConfigMountPath], names.KeyHostlist), []byte("h2-0\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dirs[names.CurveMountPath], names.KeyCurveCert), []byte("not a real certificate\n"), 0o400))
	mounts := func(readOnly ...string) []string {
		var args []string
		for dst, src := range dirs {
			opt := "rbind:rw"
			for _, r := range readOnly {
				if r == dst {
					opt = "rbind:ro"
				}
			}
			args = append(args, "--mount", fmt.Sprintf("type=bind,src=%s,dst=%s,options=%s", src, dst, opt))
		}
		return args
	}
	ro := []string{names.EntrypointMountPath, names.ConfigMountPath, names.CurveMountPath}

	out := ctrRun(ctx, t, address, mounts(ro...), ViewImage, "flux-view", scripts.ProvisionerCommand()...)
	require.Contains(t, out, "fluxfed provisioner: The shared volume is ready")
	require.FileExists(t, filepath.Join(dirs[names.DefaultMountPath], "view", "bin", "flux"))
	require.FileExists(t, filepath.Join(dirs[names.DefaultMountPath], "view", "etc", "flux", "config", "broker.toml"))

	out = ctrRun(ctx, t, address, mounts(ro...), AppImage, "flux-version", ViewPrefix+"/bin/flux", "version")
	require.Regexp(t, `(?m)^commands:\s+`+fluxcore.Pinned().FluxCore+`$`, out)
	require.Regexp(t, `(?m)^libflux-core:\s+`+fluxcore.Pinned().FluxCore+`$`, out)

	// Every ELF file of the view, run through ldd in the application image: no "not found".
	out = ctrRun(ctx, t, address, mounts(ro...), AppImage, "flux-ldd", "/bin/bash", "-c",
		`n=0; while read -r f; do
			if head -c4 "$f" | grep -q ELF; then n=$((n+1)); ldd "$f" 2>&1 | sed -n "s|^|$f: |; /not found/p"; fi
		done < <(find `+ViewPrefix+` -type f \( -perm -u+x -o -name '*.so*' \)); echo "checked $n"`)
	require.NotContains(t, out, "not found")
	require.Regexp(t, `checked [1-9][0-9]+`, out)
	// A Python command of flux, which needs the Python modules of the image.
	out = ctrRun(ctx, t, address, mounts(ro...), AppImage, "flux-python", ViewPrefix+"/bin/flux", "python", "-c", "import flux, flux.job, flux.constraint.parser, yaml, _cffi_backend; print('python ok')")
	require.Contains(t, out, "python ok")
	// flux-view.sh, which users source in a broker pod, finds the view's flux and Python bindings.
	out = ctrRun(ctx, t, address, mounts(ro...), AppImage, "flux-view-sh", "/bin/bash", "-c",
		`. `+names.DefaultMountPath+`/flux-view.sh && command -v flux && python3 -c 'import flux; print(flux.__file__)'`)
	require.Contains(t, out, ViewPrefix+"/bin/flux\n")
	require.Contains(t, out, ViewPrefix+"/lib/python3")
	// A broker of its own, and a job through the job shell (Lua): the run-time of Flux is all there.
	out = ctrRun(ctx, t, address, mounts(ro...), AppImage, "flux-start", ViewPrefix+"/bin/flux", "start", "--test-size=1",
		ViewPrefix+"/bin/flux", "run", "echo", "a job ran")
	require.Contains(t, out, "a job ran")

	// The pause program waits until it is told to stop, and then exits 0.
	pauseID := uniqueID("pause")
	pause := exec.CommandContext(ctx, "ctr", "--address", address, "-n", Namespace, "run", "--rm", PauseImage, pauseID)
	var pauseOut strings.Builder
	pause.Stdout, pause.Stderr = &pauseOut, &pauseOut
	require.NoError(t, pause.Start())
	require.Eventually(t, func() bool {
		return strings.Contains(ctrOut(ctx, t, address, "tasks", "ls"), "RUNNING")
	}, time.Minute, 200*time.Millisecond, "the pause task never ran")
	ctrOut(ctx, t, address, "tasks", "kill", "-s", "SIGTERM", pauseID)
	require.NoError(t, pause.Wait(), "pause: %s", pauseOut.String())
}

// startContainerd starts a containerd with its root, state and socket under a directory of the
// test, and returns the socket's address.
func startContainerd(ctx context.Context, t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "h2ctd-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	address := filepath.Join(dir, "containerd.sock")
	config := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %[3]q
[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), address, filepath.Join(dir, "opt"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.toml"), []byte(config), 0o644))
	logFile, err := os.Create(filepath.Join(dir, "containerd.log"))
	require.NoError(t, err)
	cmd := exec.Command("containerd", "--config", filepath.Join(dir, "config.toml"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = logFile.Close()
		if t.Failed() {
			log, _ := os.ReadFile(logFile.Name())
			t.Logf("containerd's log:\n%s", log)
		}
	})
	require.Eventually(t, func() bool {
		return exec.CommandContext(ctx, "ctr", "--address", address, "version").Run() == nil
	}, 30*time.Second, 100*time.Millisecond, "containerd did not answer on %s", address)
	return address
}

func ctrOut(ctx context.Context, t *testing.T, address string, args ...string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, "ctr", append([]string{"--address", address, "-n", Namespace}, args...)...).CombinedOutput()
	require.NoError(t, err, "ctr %s: %s", strings.Join(args, " "), out)
	return string(out)
}

// ctrRun runs command in a new container of image, removed when it ends, with no network. The
// container's ID ends with this process's ID: runc keeps its state by namespace and ID in one
// directory for every containerd of the machine (/run/containerd/runc/k8s.io), which the real
// nodes of other tests share.
func ctrRun(ctx context.Context, t *testing.T, address string, mounts []string, image, id string, command ...string) string {
	t.Helper()
	args := append([]string{"run", "--rm"}, mounts...)
	args = append(args, image, uniqueID(id))
	out := ctrOut(ctx, t, address, append(args, command...)...)
	t.Logf("%s in %s:\n%s", strings.Join(command, " "), image, out)
	return out
}

func uniqueID(id string) string { return fmt.Sprintf("realpods-%s-%d", id, os.Getpid()) }
