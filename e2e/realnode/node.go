package realnode

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// CNIBinDir is where Debian's containernetworking-plugins put the bridge, host-local and
// loopback plugins.
const CNIBinDir = "/usr/lib/cni"

// Node says how one real node runs: one containerd and one kubelet in the sandbox's network
// namespace, with everything they write under Dir.
type Node struct {
	// Name of the node, which is also its address: the kubelet takes an IP given as its host
	// name as the node's InternalIP, the only way to give a node a loopback address (it refuses
	// a loopback --node-ip).
	Name string
	// Dir holds the node's configuration, its daemons' state and their logs.
	Dir string
	// Bridge is the name of the node's bridge in the namespace, at most 15 characters.
	Bridge string
	// PodCIDR is the node's pod range, an IPv4 /24 outside 127.0.0.0/8 (the endpoint
	// controllers refuse loopback pod addresses).
	PodCIDR string
	// ClusterDNS is the address of the cluster's CoreDNS in the namespace.
	ClusterDNS string
	// PauseImage is containerd's sandbox image, imported before the kubelet starts.
	PauseImage string
	// Cgroup is the node's group (under the sandbox's); the daemons and shims run in
	// Cgroup/runtime, the pods under Cgroup/pods (the kubelet's cgroupRoot).
	Cgroup string
	// Kubeconfig reaches the API server as the node (system:node:<Name>).
	Kubeconfig string
	// ClientCA verifies client certificates presented to the kubelet; TLSCert and TLSKey are
	// its serving certificate, for the node's address, signed by the cluster's CA.
	ClientCA, TLSCert, TLSKey string
	// Labels are added to the node's.
	Labels map[string]string
}

// ContainerdConfigPath is containerd's configuration file.
func (n *Node) ContainerdConfigPath() string { return filepath.Join(n.Dir, "containerd.toml") }

// KubeletConfigPath is the kubelet's configuration file.
func (n *Node) KubeletConfigPath() string { return filepath.Join(n.Dir, "kubelet.yaml") }

// CNIConfDir holds the node's network configuration, which containerd reads.
func (n *Node) CNIConfDir() string { return filepath.Join(n.Dir, "cni") }

// Socket is containerd's socket, which the kubelet and ctr use.
func (n *Node) Socket() string { return filepath.Join(n.Dir, "containerd.sock") }

// KubeletRootDir is the kubelet's --root-dir: its pods' volumes, plugins and checkpoints.
func (n *Node) KubeletRootDir() string { return filepath.Join(n.Dir, "kubelet") }

// RuntimeCgroup is the group of the node's containerd, kubelet and shims.
func (n *Node) RuntimeCgroup() string { return n.Cgroup + "/runtime" }

// PodsCgroup is the kubelet's cgroupRoot, under which it puts the pods.
func (n *Node) PodsCgroup() string { return n.Cgroup + "/pods" }

// ContainerdConfig is containerd's configuration: its own root, state and socket; the CRI
// plugin with the sandbox image, restrict_oom_score_adj (nothing here may lower an
// oom_score_adj, which the kubelet asks for its pods' sandboxes), cgroupfs, overlayfs, and
// the node's bridge network; pod network namespaces under its state directory. The snapshotters
// and tracing that nothing here uses are off.
func (n *Node) ContainerdConfig() string {
	cri := `plugins."io.containerd.grpc.v1.cri"`
	var b strings.Builder
	fmt.Fprintf(&b, "version = 2\nroot = %q\nstate = %q\n", filepath.Join(n.Dir, "containerd", "root"), filepath.Join(n.Dir, "containerd", "state"))
	b.WriteString(`disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]` + "\n")
	fmt.Fprintf(&b, "\n[grpc]\n  address = %q\n\n[ttrpc]\n  address = %q\n", n.Socket(), n.Socket()+".ttrpc")
	fmt.Fprintf(&b, "\n[plugins.\"io.containerd.internal.v1.opt\"]\n  path = %q\n", filepath.Join(n.Dir, "containerd", "opt"))
	fmt.Fprintf(&b, "\n[%s]\n  sandbox_image = %q\n  restrict_oom_score_adj = true\n  netns_mounts_under_state_dir = true\n  disable_apparmor = true\n  stream_server_address = \"127.0.0.1\"\n  stream_server_port = \"0\"\n", cri, n.PauseImage)
	fmt.Fprintf(&b, "\n[%s.containerd]\n  snapshotter = \"overlayfs\"\n  default_runtime_name = \"runc\"\n", cri)
	fmt.Fprintf(&b, "\n[%s.containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n", cri)
	fmt.Fprintf(&b, "\n[%s.containerd.runtimes.runc.options]\n  SystemdCgroup = false\n", cri)
	fmt.Fprintf(&b, "\n[%s.cni]\n  bin_dir = %q\n  conf_dir = %q\n  max_conf_num = 1\n", cri, CNIBinDir, n.CNIConfDir())
	return b.String()
}

