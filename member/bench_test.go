package member

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
)

var benchIdle = flag.Duration("fluxfed.idle", 60*time.Second, "how long BenchmarkHundredMiniClusters watches for requests once everything exists")

// BenchmarkHundredMiniClusters measures the reconciler on 100 MiniClusters (size 4) against
// one API server, two ways, and reports the API requests it makes per MiniCluster and, once
// everything exists, while nothing changes:
//
//   - backlog: 100 MiniClusters exist when the manager starts (an operator upgrade, or a burst
//     of applies the operator is catching up with); the time until every one has all its
//     objects and a status is the reconciler's alone.
//   - live: the manager runs while 100 MiniClusters are created, ten at a time; the time runs
//     from the first create to the last status and includes the API server's own creates.
//
// Run it with: go test ./member -run '^$' -bench HundredMiniClusters -benchtime 1x
func BenchmarkHundredMiniClusters(b *testing.B) {
	const n = 100
	for _, mode := range []string{"backlog", "live"} {
		b.Run(mode, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				h := startAPIServer(b)
				ctx := context.Background()
				ns := h.namespace(b)
				mcs := make([]*fluxv1alpha2.MiniCluster, n)
				for i := range mcs {
					mcs[i] = v1alpha2test.MiniCluster(fmt.Sprintf("mc-%03d", i)).Namespace(ns).Size(4).Obj()
					mcs[i].Spec.Network.HeadlessName = mcs[i].Name
				}
				if mode == "backlog" {
					createAll(b, h, mcs)
				}
				b.StartTimer()
				t0 := time.Now()
				h.runManager(b)
				if mode == "live" {
					createAll(b, h, mcs)
				}
				for !h.allRendered(ctx, ns, n) {
					time.Sleep(20 * time.Millisecond)
				}
				elapsed := time.Since(t0)
				b.StopTimer()

				made := len(h.requests.requestsSince(0))
				idleStart := h.requests.mark()
				time.Sleep(*benchIdle)
				idle := h.requests.requestsSince(idleStart)

				b.ReportMetric(elapsed.Seconds(), "s/100mc")
				b.ReportMetric(float64(made)/n, "requests/mc")
				b.ReportMetric(float64(len(idle)), "idle-requests")
				if len(idle) > 0 {
					b.Logf("requests while idle: %v", idle)
				}
			}
		})
	}
}

// createAll creates the MiniClusters ten at a time, as a parallel kubectl apply would.
func createAll(b *testing.B, h *harness, mcs []*fluxv1alpha2.MiniCluster) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(mcs))
	sem := make(chan struct{}, 10)
	for _, mc := range mcs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs <- h.c.Create(context.Background(), mc)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}

// allRendered reports whether all n MiniClusters of the namespace have their Job and a status
// computed from their generation.
func (h *harness) allRendered(ctx context.Context, ns string, n int) bool {
	var jobs batchv1.JobList
	if err := h.c.List(ctx, &jobs, client.InNamespace(ns)); err != nil || len(jobs.Items) < n {
		return false
	}
	var mcs fluxv1alpha2.MiniClusterList
	if err := h.c.List(ctx, &mcs, client.InNamespace(ns)); err != nil {
		return false
	}
	for _, mc := range mcs.Items {
		if mc.Status.ObservedGeneration != mc.Generation {
			return false
		}
	}
	return len(mcs.Items) == n
}
