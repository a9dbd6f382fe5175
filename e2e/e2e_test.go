// Package e2e tests the whole system on three local clusters (e2e/clusters): fluxfed installed
// from deploy/ and running as processes with the permissions the manifests give it, a root
// applied on the hub, children on the members, kwok's simulated pods running every broker.
package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/fleet"
	"github.com/fluxfed/fluxfed/e2e/netguard"
	"github.com/fluxfed/fluxfed/hub/members"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

const (
	wait = 90 * time.Second
	tick = 200 * time.Millisecond
)

// shared is the fleet every test of the package uses, each in namespaces of its own.
var shared *fleet.Fleet

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fluxfed-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	start := time.Now()
	shared, err = fleet.Start(context.Background(), fleet.Options{Dir: dir, Logf: func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...)
	}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: starting the fleet: %v\n(logs in %s)\n", err, dir)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "e2e: fleet up in %v (logs in %s)\n", time.Since(start).Round(100*time.Millisecond), dir)
	code := netguard.Check(m.Run())
	// The managers ran with exactly the permissions deploy/ gives them: one they lacked shows
	// as a refusal in their logs, whether or not a test noticed its effect.
	for _, c := range shared.Env.Clusters {
		data, err := os.ReadFile(filepath.Join(c.Dir, "logs", "fluxfed.log"))
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: reading the manager's log on %s: %v\n", c.Name, err)
			code = 1
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "forbidden") {
				fmt.Fprintf(os.Stderr, "e2e: the manager on %s was refused a permission the manifests should give it:\n%s\n", c.Name, line)
				code = 1
			}
			// The hub runs with --dial-allow=127.0.0.0/8: an address it refused to dial is one
			// the tests should never have given it.
			if strings.Contains(line, members.ErrDialRefused.Error()) {
				fmt.Fprintf(os.Stderr, "e2e: the manager on %s tried to dial outside loopback:\n%s\n", c.Name, line)
				code = 1
			}
		}
	}
	if err := shared.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: stopping the fleet: %v\n", err)
		code = 1
	}
	if code == 0 {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Fprintf(os.Stderr, "e2e: logs kept in %s\n", dir)
	}
	os.Exit(code)
}

// namespace creates a namespace on the hub for one test; the hub creates it on the members.
func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: strings.ToLower(t.Name())[:min(len(t.Name()), 20)] + "-"}}
	require.NoError(t, shared.Clients["hub"].Create(context.Background(), ns))
	return ns.Name
}

// example reads a MiniCluster of examples/.
func example(t *testing.T, file string) *fluxv1alpha2.MiniCluster {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", file))
	require.NoError(t, err)
	mc := &fluxv1alpha2.MiniCluster{}
	require.NoError(t, yaml.UnmarshalStrict(data, mc))
	return mc
}

// applyExample applies an example on the hub, in a namespace of its own, after change (when
// set) altered it.
func applyExample(t *testing.T, file string, change func(*fluxv1alpha2.MiniCluster)) (*fluxv1alpha2.MiniCluster, string) {
	t.Helper()
	ns := namespace(t)
	mc := example(t, file)
	mc.Namespace = ns
	if change != nil {
		change(mc)
	}
	require.NoError(t, shared.Clients["hub"].Create(context.Background(), mc))
	return mc, ns
}

func get(t require.TestingT, cluster string, obj client.Object) bool {
	err := shared.Clients[cluster].Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return true
}

// edit changes a root's spec as a user would.
func edit(t *testing.T, root *fluxv1alpha2.MiniCluster, change func(*fluxv1alpha2.MiniCluster)) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		mc := root.DeepCopy()
		if err := shared.Clients["hub"].Get(context.Background(), client.ObjectKeyFromObject(root), mc); err != nil {
			return err
		}
		change(mc)
		return shared.Clients["hub"].Update(context.Background(), mc)
	}))
}

// hostnames returns the hostnames '<name>-<index>' of a MiniCluster's brokers.
func hostnames(name string, size int) []string {
	var out []string
	for i := range size {
		out = append(out, fmt.Sprintf("%s-%d", name, i))
	}
	return out
}

