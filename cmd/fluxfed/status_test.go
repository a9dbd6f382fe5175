package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/bursting"
	"github.com/fluxfed/fluxfed/cmd/fluxfed/internal/status"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

// TestStatusAcrossClusters runs `fluxfed status` against a hub API server with a root whose
// status the hub would have written, and a member API server with the child of one of its
// bursts: the member is reached with the kubeconfig of its MemberCluster's Secret, or with a
// context of the user's kubeconfig, and the pods of both clusters are listed by rank.
func TestStatusAcrossClusters(t *testing.T) {
	envs := testenv.StartN(t, 2)
	hubEnv, memberEnv := envs[0], envs[1]
	ctx := context.Background()

	require.NoError(t, hubEnv.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fluxfed-system"}}))
	// The Secret holds what the hub holds: its own identity on the member, namespace default lent.
	hubOnMember, err := testenv.Kubeconfig(memberEnv.HubIdentity(t, "member-access", "default"))
	require.NoError(t, err)
	require.NoError(t, hubEnv.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "member-a-kubeconfig", Namespace: "fluxfed-system"},
		Data:       map[string][]byte{"kubeconfig": hubOnMember},
	}))
	kc, err := memberEnv.Kubeconfig()
	require.NoError(t, err)
	require.NoError(t, hubEnv.Client.Create(ctx, &fedv1alpha1.MemberCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "member-a"},
		Spec:       fedv1alpha1.MemberClusterSpec{KubeconfigSecretRef: fedv1alpha1.KubeconfigSecretRef{Name: "member-a-kubeconfig"}},
	}))

	root := &fluxv1alpha2.MiniCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "lammps", Namespace: "default"},
		Spec: fluxv1alpha2.MiniClusterSpec{
			Size:       2,
			Containers: []fluxv1alpha2.Container{{Image: "rockylinux:9", Command: "hostname"}},
			Flux: fluxv1alpha2.FluxSpec{Bursting: fluxv1alpha2.Bursting{
				Expose: &fluxv1alpha2.Expose{Address: "127.0.0.7"},
				Clusters: []fluxv1alpha2.Burst{
					{Name: "burst-a", Cluster: "member-a", Size: 2, MaxSize: 3},
					{Name: "burst-b", Cluster: "member-b", Size: 1},
					{Name: "burst-c", Cluster: "member-a", Size: 0, MaxSize: 2},
				},
			}},
		},
	}
	require.NoError(t, hubEnv.Client.Create(ctx, root))
	layout, err := bursting.NewLayout(root)
	require.NoError(t, err)
	root.Status = fluxv1alpha2.MiniClusterStatus{
		Size: 2, Ready: 2, MaximumSize: 2,
		Hostlist:   layout.GlobalHostlist,
		LeadBroker: &fluxv1alpha2.LeadBrokerStatus{Address: "127.0.0.7", Port: 30050, Endpoint: "127.0.0.7:30050"},
		Conditions: []metav1.Condition{{Type: fluxv1alpha2.ConditionBurstsReady, Status: metav1.ConditionFalse, Reason: "Unreachable",
			Message: "member member-b is unreachable", LastTransitionTime: metav1.Now()}},
		Flux: &fluxv1alpha2.FluxStatus{State: "run", Size: 8, Online: 4},
		Bursts: []fluxv1alpha2.BurstStatus{
			{Name: "burst-a", Cluster: "member-a", Namespace: "default", Size: 2, MaxSize: 3, Ready: 2, Phase: fluxv1alpha2.BurstJoined, Online: 2},
			{Name: "burst-b", Cluster: "member-b", Namespace: "default", Size: 1, MaxSize: 1, Phase: fluxv1alpha2.BurstUnreachable,
				Message: "member member-b is unreachable"},
			{Name: "burst-c", Cluster: "member-a", Namespace: "default", MaxSize: 2, Phase: fluxv1alpha2.BurstReserved},
		},
	}
	require.NoError(t, hubEnv.Client.Status().Update(ctx, root))

	plan, err := bursting.NewPlan(root, bursting.Endpoint{Address: "127.0.0.7", Port: 30050}, "hub")
	require.NoError(t, err)
	child, ok := plan.Child("burst-a")
	require.True(t, ok)
	require.NoError(t, memberEnv.Client.Create(ctx, child.MiniCluster))

	createPod(t, hubEnv.Client, "lammps", "lammps-1", "hub-node-1")
	createPod(t, hubEnv.Client, "lammps", "lammps-0", "hub-node-0")
	createPod(t, memberEnv.Client, "burst-a", "burst-a-1", "member-node-1")
	createPod(t, memberEnv.Client, "burst-a", "burst-a-0", "member-node-0")
	// Not a broker of the root: no pod of another MiniCluster is listed.
	createPod(t, memberEnv.Client, "other", "other-0", "member-node-0")

	hubKubeconfig := hubEnv.WriteKubeconfig(t, t.TempDir())
	var stdout bytes.Buffer
	require.NoError(t, run(ctx, []string{"status", "lammps", "--kubeconfig", hubKubeconfig, "-n", "default"}, &stdout, &bytes.Buffer{}))
	text := stdout.String()
	t.Log("\n" + text)
	for _, want := range []string{
		"MiniCluster default/lammps on envtest: root\n",
		"Lead broker:  127.0.0.7:30050\n",
		"Hostlist:     lammps-[0-1],burst-a-[0-2],burst-b-0,burst-c-[0-1]\n",
		"Flux:         run, 4/8 ranks online\n",
		"  2-4    burst-a-[0-2]  burst-a  member-a            2-3      4",
		"  6-7    burst-c-[0-1]  burst-c  member-a            -        6-7",
		"  BurstsReady  False   Unreachable  member member-b is unreachable",
		"  burst-b  member-b  default    1     1    0      Unreachable  0       0         0        member member-b is unreachable",
		"  0     envtest   default/lammps-0   lammps-0   hub-node-0     Running  true",
		"  3     member-a  default/burst-a-1  burst-a-1  member-node-1  Running  true",
		"burst burst-b on member-b: no MemberCluster member-b on the hub",
	} {
		require.Contains(t, text, want)
	}
	require.NotContains(t, text, "other-0")

	// The member through a context of the user's kubeconfig, in JSON.
	both := filepath.Join(t.TempDir(), "kubeconfig")
	writeContexts(t, both, map[string][]byte{"hub": mustKubeconfig(t, hubEnv), "member": kc})
	stdout.Reset()
	require.NoError(t, run(ctx, []string{"status", "lammps", "--kubeconfig", both, "--context", "hub", "--namespace", "default",
		"--member-context", "member-a=member", "-o", "json"}, &stdout, &bytes.Buffer{}))
	var report status.Report
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &report))
	require.Equal(t, "hub", report.Cluster)
	var pods []string
	for _, p := range report.Pods {
		pods = append(pods, p.Cluster+"/"+p.Name)
		require.Equal(t, p.Name, p.Hostname)
	}
	require.Equal(t, []string{"hub/lammps-0", "hub/lammps-1", "member-a/burst-a-0", "member-a/burst-a-1"}, pods)
	require.Equal(t, 3, report.Pods[3].Rank)

	// A child of another root of the same name is not looked into.
	require.NoError(t, memberEnv.Client.Get(ctx, client.ObjectKeyFromObject(child.MiniCluster), child.MiniCluster))
	child.MiniCluster.Annotations[fluxv1alpha2.AnnotationOriginUID] = "someone-else"
	require.NoError(t, memberEnv.Client.Update(ctx, child.MiniCluster))
	stdout.Reset()
	require.NoError(t, run(ctx, []string{"status", "lammps", "--kubeconfig", hubKubeconfig, "-n", "default", "-o", "yaml"}, &stdout, &bytes.Buffer{}))
	require.Contains(t, stdout.String(), "MiniCluster default/burst-a is not a child of this root")
	require.NotContains(t, stdout.String(), "burst-a-0\n")

	err = run(ctx, []string{"status", "missing", "--kubeconfig", hubKubeconfig, "-n", "default"}, &bytes.Buffer{}, &bytes.Buffer{})
	require.ErrorContains(t, err, "MiniCluster default/missing not found in cluster envtest")
}

func TestStatusFlagErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		err  string
	}{
		{args: []string{"status"}, err: "status takes the name of one MiniCluster, got 0 arguments"},
		{args: []string{"status", "a", "-o", "wide"}, err: `--output "wide" is not one of text, json, yaml`},
		{args: []string{"status", "a", "--member-context", "member-a"}, err: `--member-context "member-a" is not MEMBER=CONTEXT`},
	} {
		err := run(context.Background(), tt.args, &bytes.Buffer{}, &bytes.Buffer{})
		require.ErrorContains(t, err, tt.err)
	}
}

// createPod creates a running, ready broker pod of minicluster in namespace default.
func createPod(t *testing.T, c client.Client, minicluster, name, node string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{fluxv1alpha2.LabelMiniCluster: minicluster}},
		Spec: corev1.PodSpec{Hostname: name, NodeName: node,
			Containers: []corev1.Container{{Name: "flux", Image: "rockylinux:9"}}},
	}
	require.NoError(t, c.Create(context.Background(), pod))
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	require.NoError(t, c.Status().Update(context.Background(), pod))
}

func mustKubeconfig(t *testing.T, env *testenv.Env) []byte {
	t.Helper()
	data, err := env.Kubeconfig()
	require.NoError(t, err)
	return data
}

// writeContexts writes one kubeconfig with a context of each name, from single-context ones.
func writeContexts(t *testing.T, path string, configs map[string][]byte) {
	t.Helper()
	merged := clientcmdapi.NewConfig()
	for name, data := range configs {
		kc, err := clientcmd.Load(data)
		require.NoError(t, err)
		ctx := kc.Contexts[kc.CurrentContext]
		merged.Clusters[name] = kc.Clusters[ctx.Cluster]
		merged.AuthInfos[name] = kc.AuthInfos[ctx.AuthInfo]
		merged.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	require.NoError(t, clientcmd.WriteToFile(*merged, path))
	_, err := os.Stat(path)
	require.NoError(t, err)
}
