package realpods

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeTools writes a directory of executable shell scripts, name -> body, for PATH.
func fakeTools(t *testing.T, tools map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range tools {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	}
	return dir
}

// runInstall runs install-deps.sh with only path on PATH and cniPath as CNI_PATH.
func runInstall(t *testing.T, path, cniPath string) (stdout, stderr string, err error) {
	t.Helper()
	bash, lerr := exec.LookPath("bash")
	require.NoError(t, lerr)
	cmd := exec.Command(bash, "install-deps.sh")
	cmd.Env = []string{"PATH=" + path, "CNI_PATH=" + cniPath}
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

func TestInstallDepsNamesWhatIsMissingWhenItCannotInstall(t *testing.T) {
	notRoot := fakeTools(t, map[string]string{"id": "echo 1000"})
	_, stderr, err := runInstall(t, notRoot, "/nonexistent/cni")
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, 1, exit.ExitCode())
	require.Equal(t, `real-pod-deps: missing: containerd (no containerd or ctr on PATH)
real-pod-deps: missing: runc (no runc on PATH)
real-pod-deps: missing: containernetworking-plugins (no directory of CNI_PATH=/nonexistent/cni has bridge host-local loopback)
real-pod-deps: cannot install them here (not root); install them as root with: apt-get install -y containerd runc containernetworking-plugins
`, stderr)

	// Root, but no apt-get; runc alone is missing.
	rootNoApt := fakeTools(t, map[string]string{"id": "echo 0", "containerd": "exit 0", "ctr": "exit 0"})
	cni := fakeTools(t, map[string]string{"bridge": "", "host-local": "", "loopback": ""})
	_, stderr, err = runInstall(t, rootNoApt, "/nonexistent:"+cni)
	require.Error(t, err)
	require.Equal(t, `real-pod-deps: missing: runc (no runc on PATH)
real-pod-deps: cannot install them here (no apt-get); install them as root with: apt-get install -y runc
`, stderr)
}

func TestInstallDepsPrintsWhatItFound(t *testing.T) {
	tools := fakeTools(t, map[string]string{
		"id":         "echo 1000",
		"containerd": "echo containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3",
		"ctr":        "exit 0",
		"runc":       "echo runc version 1.1.5+ds1; echo commit: 1.1.5+ds1-1+deb12u1",
		"dpkg-query": `[ "$*" = "-W -f \${Version} containernetworking-plugins" ] && printf 1.1.1+ds1-3+b5`,
		// Nothing may be installed when all is there.
		"apt-get": "echo apt-get must not run >&2; exit 3",
	})
	cni := fakeTools(t, map[string]string{"bridge": "", "host-local": "", "loopback": ""})
	stdout, stderr, err := runInstall(t, tools, "/nonexistent:"+cni)
	require.NoError(t, err, stderr)
	require.Equal(t, cni+"\n", stdout)
	require.Equal(t, `real-pod-deps: containerd 1.6.20~ds1 (`+tools+`/containerd, `+tools+`/ctr)
real-pod-deps: runc 1.1.5+ds1 (`+tools+`/runc)
real-pod-deps: CNI plugins 1.1.1+ds1-3+b5 (bridge host-local loopback in `+cni+`)
`, stderr)
}