func burstOf(mc *fluxv1alpha2.MiniCluster, name string) *fluxv1alpha2.BurstStatus {
	for i := range mc.Status.Bursts {
		if mc.Status.Bursts[i].Name == name {
			return &mc.Status.Bursts[i]
		}
	}
	return nil
}

// podHostnames returns the hostnames of the Running pods of a MiniCluster (a Job's pods are
// named <job>-<index>-<random>, their hostname is <job>-<index>).
func podHostnames(t require.TestingT, cluster, ns, name string) []string {
	var pods corev1.PodList
	require.NoError(t, shared.Clients[cluster].List(context.Background(), &pods, client.InNamespace(ns),
		client.MatchingLabels{fluxv1alpha2.LabelMiniCluster: name, batchv1.JobNameLabel: name}))
	var out []string
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out = append(out, p.Spec.Hostname)
		}
	}
	slices.Sort(out)
	return out
}

func TestARootBurstsOntoBothMembers(t *testing.T) {
	ctx := context.Background()
	root, ns := applyExample(t, "bursting-root.yaml", nil)
	hub := shared.Clients["hub"]

	// Statuses flow back: every burst Ready means every child reports all its brokers ready.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, get(c, "hub", root))
		for _, b := range []string{"burst-a", "burst-b"} {
			s := burstOf(root, b)
			require.NotNil(c, s, b)
			require.Equal(c, fluxv1alpha2.BurstReady, s.Phase, "%s: %s", b, s.Message)
		}
		require.True(c, meta.IsStatusConditionTrue(root.Status.Conditions, fluxv1alpha2.ConditionBurstsReady))
		require.True(c, meta.IsStatusConditionTrue(root.Status.Conditions, fluxv1alpha2.ConditionReady))
	}, wait, tick)
	require.Equal(t, "bursting-root-[0-1],burst-a-[0-2],burst-b-[0-1]", root.Status.Hostlist)

	// The lead broker endpoint is the NodePort and the address of the node rank 0 runs on.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bursting-root-lead-broker"}}
	require.True(t, get(t, "hub", svc))
	var pods corev1.PodList
	require.NoError(t, hub.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{
		batchv1.JobNameLabel: "bursting-root", batchv1.JobCompletionIndexAnnotation: "0"}))
	require.Len(t, pods.Items, 1)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: pods.Items[0].Spec.NodeName}}
	require.True(t, get(t, "hub", node))
	var nodeIP string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			nodeIP = a.Address
		}
	}
	endpoint := &fluxv1alpha2.LeadBrokerStatus{Address: nodeIP, Port: svc.Spec.Ports[0].NodePort,
		Endpoint: fmt.Sprintf("%s:%d", nodeIP, svc.Spec.Ports[0].NodePort)}
	require.NotEmpty(t, nodeIP)
	require.Equal(t, endpoint, root.Status.LeadBroker)

	rootCert := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bursting-root-curve"}}
	require.True(t, get(t, "hub", rootCert))
	require.Equal(t, hostnames("bursting-root", 2), podHostnames(t, "hub", ns, "bursting-root"))
	for _, want := range []struct {
		member, name string
		size         int
	}{{"member-a", "burst-a", 3}, {"member-b", "burst-b", 2}} {
		child := &fluxv1alpha2.MiniCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: want.name}}
		require.True(t, get(t, want.member, child), "child %s on %s", want.name, want.member)
		require.Equal(t, int32(want.size), child.Spec.Size)
		lead := child.Spec.Flux.Bursting.LeadBroker
		require.Equal(t, &fluxv1alpha2.LeadBroker{Name: "bursting-root", Address: endpoint.Address, Port: endpoint.Port, Size: 2}, lead)
		cert := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: want.name + "-curve"}}
		require.True(t, get(t, want.member, cert))
		require.Equal(t, rootCert.Data["curve.cert"], cert.Data["curve.cert"], "one CURVE certificate for the federation")
		require.Equal(t, hostnames(want.name, want.size), podHostnames(t, want.member, ns, want.name), "every broker of %s runs", want.name)
	}
}

