//go:build realnode

package clusters

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/fluxfed/fluxfed/e2e/netguard"
	"github.com/fluxfed/fluxfed/e2e/realnode"
	"github.com/fluxfed/fluxfed/e2e/realpods"
)

// testProbeImage is the image of these tests' pods: one static program, testdata/probe. Their
// sandboxes run the pause image of the real-pod lane (e2e/realpods).
const testProbeImage = "fluxfed.test/probe:1"

// testImages returns the archives the real nodes of these tests import: the pause image of
// e2e/realpods, and the probe image, built here.
func testImages(t *testing.T) []string {
	t.Helper()
	pause, err := realpods.Archive(realpods.PauseImage)
	require.NoError(t, err)
	return []string{pause, buildProbeImage(t)}
}

// buildProbeImage builds testdata/probe and packs it as the probe image.
func buildProbeImage(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "probe")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./testdata/probe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "building the probe: %s", out)
	data, err := os.ReadFile(bin)
	require.NoError(t, err)

	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "probe", Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}))
	_, err = tw.Write(data)
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar.Bytes())), nil })
	require.NoError(t, err)
	base, err := mutate.AppendLayers(empty.Image, layer)
	require.NoError(t, err)
	image := func(entrypoint ...string) v1.Image {
		img, err := mutate.Config(base, v1.Config{Entrypoint: entrypoint})
		require.NoError(t, err)
		img, err = mutate.ConfigFile(img, mustConfigFile(t, img))
		require.NoError(t, err)
		return img
	}
	probe, err := name.NewTag(testProbeImage)
	require.NoError(t, err)
	archive := filepath.Join(dir, "probe.tar")
	require.NoError(t, tarball.WriteToFile(archive, probe, image("/probe")))
	return archive
}

// mustConfigFile gives the image the platform containerd matches against this machine's.
func mustConfigFile(t *testing.T, img v1.Image) *v1.ConfigFile {
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	return cf
}

// requireRealNodePrereqs fails, naming what is missing and what provides it, where real nodes
// cannot run.
func requireRealNodePrereqs(t *testing.T) {
	t.Helper()
	if err := realnode.CheckMachine(); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatal("go is not in PATH: it builds the test image")
	}
}

// probePod is a pod that runs the probe with args on node, never restarted.
func probePod(name, node string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeName:                     node,
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: new(false),
			Containers: []corev1.Container{{
				Name: "probe", Image: testProbeImage, ImagePullPolicy: corev1.PullNever, Args: args,
			}},
		},
	}
}

// waitPod waits until done says so of pod name, and returns it.
func waitPod(t *testing.T, cs kubernetes.Interface, name string, timeout time.Duration, what string, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	require.Eventually(t, func() bool {
		got, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		pod = got
		return done(got)
	}, timeout, 200*time.Millisecond, "pod %s: %s; last seen: %+v", name, what, func() any {
		if pod == nil {
			return nil
		}
		return pod.Status
	}())
	return pod
}

func terminated(pod *corev1.Pod) *corev1.ContainerStateTerminated {
	if len(pod.Status.ContainerStatuses) == 0 {
		return nil
	}
	return pod.Status.ContainerStatuses[0].State.Terminated
}

