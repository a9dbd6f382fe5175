package realnode

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

func testNode() *Node {
	return &Node{
		Name: "127.101.0.2", Dir: "/run/x/nodes/127.101.0.2", Bridge: "cbr2", PodCIDR: "10.1.2.0/24",
		ClusterDNS: "10.1.250.10", PauseImage: "fluxfed.test/pause:1", Cgroup: "/fluxfed-realnode/abc/node-2",
		Kubeconfig: "/k/kubeconfig", ClientCA: "/k/ca.crt", TLSCert: "/k/kubelet.crt", TLSKey: "/k/kubelet.key",
		Labels: map[string]string{"b": "2", "a": "1"},
	}
}

// The settings that get past this machine's walls (../shared/REAL-PODS.md) are in the files.
func TestContainerdConfig(t *testing.T) {
	got := testNode().ContainerdConfig()
	for _, want := range []string{
		`root = "/run/x/nodes/127.101.0.2/containerd/root"`,
		`state = "/run/x/nodes/127.101.0.2/containerd/state"`,
		`address = "/run/x/nodes/127.101.0.2/containerd.sock"`,
		`sandbox_image = "fluxfed.test/pause:1"`,
		"restrict_oom_score_adj = true",
		"netns_mounts_under_state_dir = true",
		`snapshotter = "overlayfs"`,
		"SystemdCgroup = false",
		`bin_dir = "/usr/lib/cni"`,
		`conf_dir = "/run/x/nodes/127.101.0.2/cni"`,
	} {
		require.Contains(t, got, want)
	}
}

func TestKubeletConfig(t *testing.T) {
	data, err := testNode().KubeletConfig()
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, yaml.Unmarshal(data, &got))
	for key, want := range map[string]any{
		"kind":                     "KubeletConfiguration",
		"cgroupDriver":             "cgroupfs",
		"failCgroupV1":             false,
		"failSwapOn":               false,
		"cgroupRoot":               "/fluxfed-realnode/abc/node-2/pods",
		"containerRuntimeEndpoint": "unix:///run/x/nodes/127.101.0.2/containerd.sock",
		"address":                  "127.101.0.2",
		"healthzBindAddress":       "127.101.0.2",
		"clusterDNS":               []any{"10.1.250.10"},
		"clusterDomain":            "cluster.local",
		"resolvConf":               "",
	} {
		require.Equal(t, want, got[key], key)
	}
	require.Equal(t, []string{
		"--config=/run/x/nodes/127.101.0.2/kubelet.yaml",
		"--kubeconfig=/k/kubeconfig",
		"--hostname-override=127.101.0.2",
		"--root-dir=/run/x/nodes/127.101.0.2/kubelet",
		"--cert-dir=/run/x/nodes/127.101.0.2/kubelet-pki",
		"--v=1",
		"--node-labels=a=1,b=2",
	}, testNode().KubeletArgs())
}

func TestCNIConfig(t *testing.T) {
	data, err := testNode().CNIConfig()
	require.NoError(t, err)
	var got struct {
		Plugins []struct {
			Type, Bridge                string
			IsGateway, IsDefaultGateway bool
			IPMasq                      bool
			IPAM                        struct {
				Type    string
				Ranges  [][]struct{ Subnet string }
				DataDir string
			}
		}
	}
	require.NoError(t, json.Unmarshal(data, &got))
	require.Len(t, got.Plugins, 1)
	p := got.Plugins[0]
	require.Equal(t, "bridge", p.Type)
	require.Equal(t, "cbr2", p.Bridge)
	require.True(t, p.IsGateway && p.IsDefaultGateway)
	require.False(t, p.IPMasq, "nothing leaves the namespace, nothing to masquerade")
	require.Equal(t, "host-local", p.IPAM.Type)
	require.Equal(t, "10.1.2.0/24", p.IPAM.Ranges[0][0].Subnet)
	require.Equal(t, "/run/x/nodes/127.101.0.2/cni-ipam", p.IPAM.DataDir)
}

// The cluster's DNS serves its zone and forwards nothing.
func TestCorefile(t *testing.T) {
	got := Corefile("/k/admin")
	require.Contains(t, got, "kubernetes cluster.local {\n        kubeconfig /k/admin\n")
	require.NotContains(t, got, "forward")
	require.True(t, strings.HasPrefix(got, "cluster.local:53 {"), "only the cluster's zone: %s", got)
}

// The kubelet finds the kernel settings it wants already set, in its own mount namespace, and
// leaves the machine's alone.
func TestMaskKernelTunables(t *testing.T) {
	got := testNode().maskKernelTunables()
	for name, value := range kernelTunables {
		file := "/run/x/nodes/127.101.0.2/kernel-tunables/" + strings.ReplaceAll(name, "/", ".")
		require.Contains(t, got, "echo "+value+" > '"+file+"'\n")
		require.Contains(t, got, "mount --bind '"+file+"' '/proc/sys/"+name+"'\n")
	}
}