// leftovers lists what fluxfed made in namespace ns of a cluster and is still there.
func leftovers(t require.TestingT, cluster, ns string) []string {
	ctx := context.Background()
	var out []string
	lists := map[string]client.ObjectList{
		"MiniCluster": &fluxv1alpha2.MiniClusterList{}, "Job": &batchv1.JobList{}, "Pod": &corev1.PodList{},
		"Service": &corev1.ServiceList{}, "ConfigMap": &corev1.ConfigMapList{}, "Secret": &corev1.SecretList{},
	}
	for kind, list := range lists {
		require.NoError(t, shared.Clients[cluster].List(ctx, list, client.InNamespace(ns)))
		require.NoError(t, meta.EachListItem(list, func(o runtime.Object) error {
			obj := o.(client.Object)
			if kind == "ConfigMap" && obj.GetName() == "kube-root-ca.crt" {
				return nil // every namespace has it
			}
			out = append(out, fmt.Sprintf("%s %s on %s", kind, obj.GetName(), cluster))
			return nil
		}))
	}
	slices.Sort(out)
	return out
}

func TestScalingWithinTheReservationMovingABurstThenDeletingTheRoot(t *testing.T) {
	ctx := context.Background()
	root, ns := applyExample(t, "bursting-root.yaml", func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.MaxSize = 4 })
	hub := shared.Clients["hub"]
	waitBursts := func(want map[string]string) {
		t.Helper()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			require.True(c, get(c, "hub", root))
			require.Len(c, root.Status.Bursts, len(want))
			for name, member := range want {
				s := burstOf(root, name)
				require.NotNil(c, s, name)
				require.Equal(c, fluxv1alpha2.BurstReady, s.Phase, "%s: %s", name, s.Message)
				require.Equal(c, member, s.Cluster, name)
			}
		}, wait, tick)
	}
	waitBursts(map[string]string{"burst-a": "member-a", "burst-b": "member-b"})
	require.Equal(t, "bursting-root-[0-3],burst-a-[0-2],burst-b-[0-1]", root.Status.Hostlist)

	// The layout is fixed: resizing a burst is refused, and says why.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		mc := root.DeepCopy()
		if err := hub.Get(ctx, client.ObjectKeyFromObject(root), mc); err != nil {
			return err
		}
		mc.Spec.Flux.Bursting.Clusters[0].Size = 5
		return hub.Update(ctx, mc)
	})
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	require.ErrorContains(t, err, "the bursts' names, order and reserved ranks (maxSize, or size without it) are fixed")

	// Within the reservation the root scales, as kubectl scale does, and nothing restarts.
	children := burstAPods(t, ns)
	out, err := kubectl(t, "scale", "-n", ns, "minicluster/bursting-root", "--replicas=4")
	require.NoError(t, err, out)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, hostnames("bursting-root", 4), podHostnames(c, "hub", ns, "bursting-root"))
	}, wait, tick)
	require.Equal(t, children, burstAPods(t, ns), "the bursts' brokers were not restarted")

	// Move burst-b to member-a, in a namespace of its own.
	edit(t, root, func(mc *fluxv1alpha2.MiniCluster) {
		mc.Spec.Flux.Bursting.Clusters[1].Cluster = "member-a"
		mc.Spec.Flux.Bursting.Clusters[1].Namespace = ns + "-b"
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Empty(c, leftovers(c, "member-b", ns), "burst-b is gone from member-b")
	}, wait, tick)
	waitBursts(map[string]string{"burst-a": "member-a", "burst-b": "member-a"})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, hostnames("burst-b", 2), podHostnames(c, "member-a", ns+"-b", "burst-b"))
	}, wait, tick)
	require.Equal(t, "bursting-root-[0-3],burst-a-[0-2],burst-b-[0-1]", root.Status.Hostlist)

	// Delete the root: nothing is left on any cluster.
	require.NoError(t, hub.Delete(ctx, root))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Empty(c, leftovers(c, "hub", ns))
		require.Empty(c, leftovers(c, "member-a", ns))
		require.Empty(c, leftovers(c, "member-b", ns))
		require.Empty(c, leftovers(c, "member-a", ns+"-b"))
	}, wait, tick)
}

