package member

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/internal/testenv"
	"github.com/fluxfed/fluxfed/member/render/names"
)

var (
	benchIdle = flag.Duration("fluxfed.idle", 60*time.Second, "how long BenchmarkHundredMiniClusters watches for requests once everything exists")
	benchWait = flag.Duration("fluxfed.wait", 3*time.Minute, "how long BenchmarkHundredMiniClusters waits for every MiniCluster before it fails")
	benchN    = flag.Int("fluxfed.miniclusters", 100, "how many MiniClusters BenchmarkHundredMiniClusters creates")
)

// BenchmarkHundredMiniClusters measures the reconciler on 100 MiniClusters (size 4; another
// count with -fluxfed.miniclusters) against
// one API server, two ways, fails unless every one ends with all its objects and without
// Failed=True, and reports the API requests it makes per MiniCluster and, once
// everything exists, while nothing changes:
//
//   - backlog: 100 MiniClusters exist when the manager starts (an operator upgrade, or a burst
//     of applies the operator is catching up with); the time until every one has all its
//     objects and a status is the reconciler's alone.
//   - live: the manager runs while 100 MiniClusters are created, ten at a time; the time runs
//     from the first create to the last status and includes the API server's own creates.
//
// Run it with: go test ./member -run '^$' -bench HundredMiniClusters -benchtime 1x
// (1000: -fluxfed.miniclusters 1000 -fluxfed.wait 10m), which reports the time to the last
// status in s and, to compare counts, in s/100mc.
func BenchmarkHundredMiniClusters(b *testing.B) {
	n := *benchN
	for _, mode := range []string{"backlog", "live"} {
		b.Run(mode, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				h := startAPIServer(b)
				ctx := context.Background()
				ns := h.namespace(b)
				// The Flux Operator's shape: no spec.network.headlessName, so every MiniCluster
				// has the Service of its name.
				mcs := make([]*fluxv1alpha2.MiniCluster, n)
				for i := range mcs {
					mcs[i] = v1alpha2test.MiniCluster(fmt.Sprintf("mc-%03d", i)).Namespace(ns).Size(4).Obj()
				}
				if mode == "backlog" {
					testenv.CreateAll(b, h.c, mcs)
				}
				b.StartTimer()
				t0 := time.Now()
				h.runManager(b)
				if mode == "live" {
					testenv.CreateAll(b, h.c, mcs)
				}
				// A status of its generation is written once every object was applied or one
				// failed: wait for those (a cheap list), then check the objects.
				deadline := time.Now().Add(*benchWait)
				for !h.allReported(ctx, ns, n) {
					if time.Now().After(deadline) {
						b.Fatalf("not every MiniCluster has a status after %s", *benchWait)
					}
					time.Sleep(20 * time.Millisecond)
				}
				elapsed := time.Since(t0)
				b.StopTimer()
				if missing := h.notRendered(ctx, ns, mcs); len(missing) > 0 {
					b.Fatalf("%d things are missing of the %d MiniClusters: %v", len(missing), n, missing)
				}

				made := len(h.requests.requestsSince(0))
				idleStart := h.requests.mark()
				time.Sleep(*benchIdle)
				idle := h.requests.requestsSince(idleStart)

				b.Logf("requests per MiniCluster by kind: %s", perKind(h.requests.requestsSince(0)[:made], n))
				b.ReportMetric(elapsed.Seconds(), "s")
				b.ReportMetric(elapsed.Seconds()*100/float64(n), "s/100mc")
				b.ReportMetric(float64(made)/float64(n), "requests/mc")
				b.ReportMetric(float64(len(idle)), "idle-requests")
				if len(idle) > 0 {
					b.Logf("requests while idle: %v", idle)
				}
			}
		})
	}
}

// perKind counts requests by method and resource ("POST configmaps", "GET jobs",
// "PATCH miniclusters/status"), per MiniCluster of n, most first.
func perKind(paths []string, n int) string {
	counts := map[string]int{}
	for _, p := range paths {
		method, path, _ := strings.Cut(p, " ")
		parts := strings.Split(strings.Trim(path, "/"), "/")
		resource := ""
		for i, part := range parts {
			if part == "namespaces" && i+2 < len(parts) {
				resource = parts[i+2]
				if i+4 < len(parts) {
					resource += "/" + parts[i+4]
				}
				break
			}
		}
		if resource == "" && len(parts) > 0 {
			resource = parts[len(parts)-1]
		}
		counts[method+" "+resource]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return counts[keys[i]] > counts[keys[j]] || (counts[keys[i]] == counts[keys[j]] && keys[i] < keys[j])
	})
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%s %.2f", k, float64(counts[k])/float64(n)))
	}
	return strings.Join(out, ", ")
}

// allReported reports whether all n MiniClusters of the namespace have a status computed from
// their generation.
func (h *harness) allReported(ctx context.Context, ns string, n int) bool {
	var mcs fluxv1alpha2.MiniClusterList
	if err := h.c.List(ctx, &mcs, client.InNamespace(ns)); err != nil || len(mcs.Items) < n {
		return false
	}
	for _, mc := range mcs.Items {
		if mc.Status.ObservedGeneration != mc.Generation {
			return false
		}
	}
	return true
}

// notRendered returns, for each of mcs that does not have all its objects and a status of its
// generation without Failed=True, what it lacks.
func (h *harness) notRendered(ctx context.Context, ns string, mcs []*fluxv1alpha2.MiniCluster) []string {
	have := map[string]bool{}
	lists := map[string]client.ObjectList{
		"Job": &batchv1.JobList{}, "Service": &corev1.ServiceList{}, "ConfigMap": &corev1.ConfigMapList{}, "Secret": &corev1.SecretList{},
	}
	for kind, list := range lists {
		if err := h.c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return []string{err.Error()}
		}
		if err := meta.EachListItem(list, func(obj runtime.Object) error {
			have[kind+" "+obj.(client.Object).GetName()] = true
			return nil
		}); err != nil {
			return []string{err.Error()}
		}
	}
	var got fluxv1alpha2.MiniClusterList
	if err := h.c.List(ctx, &got, client.InNamespace(ns)); err != nil {
		return []string{err.Error()}
	}
	stored := map[string]fluxv1alpha2.MiniCluster{}
	for _, mc := range got.Items {
		stored[mc.Name] = mc
	}

	var missing []string
	for _, want := range mcs {
		mc, ok := stored[want.Name]
		if !ok {
			missing = append(missing, want.Name+": not created")
			continue
		}
		for _, obj := range []string{
			"Job " + names.JobName(&mc), "Service " + mc.HeadlessName(), "ConfigMap " + names.ConfigMapName(&mc),
			"ConfigMap " + names.EntrypointConfigMapName(&mc), "Secret " + names.CurveSecretName(&mc),
		} {
			if !have[obj] {
				missing = append(missing, mc.Name+": no "+obj)
			}
		}
		failed := meta.FindStatusCondition(mc.Status.Conditions, fluxv1alpha2.ConditionFailed)
		switch {
		case mc.Status.ObservedGeneration != mc.Generation || failed == nil:
			missing = append(missing, mc.Name+": no status of its generation")
		case failed.Status == metav1.ConditionTrue:
			missing = append(missing, mc.Name+": Failed: "+failed.Message)
		}
	}
	return missing
}
