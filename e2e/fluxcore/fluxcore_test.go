package fluxcore

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseVersions(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	tests := []struct {
		name    string
		env     string
		want    Versions
		wantErr string
	}{
		{name: "both", env: "# c\nFLUX_CORE_VERSION=0.88.0\n\nFLUX_CORE_SHA256=" + sum + "\n", want: Versions{FluxCore: "0.88.0", SHA256: sum}},
		{name: "no checksum", env: "FLUX_CORE_VERSION=0.88.0\n", wantErr: "are required"},
		{name: "a short checksum", env: "FLUX_CORE_VERSION=0.88.0\nFLUX_CORE_SHA256=abc\n", wantErr: "64-digit"},
		{name: "not key=value", env: "FLUX_CORE_VERSION 0.88.0\n", wantErr: "not KEY=VALUE"},
		{name: "unknown key", env: "FLUX_SCHED_VERSION=0.50.0\n", wantErr: `unknown key "FLUX_SCHED_VERSION"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseVersions(tt.env)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestPinnedIsEmbedded(t *testing.T) {
	v := Pinned()
	require.Regexp(t, `^0\.\d+\.\d+$`, v.FluxCore)
	require.Regexp(t, `^[0-9a-f]{64}$`, v.SHA256)
}

func TestPrefixSaysHowToBuildWhatIsMissing(t *testing.T) {
	empty := t.TempDir()
	t.Setenv(EnvPrefix, empty)
	_, err := Prefix()
	require.ErrorContains(t, err, "make flux-core")
	require.ErrorContains(t, err, EnvPrefix)

	t.Setenv(EnvPrefix, "")
	t.Setenv(EnvCache, empty)
	_, err = Prefix()
	require.ErrorContains(t, err, filepath.Join(empty, Pinned().FluxCore))
	_, err = Shim()
	require.ErrorContains(t, err, "shim/eth0.c")
}

// TestTheBuildIsThePinnedRelease checks the flux-core that `make test` built (build.sh), and the
// shim beside it: flux answers with the pinned version, and a process that preloads the shim
// sees eth0 with the address it is given.
func TestTheBuildIsThePinnedRelease(t *testing.T) {
	prefix, err := Prefix()
	require.NoError(t, err)
	version, err := Version(prefix)
	require.NoError(t, err)
	require.Equal(t, Pinned().FluxCore, version)

	shim, err := Shim()
	require.NoError(t, err)
	cmd := exec.Command("ip", "-o", "-4", "address")
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+shim, "FLUXFED_ETH0=127.1.2.3")
	// ip lists addresses over netlink, not getifaddrs: the shim must not change what it sees.
	out, err := cmd.Output()
	require.NoError(t, err)
	require.NotContains(t, string(out), "127.1.2.3")

	// getifaddrs, called as libzmq calls it to find an interface's address.
	script := `
import ctypes, socket
class sockaddr_in(ctypes.Structure):
    _fields_ = [("family", ctypes.c_ushort), ("port", ctypes.c_ushort), ("addr", ctypes.c_ubyte * 4)]
class ifaddrs(ctypes.Structure):
    pass
ifaddrs._fields_ = [("next", ctypes.POINTER(ifaddrs)), ("name", ctypes.c_char_p), ("flags", ctypes.c_uint),
                    ("addr", ctypes.POINTER(sockaddr_in)), ("netmask", ctypes.c_void_p), ("ifu", ctypes.c_void_p), ("data", ctypes.c_void_p)]
libc = ctypes.CDLL(None)  # the process's symbols, as a program linked with libc sees them
head = ctypes.POINTER(ifaddrs)()
assert libc.getifaddrs(ctypes.byref(head)) == 0
node = head
while node:
    n = node.contents
    if n.addr and n.addr.contents.family == socket.AF_INET:
        print(n.name.decode(), ".".join(str(b) for b in n.addr.contents.addr))
    node = n.next
libc.freeifaddrs(head)
`
	py := exec.Command("python3", "-c", script)
	py.Env = append(os.Environ(), "LD_PRELOAD="+shim, "FLUXFED_ETH0=127.1.2.3")
	out, err = py.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.True(t, strings.HasPrefix(string(out), "eth0 127.1.2.3\n"), "eth0 comes first, with the address given: %s", out)
	require.Contains(t, string(out), "lo 127.0.0.1")

	py = exec.Command("python3", "-c", script)
	py.Env = append(os.Environ(), "LD_PRELOAD="+shim)
	out, err = py.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NotContains(t, string(out), "eth0 127.1.2.3", "without FLUXFED_ETH0 the shim adds nothing")
}
