package clusters

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/fluxfed/fluxfed/e2e/netguard"
	"github.com/fluxfed/fluxfed/hub"
	"github.com/fluxfed/fluxfed/hub/members"
)

func TestMain(m *testing.M) { netguard.Main(m) }

// TestLocalClusters brings up two local clusters and checks what the e2e tests rely on: kubeconfigs
// the hub accepts, Ready nodes with loopback addresses of their own, a NodePort that answers on
// every node, Job pods that run and stay Running until told to finish, and a teardown that
// leaves no process behind.
func TestLocalClusters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two control planes")
	}
	env := StartT(t, Options{Names: []string{"hub", "member-a"}, Provider: ProviderLocal})
	require.Len(t, env.Clusters, 2)

	t.Run("kubeconfigs", func(t *testing.T) {
		for _, c := range env.Clusters {
			data, err := os.ReadFile(c.Kubeconfig)
			require.NoError(t, err)
			cfg, err := members.Check(data)
			require.NoError(t, err, "the hub must accept the kubeconfig of %s", c.Name)
			require.Equal(t, c.Config.Host, cfg.Host)
		}
		merged, err := clientcmd.LoadFromFile(env.Kubeconfig)
		require.NoError(t, err)
		require.Equal(t, "hub", merged.CurrentContext)
		require.Len(t, merged.Contexts, 2)
		for _, c := range env.Clusters {
			kctx := merged.Contexts[c.Name]
			require.NotNil(t, kctx, "context %s", c.Name)
			require.Equal(t, c.Config.Host, merged.Clusters[kctx.Cluster].Server)
		}
	})

	t.Run("nodes", func(t *testing.T) {
		seen := map[string]string{}
		for _, c := range env.Clusters {
			require.Len(t, c.NodeAddresses, DefaultNodesPerCluster, "cluster %s", c.Name)
			for _, addr := range c.NodeAddresses {
				require.NotNil(t, net.ParseIP(addr), addr)
				require.NoError(t, netguard.Allowed(addr), "nodes are on loopback")
				require.NotContains(t, seen, addr, "address %s of %s is also in %s", addr, c.Name, seen[addr])
				seen[addr] = c.Name
			}
			nodes, err := kubernetes.NewForConfigOrDie(c.Config).CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
			require.NoError(t, err)
			for i := range nodes.Items {
				require.True(t, nodeReady(&nodes.Items[i]), "node %s of %s", nodes.Items[i].Name, c.Name)
				require.Empty(t, nodes.Items[i].Spec.Taints, "node %s of %s", nodes.Items[i].Name, c.Name)
			}
		}
	})

	t.Run("a NodePort answers on every node", func(t *testing.T) {
		c := env.Cluster("hub")
		svc, err := kubernetes.NewForConfigOrDie(c.Config).CoreV1().Services(metav1.NamespaceDefault).Create(t.Context(), &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "lead-broker"},
			Spec: corev1.ServiceSpec{
				Type:     corev1.ServiceTypeNodePort,
				Selector: map[string]string{"app": "broker"},
				Ports:    []corev1.ServicePort{{Port: 8050}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.NotZero(t, svc.Spec.Ports[0].NodePort, "the API server assigned a node port")
		f, err := c.ForwardNodePort(svc, echoBackend(t))
		require.NoError(t, err)
		defer f.Close()
		require.Len(t, f.Addrs(), DefaultNodesPerCluster)
		for i, addr := range f.Addrs() {
			require.Equal(t, net.JoinHostPort(c.NodeAddresses[i], strconv.Itoa(int(svc.Spec.Ports[0].NodePort))), addr)
			conn, err := dialer.Dial("tcp", addr)
			require.NoError(t, err)
			_, err = conn.Write([]byte("broker?\n"))
			require.NoError(t, err)
			line, err := bufio.NewReader(conn).ReadString('\n')
			require.NoError(t, err)
			require.Equal(t, "BROKER? from 127.0.0.1\n", line)
			require.NoError(t, conn.Close())
		}
	})

	t.Run("exec runs on this machine for the pods an exec rule names", func(t *testing.T) {
		c := env.Cluster("member-a")
		cs := kubernetes.NewForConfigOrDie(c.Config)
		pod, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Create(t.Context(), &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "lead-0"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "broker", Image: "example.invalid/flux:none"}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		eventually(t, "a Running pod", func() error {
			p, err := cs.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Status.Phase != corev1.PodRunning {
				return errors.New("pod is " + string(p.Status.Phase))
			}
			return nil
		})
		exec, err := hub.NewExec(c.Config)
		require.NoError(t, err)
		_, err = exec(t.Context(), pod.Namespace, pod.Name, "broker", []string{"true"})
		require.ErrorContains(t, err, "no exec found", "no rule names the pod yet")

		dir := t.TempDir()
		require.NoError(t, c.ExecLocally(t.Context(), pod.Namespace, pod.Name, dir, map[string]string{"GREETING": "hello"}))
		eventually(t, "kwok to learn the rule", func() error {
			out, err := exec(t.Context(), pod.Namespace, pod.Name, "broker", []string{"sh", "-c", `echo "$GREETING from $PWD"`})
			if err != nil {
				return err
			}
			if string(out) != "hello from "+dir+"\n" {
				return errors.New("output " + string(out))
			}
			return nil
		})
	})

	t.Run("job pods run until told to finish", func(t *testing.T) {
		for _, c := range env.Clusters {
			t.Run(c.Name, func(t *testing.T) {
				t.Parallel()
				runJob(t, kubernetes.NewForConfigOrDie(c.Config))
			})
		}
	})

	var pids []int
	for _, c := range env.Clusters {
		require.Len(t, c.Processes, len(localBinaries), "cluster %s", c.Name)
		for _, p := range c.Processes {
			require.True(t, p.Running(), "%s of %s", p.Component, c.Name)
			pids = append(pids, p.PID)
		}
	}
	require.NoError(t, env.Stop())
	for _, pid := range pids {
		require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "pid %d", pid)
		require.ErrorIs(t, syscall.Kill(-pid, 0), syscall.ESRCH, "process group %d", pid)
	}
	require.False(t, env.Running())
}