func TestRealNodes(t *testing.T) {
	requireRealNodePrereqs(t)
	images := testImages(t)
	// Registered before StartT's, so run after the clusters stopped.
	var sandbox *realnode.Sandbox
	t.Cleanup(func() {
		if sandbox == nil {
			return
		}
		_, err := os.Stat(sandbox.Dir())
		require.ErrorIs(t, err, os.ErrNotExist, "the sandbox, with its network namespace, is gone")
		_, err = os.Stat(filepath.Join("/sys/fs/cgroup/memory", sandbox.Cgroup()))
		require.ErrorIs(t, err, os.ErrNotExist, "the sandbox's cgroup is gone")
	})
	start := time.Now()
	env := StartT(t, Options{
		Names: []string{"real"}, NodesPerCluster: 1, RealNodes: 2,
		RealNodeImages: images, PauseImage: realpods.PauseImage,
	})
	t.Logf("The cluster came up in %s", time.Since(start).Round(100*time.Millisecond))
	c := env.Cluster("real")
	sandbox = c.Sandbox
	cs, err := kubernetes.NewForConfig(c.Config)
	require.NoError(t, err)
	ctx := context.Background()

	require.Len(t, c.RealNodes, 2)
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: LabelRealNode + "=true"})
	require.NoError(t, err)
	require.Len(t, nodes.Items, 2)
	for _, n := range nodes.Items {
		require.True(t, nodeReady(&n), "node %s is not Ready", n.Name)
		require.Contains(t, n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: n.Name})
	}
	require.ElementsMatch(t, c.RealNodes, []string{nodes.Items[0].Name, nodes.Items[1].Name})
	require.Len(t, c.NodeAddresses, 3, "the simulated node and the real ones")
	node1, node2 := c.RealNodes[0], c.RealNodes[1]

	t.Run("the kubelet reports the exit code and the termination message", func(t *testing.T) {
		for i, node := range c.RealNodes {
			name := "exit-" + strconv.Itoa(i+1)
			created := time.Now()
			_, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, probePod(name, node, "exit", strconv.Itoa(3+i), "ended on "+node), metav1.CreateOptions{})
			require.NoError(t, err)
			pod := waitPod(t, cs, name, 2*time.Minute, "ends Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
			t.Logf("Pod %s on %s ended %s after its creation", name, node, time.Since(created).Round(100*time.Millisecond))
			term := terminated(pod)
			require.NotNil(t, term)
			require.Equal(t, int32(3+i), term.ExitCode)
			require.Equal(t, "ended on "+node, term.Message)
			require.Equal(t, node, pod.Status.HostIP)
			require.True(t, strings.HasPrefix(pod.Status.PodIP, "10."), "pod address %q", pod.Status.PodIP)
		}
	})

	// The server on node 2 is reached from node 1 by its name under the headless Service, as
	// the brokers of a MiniCluster reach each other.
	var server *corev1.Pod
	t.Run("a pod reaches a pod on another node by its headless Service name", func(t *testing.T) {
		_, err := cs.CoreV1().Services(metav1.NamespaceDefault).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "peers", Namespace: metav1.NamespaceDefault},
			Spec: corev1.ServiceSpec{
				ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"group": "peers"},
				Ports: []corev1.ServicePort{{Name: "probe", Port: 7000}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		s := probePod("server", node2, "serve", "7000")
		s.Labels["group"] = "peers"
		s.Spec.Hostname, s.Spec.Subdomain = "server", "peers"
		s.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "probe", ContainerPort: 7000}}
		created := time.Now()
		_, err = cs.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, s, metav1.CreateOptions{})
		require.NoError(t, err)
		server = waitPod(t, cs, "server", 2*time.Minute, "runs", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" })
		t.Logf("Pod server on %s Running %s after its creation", node2, time.Since(created).Round(100*time.Millisecond))

		_, err = cs.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, probePod("client", node1, "dial", "server.peers.default.svc.cluster.local:7000"), metav1.CreateOptions{})
		require.NoError(t, err)
		pod := waitPod(t, cs, "client", 3*time.Minute, "ends", func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		})
		term := terminated(pod)
		require.NotNil(t, term)
		require.Equal(t, "hello from server", term.Message, "exit code %d", term.ExitCode)
		require.Equal(t, corev1.PodSucceeded, pod.Status.Phase)

		// The API server reaches the kubelet for the logs, on the node's address.
		logs, err := cs.CoreV1().Pods(metav1.NamespaceDefault).GetLogs("server", &corev1.PodLogOptions{}).DoRaw(ctx)
		require.NoError(t, err)
		require.Contains(t, string(logs), "serving on [::]:7000")

		addrs, err := c.Resolver().LookupHost(ctx, "server.peers.default.svc.cluster.local")
		require.NoError(t, err)
		require.Equal(t, []string{server.Status.PodIP}, addrs)
	})

	t.Run("a NodePort reaches a pod on a real node", func(t *testing.T) {
		require.NotNil(t, server, "needs the server of the test before")
		svc, err := cs.CoreV1().Services(metav1.NamespaceDefault).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "server-np", Namespace: metav1.NamespaceDefault},
			Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "server"},
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("probe")}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		f, err := c.ForwardNodePortToPod(svc, server)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, f.Close()) })
		for _, addr := range f.Addrs() {
			conn, err := (&netguard.Dialer{}).DialContext(ctx, "tcp", addr)
			require.NoError(t, err)
			got, err := io.ReadAll(conn)
			require.NoError(t, err)
			require.NoError(t, conn.Close())
			require.Equal(t, "hello from server", string(got), "through %s", addr)
		}
	})

	t.Run("the cluster's DNS forwards nothing", func(t *testing.T) {
		_, err := c.Resolver().LookupHost(ctx, "example.com")
		var dnsErr *net.DNSError
		require.ErrorAs(t, err, &dnsErr)
		t.Logf("The cluster's DNS about example.com: %v", err)
	})

	t.Run("a deleted pod is killed after its grace period", func(t *testing.T) {
		const grace = 4
		p := probePod("stubborn", node1, "ignore-term")
		p.Spec.TerminationGracePeriodSeconds = new(int64(grace))
		_, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
		waitPod(t, cs, "stubborn", 2*time.Minute, "runs", func(p *corev1.Pod) bool {
			return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running != nil
		})
		deleted := time.Now()
		require.NoError(t, cs.CoreV1().Pods(metav1.NamespaceDefault).Delete(ctx, "stubborn", metav1.DeleteOptions{}))
		var last *corev1.Pod
		require.Eventually(t, func() bool {
			got, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, "stubborn", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true
			}
			if err == nil {
				last = got
			}
			return false
		}, 2*time.Minute, 100*time.Millisecond)
		gone := time.Since(deleted)
		t.Logf("The pod that ignores SIGTERM went %s after its deletion (grace period %ds)", gone.Round(100*time.Millisecond), grace)
		require.GreaterOrEqual(t, gone, grace*time.Second, "the pod went before its grace period ended")
		require.NotNil(t, last)
		if term := terminated(last); term != nil {
			require.Equal(t, int32(137), term.ExitCode, "killed by SIGKILL")
		}
	})

	// As `clusters down` does, from the state file: the cleanup registered first checks that
	// nothing of the sandbox is left.
	t.Run("Stop from the state file removes the real nodes", func(t *testing.T) {
		logNodeFigures(t, c)
		loaded, err := Load(env.Dir)
		require.NoError(t, err)
		require.Equal(t, c.Sandbox, loaded.Cluster("real").Sandbox)
		require.True(t, loaded.Running())
		require.NoError(t, loaded.Stop())
		require.False(t, loaded.Running())
		// This program reaps its children a moment after another one saw them end.
		for _, p := range c.Processes {
			require.Eventually(t, func() bool { return !p.Running() }, 10*time.Second, 20*time.Millisecond, "%s still runs", p.Component)
		}
	})
}

