package managermem

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/hub/members"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

var hubRoots = flag.String("managermem.roots", "0,200", "comma-separated numbers of roots BenchmarkHubMemory creates, each bursting onto two members")

// membersNamespace holds the members' kubeconfig Secrets on the hub.
const membersNamespace = "fluxfed-system"

// BenchmarkHubMemory runs the hub as its image runs it, `fluxfed manager --hub`, as a process of
// its own against three API servers (the hub's cluster and two members, registered with
// kubeconfig Secrets as `fluxfed member add` registers them), creates -managermem.roots roots
// ten at a time, each with a burst of 2 onto each member, waits until every child exists on its
// member, lets it settle, and reports the process's memory as BenchmarkManagerMemory does (issue
// 25: RSS within 80 MiB + 0.1 MiB per root). No Flux runs behind the roots: the hub's asks of
// their instances fail and back off, and their lead brokers are greeted at 127.0.0.1 in vain.
//
//	KUBEBUILDER_ASSETS=~/.cache/fluxfed/k8s/v1.36.3 ~/.cache/fluxfed/tools/loopback \
//	  go test ./tools/bench/managermem -run '^$' -bench HubMemory -benchtime 1x -timeout 60m
func BenchmarkHubMemory(b *testing.B) {
	ctrllog.SetLogger(logr.Discard()) // envtest logs through it
	ns := counts(b, "-managermem.roots", *hubRoots, 0)
	bin := known["fluxfed"]
	path := build(b, b.TempDir(), bin)
	for _, n := range ns {
		b.Run(fmt.Sprintf("roots=%d", n), func(b *testing.B) {
			for range b.N {
				measureHub(b, bin, path, n)
			}
		})
	}
}

// measureHub is one run of BenchmarkHubMemory with n roots.
func measureHub(b *testing.B, bin binary, path string, n int) {
	b.StopTimer()
	logLoad(b, "at the start")
	envs := testenv.StartN(b, 3)
	hub, memberEnvs := envs[0], map[string]*testenv.Env{"member-a": envs[1], "member-b": envs[2]}
	ctx := context.Background()
	for _, name := range []string{membersNamespace, namespace} {
		if err := hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			b.Fatal(err)
		}
	}
	for name, env := range memberEnvs {
		register(b, hub, name, env)
	}
	m := startManager(b, bin, path, hub, b.TempDir(), "--hub", "--hub-name=bench", "--members-namespace="+membersNamespace,
		"--dial-allow=127.0.0.0/8", "--lead-address-allow=127.0.0.0/8")
	if err := poll(3*time.Minute, time.Second, func() bool { return membersReady(ctx, b, hub) }, m.exited); err != nil {
		b.Fatalf("the members did not become Ready: %v", err)
	}
	m.startRSS = procStatus(b, m.pid)["VmRSS"]

	roots := make([]*fluxv1alpha2.MiniCluster, n)
	for i := range roots {
		roots[i] = v1alpha2test.MiniCluster(fmt.Sprintf("root-%03d", i)).Namespace(namespace).Size(2).MaxSize(4).
			Expose("127.0.0.1").Bursts(
			fluxv1alpha2.Burst{Name: fmt.Sprintf("a-%03d", i), Cluster: "member-a", Size: 2},
			fluxv1alpha2.Burst{Name: fmt.Sprintf("b-%03d", i), Cluster: "member-b", Size: 2}).Obj()
	}
	b.StartTimer()
	t0 := time.Now()
	peakAnon := m.sampleAnon(b)
	testenv.CreateAll(b, hub.Client, roots)
	if err := poll(*wait, time.Second, func() bool { return childrenExist(ctx, b, memberEnvs, n) }, m.exited); err != nil {
		b.Fatalf("not every one of %d roots has both its children: %v", n, err)
	}
	elapsed := time.Since(t0).Seconds()
	b.StopTimer()
	m.settleAndReport(b, peakAnon(), n, elapsed, "the hub", "both children of every root in")
	b.ReportMetric(80+0.1*float64(n), "target-MiB")
}

// register writes the kubeconfig Secret of member name on hub, with env's administrator's
// credentials, and its MemberCluster, which lends the hub every namespace.
func register(b *testing.B, hub *testenv.Env, name string, env *testenv.Env) {
	b.Helper()
	kc, err := testenv.Kubeconfig(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: membersNamespace},
		Data: map[string][]byte{members.DefaultKubeconfigKey: kc}}
	if err := hub.Client.Create(ctx, secret); err != nil {
		b.Fatal(err)
	}
	mc := &fedv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: fedv1alpha1.MemberClusterSpec{KubeconfigSecretRef: fedv1alpha1.KubeconfigSecretRef{Name: secret.Name},
			Namespaces: fedv1alpha1.MemberNamespaces{Allow: fedv1alpha1.NamespaceAllowAny, Create: true}}}
	if err := hub.Client.Create(ctx, mc); err != nil {
		b.Fatal(err)
	}
}

// membersReady reports whether every MemberCluster of hub is Ready.
func membersReady(ctx context.Context, b *testing.B, hub *testenv.Env) bool {
	var list fedv1alpha1.MemberClusterList
	if err := hub.Client.List(ctx, &list); err != nil {
		b.Logf("listing MemberClusters: %v", err)
		return false
	}
	for _, mc := range list.Items {
		if !meta.IsStatusConditionTrue(mc.Status.Conditions, fedv1alpha1.ConditionReady) {
			return false
		}
	}
	return len(list.Items) > 0
}

// childrenExist reports whether each member holds n children.
func childrenExist(ctx context.Context, b *testing.B, memberEnvs map[string]*testenv.Env, n int) bool {
	for name, env := range memberEnvs {
		var list fluxv1alpha2.MiniClusterList
		if err := env.Client.List(ctx, &list); err != nil {
			b.Logf("listing the children on %s: %v", name, err)
			return false
		}
		if len(list.Items) < n {
			return false
		}
	}
	return true
}