// runJob creates an indexed Job of three pods, sees them Running and Ready, finishes one with
// success and one with an exit code and a message through AnnotationExitCode, deletes one that
// ends with 0 when stopped (AnnotationStopExitCode), and checks what the Job controller makes of
// it.
func runJob(t *testing.T, cs kubernetes.Interface) {
	ctx := t.Context()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "indexed", Namespace: metav1.NamespaceDefault},
		Spec: batchv1.JobSpec{
			Completions:    ptr.To[int32](3),
			Parallelism:    ptr.To[int32](3),
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			BackoffLimit:   ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "broker", Image: "example.invalid/flux:none", Command: []string{"flux", "broker"}}},
			}},
		},
	}
	_, err := cs.BatchV1().Jobs(job.Namespace).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)

	pods := map[string]corev1.Pod{} // by completion index
	eventually(t, "three Running and Ready pods", func() error {
		list, err := cs.CoreV1().Pods(job.Namespace).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job.Name})
		if err != nil {
			return err
		}
		clear(pods)
		for _, p := range list.Items {
			if p.Status.Phase != corev1.PodRunning || !podReady(&p) || p.Status.PodIP == "" {
				return errors.New("pod " + p.Name + " is " + string(p.Status.Phase))
			}
			pods[p.Annotations[batchv1.JobCompletionIndexAnnotation]] = p
		}
		if len(pods) != 3 {
			return errors.New("not three pods yet")
		}
		return nil
	})
	require.NotEqual(t, pods["0"].Status.PodIP, pods["1"].Status.PodIP)

	// A pod stays Running without the annotation, as a broker would.
	time.Sleep(time.Second)
	p1, err := cs.CoreV1().Pods(job.Namespace).Get(ctx, pods["1"].Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, corev1.PodRunning, p1.Status.Phase)

	annotate(t, cs, pods["0"], AnnotationExitCode, "0")
	eventually(t, "index 0 to succeed", func() error {
		j, err := cs.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if j.Status.Succeeded != 1 || j.Status.CompletedIndexes != "0" {
			return errors.New("succeeded " + j.Status.CompletedIndexes)
		}
		return nil
	})
	p0, err := cs.CoreV1().Pods(job.Namespace).Get(ctx, pods["0"].Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, corev1.PodSucceeded, p0.Status.Phase)
	p1, err = cs.CoreV1().Pods(job.Namespace).Get(ctx, pods["1"].Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, corev1.PodRunning, p1.Status.Phase, "the other pod runs on")

	// A pod deleted with a stop exit code of 0 reaches Succeeded before it goes, so its index
	// completes; without the annotation it would go with no phase and be replaced.
	annotate(t, cs, pods["2"], AnnotationStopExitCode, "0")
	require.NoError(t, cs.CoreV1().Pods(job.Namespace).Delete(ctx, pods["2"].Name, metav1.DeleteOptions{}))
	eventually(t, "the deleted index 2 to succeed and its pod to go", func() error {
		j, err := cs.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if j.Status.CompletedIndexes != "0,2" {
			return errors.New("succeeded " + j.Status.CompletedIndexes)
		}
		_, err = cs.CoreV1().Pods(job.Namespace).Get(ctx, pods["2"].Name, metav1.GetOptions{})
		switch {
		case err == nil:
			return errors.New("the deleted pod is still there")
		case apierrors.IsNotFound(err):
			return nil
		}
		return err
	})

	annotate(t, cs, pods["1"], AnnotationTerminationMessage, "the job exited with status 3")
	annotate(t, cs, pods["1"], AnnotationExitCode, "3")
	eventually(t, "index 1 to fail with exit code 3", func() error {
		p, err := cs.CoreV1().Pods(job.Namespace).Get(ctx, pods["1"].Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodFailed {
			return errors.New("pod is " + string(p.Status.Phase))
		}
		require.Len(t, p.Status.ContainerStatuses, 1)
		require.NotNil(t, p.Status.ContainerStatuses[0].State.Terminated)
		require.Equal(t, int32(3), p.Status.ContainerStatuses[0].State.Terminated.ExitCode)
		require.Equal(t, "the job exited with status 3", p.Status.ContainerStatuses[0].State.Terminated.Message)
		return nil
	})
}

func annotate(t *testing.T, cs kubernetes.Interface, pod corev1.Pod, key, value string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	require.NoError(t, err)
	_, err = cs.CoreV1().Pods(pod.Namespace).Patch(t.Context(), pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// eventually polls check for up to 30 seconds and fails the test with its last error.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// BenchmarkBringUp measures how long three local clusters take to become usable, with the
// binaries cached: go test ./e2e/clusters -run '^$' -bench BringUp -benchtime 3x
func BenchmarkBringUp(b *testing.B) {
	ctx := context.Background()
	b.StopTimer()
	for range b.N {
		dir := b.TempDir()
		b.StartTimer()
		start := time.Now()
		env, err := Start(ctx, Options{Count: 3, Dir: dir, Provider: ProviderLocal})
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("3 clusters up in %s", time.Since(start).Round(10*time.Millisecond))
		if err := env.Stop(); err != nil {
			b.Fatal(err)
		}
	}
}