// TestEveryExampleReachesItsState applies every example under examples/ on the hub, as a user
// would, and waits for the state its comments promise: every broker running and the
// MiniCluster Ready; for a root that bursts, every burst Ready too.
func TestEveryExampleReachesItsState(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "examples", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, path := range files {
		file := filepath.Base(path)
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			ns := namespace(t)
			mc := example(t, file)
			mc.Namespace = ns
			hub := shared.Clients["hub"]
			// What the example's comments say must exist before it is applied.
			for _, obj := range prerequisites(mc) {
				obj.SetNamespace(ns)
				if _, ok := obj.(*corev1.PersistentVolume); ok {
					obj.SetNamespace("")
					obj.SetName(ns + "-" + obj.GetName())
				}
				require.NoError(t, hub.Create(ctx, obj), "%T %s", obj, obj.GetName())
			}
			require.NoError(t, hub.Create(ctx, mc))
			pushed := slices.ContainsFunc(mc.Spec.Flux.Bursting.Clusters, func(b fluxv1alpha2.Burst) bool { return b.Cluster != "" })
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				require.True(c, get(c, "hub", mc))
				ready := meta.FindStatusCondition(mc.Status.Conditions, fluxv1alpha2.ConditionReady)
				require.NotNil(c, ready)
				require.Equal(c, metav1.ConditionTrue, ready.Status, "%s: %s", ready.Reason, ready.Message)
				require.Equal(c, hostnames(mc.Name, int(mc.Spec.Size)), podHostnames(c, "hub", ns, mc.Name))
				if pushed {
					require.True(c, meta.IsStatusConditionTrue(mc.Status.Conditions, fluxv1alpha2.ConditionBurstsReady))
				} else {
					require.Nil(c, meta.FindStatusCondition(mc.Status.Conditions, fluxv1alpha2.ConditionBursting),
						"a MiniCluster that pushes no burst carries no federation condition")
				}
				require.True(c, meta.IsStatusConditionFalse(mc.Status.Conditions, fluxv1alpha2.ConditionFailed))
			}, wait, tick)
			require.NoError(t, hub.Delete(ctx, mc))
		})
	}
}

// prerequisites returns the objects an example refers to and expects to exist: its pods'
// ServiceAccount, and the ConfigMaps, Secrets and claims (with a volume to bind) its volumes
// name.
func prerequisites(mc *fluxv1alpha2.MiniCluster) []client.Object {
	var objs []client.Object
	if sa := mc.Spec.Pod.ServiceAccountName; sa != "" {
		objs = append(objs, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}})
	}
	for _, c := range mc.Spec.Containers {
		for _, name := range slices.Sorted(maps.Keys(c.Volumes)) {
			v := c.Volumes[name]
			switch {
			case v.ConfigMapName != "":
				data := map[string]string{}
				for key := range v.Items {
					data[key] = "example"
				}
				objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: v.ConfigMapName}, Data: data})
			case v.SecretName != "":
				objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: v.SecretName}, StringData: map[string]string{"token": "example"}})
			case v.ClaimName != "":
				size := resource.MustParse("1Gi")
				objs = append(objs,
					&corev1.PersistentVolume{
						ObjectMeta: metav1.ObjectMeta{Name: v.ClaimName},
						Spec: corev1.PersistentVolumeSpec{
							Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
							AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
							PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
							PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/tmp/" + v.ClaimName}},
						},
					},
					&corev1.PersistentVolumeClaim{
						ObjectMeta: metav1.ObjectMeta{Name: v.ClaimName},
						Spec: corev1.PersistentVolumeClaimSpec{
							AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
							StorageClassName: ptr.To(""),
							Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
						},
					})
			}
		}
	}
	return objs
}
