package realnode

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Programs lists the programs of this machine that real nodes need, with what provides each:
// the lead of a clear error when one is missing.
var Programs = map[string]string{
	"containerd": "apt-get install -y containerd",
	"ctr":        "apt-get install -y containerd",
	"runc":       "apt-get install -y runc",
	"nsenter":    "apt-get install -y util-linux",
	"unshare":    "apt-get install -y util-linux",
	"ip":         "apt-get install -y iproute2",
}

// CNIPlugins are the CNI plugins the nodes use, in CNIBinDir.
var CNIPlugins = []string{"bridge", "host-local", "loopback"}

// CheckMachine returns an error naming everything real nodes need that this machine lacks,
// and the command that provides it: root, the programs, the CNI plugins, cgroup hierarchies.
func CheckMachine() error {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (real nodes mount, create network namespaces and cgroups; run the tests as root)")
	}
	for _, name := range []string{"containerd", "ctr", "runc", "nsenter", "unshare", "ip"} {
		if _, err := exec.LookPath(name); err != nil {
			missing = append(missing, fmt.Sprintf("%s in PATH (%s)", name, Programs[name]))
		}
	}
	for _, name := range CNIPlugins {
		if _, err := os.Stat(filepath.Join(CNIBinDir, name)); err != nil {
			missing = append(missing, fmt.Sprintf("the %s CNI plugin in %s (apt-get install -y containernetworking-plugins)", name, CNIBinDir))
		}
	}
	if mounts, err := cgroupMounts(); err != nil || len(mounts) == 0 {
		missing = append(missing, "mounted cgroup hierarchies under /sys/fs/cgroup")
	}
	if len(missing) > 0 {
		return fmt.Errorf("real nodes cannot run on this machine; missing:\n  %s\n(e2e/realpods/install-deps.sh installs containerd, runc and the CNI plugins)", strings.Join(missing, "\n  "))
	}
	return nil
}

