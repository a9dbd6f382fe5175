//go:build realpods

package realpodlane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/e2e/clusters"
	"github.com/fluxfed/fluxfed/e2e/k8sbin"
	"github.com/fluxfed/fluxfed/e2e/lanetest"
	"github.com/fluxfed/fluxfed/e2e/realnode"
	"github.com/fluxfed/fluxfed/e2e/realpods"
)

func TestMain(m *testing.M) {
	// The manager's logs would bury the tests' own; the clusters' logs are kept when a test fails.
	ctrl.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// busyWait is how long a test waits for what real pods and brokers do in seconds on an idle
// machine: on a busy 2-core machine, with other packages' clusters beside them, it takes minutes.
const busyWait = 8 * time.Minute

// images returns the archives every real node imports, failing the test with what is missing and
// the make target that provides it when the machine cannot run real pods.
func images(t *testing.T) []string {
	t.Helper()
	var errs []error
	if err := realnode.CheckMachine(); err != nil {
		errs = append(errs, fmt.Errorf("%w\n(make real-pod-deps runs it)", err))
	}
	var archives []string
	for _, ref := range realpods.Images() {
		a, err := realpods.Archive(ref)
		errs = append(errs, err)
		archives = append(archives, a)
	}
	if _, err := k8sbin.Dir(k8sbin.Binaries()...); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("the real-pod lane cannot run here (make test installs and builds all of it first):\n%v", err)
	}
	return archives
}

// realCluster starts a local cluster named name whose nodes are all real, with fluxfed's CRD
// and the member reconciler running in this program.
func realCluster(t *testing.T, name string, nodes int) (*clusters.Cluster, client.Client) {
	t.Helper()
	archives := images(t)
	start := time.Now()
	env := clusters.StartT(t, clusters.Options{
		Names: []string{name}, RealNodes: nodes, RealNodeImages: archives, PauseImage: realpods.PauseImage,
		Timeout: busyWait, BeforeControllers: lanetest.InstallCRD,
	})
	c := env.Cluster(name)
	t.Logf("Cluster %s with %d real nodes up in %s (load average %s)", name, nodes, time.Since(start).Round(100*time.Millisecond), loadAverage())
	return c, lanetest.RunMember(t, c)
}

// realMiniCluster is a MiniCluster of size brokers running command in the real-pod images.
func realMiniCluster(name, namespace string, size int32, command string) *v1alpha2test.Builder {
	return v1alpha2test.MiniCluster(name).Namespace(namespace).Size(size).Command(command).
		Image(realpods.AppImage).Spec(func(s *fluxv1alpha2.MiniClusterSpec) {
		s.Containers[0].ImagePullPolicy = fluxv1alpha2.PullNever
		s.Flux.Container.Image = realpods.ViewImage
	})
}

// loadAverage is the machine's load average over 1, 5 and 15 minutes.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(data))[:3], " ")
}

// describeOnFailure logs, when the test failed, the MiniClusters, Jobs and pods of namespace as
// the cluster saw them, with every container's state as its kubelet reported it.
func describeOnFailure(t *testing.T, cl client.Client, namespace string) {
	t.Helper()
	lanetest.DescribeOnFailure(t, cl, namespace, func(p *corev1.Pod) {
		t.Logf("pod %s on %q: %s %s", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Message)
		for _, s := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
			t.Logf("  container %s: restarts %d, state %s, last %s", s.Name, s.RestartCount, describeState(s.State), describeState(s.LastTerminationState))
		}
	}, nil)
}

// describeState says what a container state is, as the kubelet reported it.
func describeState(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running since " + s.Running.StartedAt.Format(time.TimeOnly)
	case s.Waiting != nil:
		return fmt.Sprintf("waiting (%s: %s)", s.Waiting.Reason, s.Waiting.Message)
	case s.Terminated != nil:
		return fmt.Sprintf("terminated with %d (%s) signal %d: %q", s.Terminated.ExitCode, s.Terminated.Reason, s.Terminated.Signal, s.Terminated.Message)
	}
	return "none"
}

// containerLogs returns the logs of a pod's container, read through its kubelet.
func containerLogs(ctx context.Context, c *clusters.Cluster, namespace, pod, container string) string {
	out, err := exec.CommandContext(ctx, kubectl(), "--kubeconfig", c.Kubeconfig, "-n", namespace, "logs", pod, "-c", container).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("(kubectl logs: %v: %s)", err, out)
	}
	return string(out)
}

// kubectl is the path of the cached kubectl.
func kubectl() string {
	dir, err := k8sbin.Dir("kubectl")
	if err != nil {
		return "kubectl"
	}
	return filepath.Join(dir, "kubectl")
}