// logNodeFigures logs the memory of each real node's daemons, and the machine's load.
func logNodeFigures(t *testing.T, c *Cluster) {
	load, _ := os.ReadFile("/proc/loadavg")
	for _, p := range c.Processes {
		if !strings.HasPrefix(p.Component, componentContainerd) && !strings.HasPrefix(p.Component, componentKubelet) && p.Component != componentCoreDNS {
			continue
		}
		status, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/status")
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(status)) {
			if strings.HasPrefix(line, "VmRSS:") {
				t.Logf("%s: RSS %s (load average %s)", p.Component, strings.Join(strings.Fields(line)[1:], " "), strings.Join(strings.Fields(string(load))[:3], " "))
			}
		}
	}
}

// Real nodes instead of simulated ones, in two clusters at once: each cluster has its own
// sandbox, node addresses, pod range and DNS, and no kwok.
func TestRealNodesInTwoClusters(t *testing.T) {
	requireRealNodePrereqs(t)
	images := testImages(t)
	env := StartT(t, Options{Names: []string{"one", "two"}, RealNodes: 1, RealNodeImages: images, PauseImage: realpods.PauseImage})
	ctx := context.Background()
	var ips []string
	for _, c := range env.Clusters {
		require.Len(t, c.RealNodes, 1)
		require.Equal(t, c.RealNodes, c.NodeAddresses, "no simulated node")
		require.Nil(t, env.process(c, componentKwok), "no kwok without simulated nodes")
		cs, err := kubernetes.NewForConfig(c.Config)
		require.NoError(t, err)
		_, err = cs.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, probePod("done", c.RealNodes[0], "exit", "0", "done in "+c.Name), metav1.CreateOptions{})
		require.NoError(t, err)
		pod := waitPod(t, cs, "done", 2*time.Minute, "ends Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
		require.Equal(t, "done in "+c.Name, terminated(pod).Message)
		ips = append(ips, pod.Status.PodIP)
	}
	require.NotEqual(t, env.Clusters[0].Sandbox.ID, env.Clusters[1].Sandbox.ID)
	require.True(t, strings.HasPrefix(ips[0], "10.1.1."), ips[0])
	require.True(t, strings.HasPrefix(ips[1], "10.2.1."), ips[1])
}
