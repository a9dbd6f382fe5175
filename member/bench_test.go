package member

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

var benchIdle = flag.Duration("fluxfed.idle", 60*time.Second, "how long BenchmarkHundredMiniClusters watches for requests once everything exists")

// BenchmarkHundredMiniClusters applies 100 MiniClusters at once to one API server and reports
// how long the reconciler takes until every one has all its objects and a status, how many API
// requests it made per MiniCluster, and how many it makes afterwards while nothing changes.
// Run it with: go test ./member -run '^$' -bench HundredMiniClusters -benchtime 1x
func BenchmarkHundredMiniClusters(b *testing.B) {
	const n = 100
	for range b.N {
		b.StopTimer()
		h := startManager(b)
		ctx := context.Background()
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: h.namespace(b)}}
		mcs := make([]*fluxv1alpha2.MiniCluster, n)
		for i := range mcs {
			mcs[i] = newMiniCluster(ns.Name, fmt.Sprintf("mc-%03d", i), 4)
			mcs[i].Spec.Network.HeadlessName = mcs[i].Name
		}
		start := h.requests.mark()
		b.StartTimer()
		t0 := time.Now()
		// "Applied at once": the MiniClusters are created concurrently, as a kubectl apply of
		// a folder with a few parallel clients would.
		var wg sync.WaitGroup
		errs := make(chan error, n)
		sem := make(chan struct{}, 10)
		for _, mc := range mcs {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				errs <- h.c.Create(ctx, mc)
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		created := time.Since(t0)
		for !h.allRendered(ctx, ns.Name, n) {
			time.Sleep(100 * time.Millisecond)
		}
		elapsed := time.Since(t0)
		b.StopTimer()

		made := len(h.requests.requestsSince(start))
		idleStart := h.requests.mark()
		time.Sleep(*benchIdle)
		idle := h.requests.requestsSince(idleStart)

		b.ReportMetric(elapsed.Seconds(), "s/100mc")
		b.ReportMetric(created.Seconds(), "s-creating")
		b.ReportMetric(float64(made)/n, "requests/mc")
		b.ReportMetric(float64(len(idle)), "idle-requests")
		if len(idle) > 0 {
			b.Logf("requests while idle: %v", idle)
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
