//go:build realnode

package realnode

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// requireRoot fails the test, naming what is missing, where real nodes cannot work.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("these tests create network namespaces and cgroups: run them as root (sudo go test -tags realnode ./e2e/realnode)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("ip is not in PATH: apt-get install -y iproute2")
	}
}

// ipIn runs ip with args in the network namespace pinned at netns.
func ipIn(t *testing.T, netns string, args ...string) {
	t.Helper()
	out, err := exec.Command("nsenter", append([]string{"--net=" + netns, "--", "ip"}, args...)...).CombinedOutput()
	require.NoError(t, err, "ip %v: %s", args, out)
}

func TestCreateNetnsHasOnlyLoopback(t *testing.T) {
	requireRoot(t)
	path := filepath.Join(t.TempDir(), "netns")
	require.NoError(t, CreateNetns(path))
	t.Cleanup(func() { require.NoError(t, RemoveNetns(path)) })
	require.NoError(t, CheckIsolated(path))

	out, err := exec.Command("nsenter", "--net="+path, "--", "ip", "-o", "link").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Regexp(t, `^1: lo: <LOOPBACK,UP,LOWER_UP>[^\n]*\n$`, string(out))
}

func TestCheckIsolatedRefusesAWayOut(t *testing.T) {
	requireRoot(t)
	for _, tc := range []struct {
		name  string
		setup [][]string
		want  []string
	}{{
		name:  "an interface besides lo",
		setup: [][]string{{"link", "add", "uplink0", "type", "veth", "peer", "name", "uplink1"}},
		want:  []string{"it has interface uplink0 besides lo"},
	}, {
		// lo is the only interface: the route alone is refused.
		name:  "a default route",
		setup: [][]string{{"route", "add", "default", "dev", "lo"}},
		want:  []string{"it has a default route 0.0.0.0/0 dev lo"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "netns")
			require.NoError(t, CreateNetns(path))
			t.Cleanup(func() { require.NoError(t, RemoveNetns(path)) })
			for _, args := range tc.setup {
				ipIn(t, path, args...)
			}
			err := CheckIsolated(path)
			require.ErrorIs(t, err, ErrNotIsolated)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
			require.ErrorContains(t, err, "refusing to start anything in it")
			t.Logf("The error: %v", err)
		})
	}
}
