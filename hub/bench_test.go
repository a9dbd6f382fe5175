package hub_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hub"
)

// BenchmarkBurstToTwoMembers measures, in the integration environment (a hub and two member
// API servers in this process), the time from creating a root with two bursts until both
// children exist on their members, and the requests the hub makes for it:
//
//	go test ./hub -run '^$' -bench BurstToTwoMembers -benchtime 20x
//
// It reports the median and p99 of that time over the runs, the hub's requests to the
// members per burst, and the hub's writes on its own cluster per root (under its field owner:
// finalizer, lead broker Service, status). Each run deletes its root afterwards, untimed.
func BenchmarkBurstToTwoMembers(b *testing.B) {
	f := startFederation(b, hub.Options{}, "member-a", "member-b")
	ctx := context.Background()
	ns := f.namespace(b)
	a, m := f.members["member-a"], f.members["member-b"]
	var times []time.Duration
	var memberRequests, hubWrites int64
	i := 0
	for b.Loop() {
		i++
		root := newRoot(ns, fmt.Sprintf("bench-%d", i),
			fluxv1alpha2.Burst{Name: fmt.Sprintf("a-%d", i), Cluster: "member-a", Size: 3},
			fluxv1alpha2.Burst{Name: fmt.Sprintf("b-%d", i), Cluster: "member-b", Size: 2})
		before := a.requests.Load() + m.requests.Load()
		mark := f.hubCount.mark()
		start := time.Now()
		require.NoError(b, f.hub.Client.Create(ctx, root))
		for a.child(b, ns, fmt.Sprintf("a-%d", i)) == nil || m.child(b, ns, fmt.Sprintf("b-%d", i)) == nil {
			time.Sleep(2 * time.Millisecond)
		}
		times = append(times, time.Since(start))

		b.StopTimer()
		f.waitBurst(b, root, fmt.Sprintf("a-%d", i), fluxv1alpha2.BurstApplied)
		f.waitBurst(b, root, fmt.Sprintf("b-%d", i), fluxv1alpha2.BurstApplied)
		time.Sleep(200 * time.Millisecond) // the children's first status reaches the hub
		memberRequests += a.requests.Load() + m.requests.Load() - before
		for _, w := range f.hubCount.since(mark) {
			if strings.Contains(w, "fieldManager="+fluxv1alpha2.FieldOwnerHub) {
				hubWrites++
			}
		}
		require.NoError(b, f.hub.Client.Delete(ctx, root))
		for !isGone(ctx, f, root) {
			time.Sleep(10 * time.Millisecond)
		}
		b.StartTimer()
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Milliseconds()), "median-ms")
	b.ReportMetric(float64(times[(len(times)*99-1)/100].Milliseconds()), "p99-ms")
	b.ReportMetric(float64(memberRequests)/float64(2*len(times)), "member-requests/burst")
	b.ReportMetric(float64(hubWrites)/float64(len(times)), "hub-writes/root")
}

func isGone(ctx context.Context, f *federation, root *fluxv1alpha2.MiniCluster) bool {
	err := f.hub.Client.Get(ctx, client.ObjectKeyFromObject(root), &fluxv1alpha2.MiniCluster{})
	return client.IgnoreNotFound(err) == nil && err != nil
}