// Prepare writes the node's configuration files and creates its cgroups.
func (n *Node) Prepare() error {
	cni, err := n.CNIConfig()
	if err != nil {
		return err
	}
	kubelet, err := n.KubeletConfig()
	if err != nil {
		return err
	}
	for _, dir := range []string{n.Dir, n.CNIConfDir(), n.KubeletRootDir()} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	for path, data := range map[string][]byte{
		n.ContainerdConfigPath():                             []byte(n.ContainerdConfig()),
		filepath.Join(n.CNIConfDir(), "10-fluxfed.conflist"): cni,
		n.KubeletConfigPath():                                kubelet,
	} {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	for _, cg := range []string{n.RuntimeCgroup(), n.PodsCgroup()} {
		if err := createCgroup(cg); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	return nil
}

// ContainerdCommand is the command line that runs containerd for the node: in a mount namespace
// of its own (private, so that its mounts stay there; a tmpfs on /run/containerd, where the
// shims put their sockets), in the node's runtime cgroup, then in the network namespace netns.
// The process ends up running containerd itself under the same PID.
func (n *Node) ContainerdCommand(netns, containerd string) ([]string, error) {
	enter, err := joinCgroup(n.RuntimeCgroup())
	if err != nil {
		return nil, err
	}
	script := enter + "mkdir -p /run/containerd\nmount -t tmpfs -o mode=0711 fluxfed-realnode /run/containerd\n" +
		n.maskKernelTunables() +
		"exec nsenter --net=" + quote(netns) + " -- " + quote(containerd) + " --config " + quote(n.ContainerdConfigPath()) + "\n"
	return []string{"unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script}, nil
}

// kernelTunables are the kernel settings the kubelet sets when they differ (it does not take
// no for an answer: with protectKernelDefaults it refuses to start instead). They belong to the
// whole machine, not to a namespace, so the kubelet must not change them here.
var kernelTunables = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// maskKernelTunables is shell that shows, in the node's mount namespace only, a file with the
// value the kubelet wants over each of kernelTunables in /proc/sys: it reads them, finds
// nothing to change, and the machine's settings stay as they are.
func (n *Node) maskKernelTunables() string {
	names := slices.Sorted(maps.Keys(kernelTunables))
	dir := filepath.Join(n.Dir, "kernel-tunables")
	var b strings.Builder
	b.WriteString("mkdir -p " + quote(dir) + "\n")
	for _, name := range names {
		file := filepath.Join(dir, strings.ReplaceAll(name, "/", "."))
		b.WriteString("echo " + kernelTunables[name] + " > " + quote(file) + "\n")
		b.WriteString("mount --bind " + quote(file) + " " + quote("/proc/sys/"+name) + "\n")
	}
	return b.String()
}

// KubeletCommand is the command line that runs the kubelet for the node: in containerd's
// mount namespace (the containers bind its volumes), in the node's runtime cgroup, in netns.
func (n *Node) KubeletCommand(netns, kubelet string, containerdPID int) ([]string, error) {
	enter, err := joinCgroup(n.RuntimeCgroup())
	if err != nil {
		return nil, err
	}
	script := enter + "exec nsenter --mount=/proc/" + strconv.Itoa(containerdPID) + "/ns/mnt --net=" + quote(netns) + " -- " + quote(kubelet)
	for _, a := range n.KubeletArgs() {
		script += " " + quote(a)
	}
	return []string{"/bin/sh", "-c", script + "\n"}, nil
}

// DNSCommand is the command line that runs CoreDNS with corefile in netns, in cgroup.
func DNSCommand(netns, cgroup, coredns, corefile string) ([]string, error) {
	if err := createCgroup(cgroup); err != nil {
		return nil, err
	}
	enter, err := joinCgroup(cgroup)
	if err != nil {
		return nil, err
	}
	script := enter + "exec nsenter --net=" + quote(netns) + " -- " + quote(coredns) + " -conf " + quote(corefile) + "\n"
	return []string{"/bin/sh", "-c", script}, nil
}

// Corefile serves the zone cluster.local from the API server (the kubernetes plugin, through
// kubeconfig), and nothing else: there is no forward plugin, so a name outside the zone is
// refused, never passed on. It listens on port 53 of every address of the sandbox (the CoreDNS
// of e2e/k8sbin has no bind plugin), among them the cluster DNS address on its lo.
func Corefile(kubeconfig string) string {
	return fmt.Sprintf("cluster.local:53 {\n    errors\n    kubernetes cluster.local {\n        kubeconfig %s\n    }\n}\n", kubeconfig)
}

// joinCgroup is shell that moves the shell itself into cgroup in every v1 hierarchy, so that
// what it execs, and everything that starts, runs there.
func joinCgroup(cgroup string) (string, error) {
	files, err := cgroupProcsFiles(cgroup)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("set -e\n")
	for _, f := range files {
		b.WriteString("echo $$ > " + quote(f) + "\n")
	}
	return b.String(), nil
}

// quote quotes s for the shell.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// SetupNetwork turns forwarding on in the sandbox's namespace, so that the nodes' bridges route
// to each other, and gives its lo the cluster DNS address, where CoreDNS listens and the pods,
// through their bridges' gateway, reach it: an address on lo leads nowhere else.
func SetupNetwork(ctx context.Context, netns string, dns netip.Addr) error {
	// /proc/sys/net follows the network namespace of the thread that opens it.
	if err := inNetns(netns, func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0o644)
	}); err != nil {
		return fmt.Errorf("turning forwarding on in %s: %w", netns, err)
	}
	cmd := exec.CommandContext(ctx, "nsenter", "--net="+netns, "--", "ip", "addr", "add", dns.String()+"/32", "dev", "lo")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("giving lo of %s the cluster DNS address %s: %w: %s", netns, dns, err, out)
	}
	return nil
}

// ImportImages imports image archives (docker-archive or OCI layout tarballs) into the
// containerd at socket, in the namespace the kubelet uses, under the names they carry.
func ImportImages(ctx context.Context, socket string, archives []string) error {
	var errs []error
	for _, a := range archives {
		cmd := exec.CommandContext(ctx, "ctr", "--address", socket, "--namespace", "k8s.io", "images", "import", a)
		if out, err := cmd.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("importing %s into %s: %w: %s", a, socket, err, out))
		}
	}
	return errors.Join(errs...)
}