// CNIConfig is the node's network: a bridge, the gateway of its pods, which are given
// addresses of PodCIDR by host-local (its records under the node's directory) and routed
// through it. No masquerading: nothing leaves the namespace.
func (n *Node) CNIConfig() ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "fluxfed-" + n.Bridge,
		"plugins": []any{map[string]any{
			"type":             "bridge",
			"bridge":           n.Bridge,
			"isGateway":        true,
			"isDefaultGateway": true,
			"ipMasq":           false,
			"hairpinMode":      true,
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  []any{[]any{map[string]any{"subnet": n.PodCIDR}}},
				"dataDir": filepath.Join(n.Dir, "cni-ipam"),
			},
		}},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// KubeletConfig is the kubelet's configuration for this machine, where the kubelet's defaults
// fail (../shared/REAL-PODS.md): cgroup v1 allowed (failCgroupV1), cgroupfs, swap tolerated,
// a cgroupRoot of the harness's own. It serves on the node's address only; the API server
// reaches it there without a client certificate, so anonymous requests are allowed, as nothing
// but this machine's loopback can reach it. resolvConf is empty: pods get the cluster's DNS
// and nothing of the machine's. Images are never collected (nothing could pull them back) and
// eviction thresholds are low, for a shared disk.
func (n *Node) KubeletConfig() ([]byte, error) {
	conf := map[string]any{
		"apiVersion":               "kubelet.config.k8s.io/v1beta1",
		"kind":                     "KubeletConfiguration",
		"cgroupDriver":             "cgroupfs",
		"cgroupRoot":               n.PodsCgroup(),
		"failCgroupV1":             false,
		"failSwapOn":               false,
		"containerRuntimeEndpoint": "unix://" + n.Socket(),
		"address":                  n.Name,
		"port":                     10250,
		"readOnlyPort":             0,
		"healthzBindAddress":       n.Name,
		"healthzPort":              10248,
		"tlsCertFile":              n.TLSCert,
		"tlsPrivateKeyFile":        n.TLSKey,
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": true},
			"webhook":   map[string]any{"enabled": false},
			"x509":      map[string]any{"clientCAFile": n.ClientCA},
		},
		"authorization":               map[string]any{"mode": "AlwaysAllow"},
		"clusterDomain":               "cluster.local",
		"clusterDNS":                  []string{n.ClusterDNS},
		"resolvConf":                  "",
		"podLogsDir":                  filepath.Join(n.Dir, "pod-logs"),
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"evictionHard": map[string]string{
			"memory.available":  "1Mi",
			"nodefs.available":  "1%",
			"imagefs.available": "1%",
		},
		"serializeImagePulls":       false,
		"registerNode":              true,
		"nodeStatusUpdateFrequency": "5s",
		"syncFrequency":             "10s",
	}
	return yaml.Marshal(conf)
}

// KubeletArgs are the kubelet's flags: what its configuration file cannot say.
func (n *Node) KubeletArgs() []string {
	var labels []string
	for k, v := range n.Labels {
		labels = append(labels, k+"="+v)
	}
	args := []string{
		"--config=" + n.KubeletConfigPath(),
		"--kubeconfig=" + n.Kubeconfig,
		"--hostname-override=" + n.Name,
		"--root-dir=" + n.KubeletRootDir(),
		"--cert-dir=" + filepath.Join(n.Dir, "kubelet-pki"),
		"--v=1",
	}
	if len(labels) > 0 {
		slices.Sort(labels)
		args = append(args, "--node-labels="+strings.Join(labels, ","))
	}
	return args
}
