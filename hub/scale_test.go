package hub_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/flux"
	"github.com/fluxfed/fluxfed/hub"
)

// testABurstGrowsForWaitingJobsAndShrinksOnceDrained runs on-demand scaling against a stand-in
// flux: a job that needs more nodes than are online grows a burst reserved at 0; while the job
// runs nothing shrinks; once the burst's rank idles it is drained in Flux first, and the burst
// shrinks back to 0 only when Flux reports the rank drained.
func testABurstGrowsForWaitingJobsAndShrinksOnceDrained(t *testing.T, f *federation) {
	ctx := context.Background()
	ns := f.namespace(t)
	a := f.members["member-a"]
	root := newRoot(ns, "ondemand", fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 0, MaxSize: 2})
	root.Spec.Flux.Bursting.Scaling = &fluxv1alpha2.Scaling{Mode: fluxv1alpha2.ScalingOnDemand, ScaleDownAfter: &metav1.Duration{Duration: time.Second}}
	require.NoError(t, f.hub.Client.Create(ctx, root))
	f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstReserved)

	hosts := []string{"ondemand-0", "ondemand-1", "ondemand-2", "ondemand-3", "burst-a-0", "burst-a-1"}
	dir := f.execs.standInFlux(t, ns)
	root2 := map[int]bool{0: true, 1: true}
	instance(t, dir, hosts, fluxState{online: root2, pending: 3})
	runningLead(t, f, root, "ondemand")

	// Up: one job waits for 3 nodes, 2 are online: burst-a runs 1 broker, not its 2.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		child := a.child(c, ns, "burst-a")
		require.NotNil(c, child)
		require.Equal(c, int32(1), child.Spec.Size)
		require.Equal(c, int32(2), child.Spec.MaxSize)
		s := burstStatus(f.root(c, root), "burst-a")
		require.Equal(c, int32(1), s.Size)
	}, wait, tick)
	f.requireEvent(t, ns, fluxv1alpha2.EventBurstScaledUp, "raised burst burst-a from 0 to 1 broker: 1 job waits for 3 nodes, and 2 ranks can run it")
	require.Equal(t, int32(0), f.root(t, root).Spec.Flux.Bursting.Clusters[0].Size, "the user's spec is never rewritten")

	// The broker joins and the job runs on it: nothing changes, however long it runs.
	withBurst := map[int]bool{0: true, 1: true, 4: true}
	instance(t, dir, hosts, fluxState{online: withBurst, running: []int{0, 1, 4}})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		s := burstStatus(f.root(c, root), "burst-a")
		require.Equal(c, int32(1), s.Online)
	}, wait, tick)
	time.Sleep(2 * time.Second)
	require.NoFileExists(t, filepath.Join(dir, "commands"), "no rank that runs a job is drained")
	require.Equal(t, int32(1), a.child(t, ns, "burst-a").Spec.Size)

	// The job ends; after a second idle the rank is drained, and the burst keeps running
	// until Flux says it is drained.
	instance(t, dir, hosts, fluxState{online: withBurst})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		data, err := os.ReadFile(filepath.Join(dir, "commands"))
		require.NoError(c, err)
		require.Equal(c, "resource drain 4 "+flux.DrainReason+"\n", string(data))
	}, wait, tick)
	require.Equal(t, int32(1), a.child(t, ns, "burst-a").Spec.Size, "not removed before Flux reports it drained")
	instance(t, dir, hosts, fluxState{online: withBurst, drained: map[int]bool{4: true}})
	f.waitBurst(t, root, "burst-a", fluxv1alpha2.BurstReserved)
	require.EventuallyWithT(t, func(c *assert.CollectT) { require.Nil(c, a.child(c, ns, "burst-a")) }, wait, tick)
	f.requireEvent(t, ns, fluxv1alpha2.EventBurstScaledDown, "lowered burst burst-a from 1 to 0 brokers: no job waits, and ranks 4 ran no job for 1s")

	// A job waits again: the rank is undrained as its broker starts again.
	instance(t, dir, hosts, fluxState{online: root2, drained: map[int]bool{4: true}, pending: 3})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		child := a.child(c, ns, "burst-a")
		require.NotNil(c, child)
		require.Equal(c, int32(1), child.Spec.Size)
		data, err := os.ReadFile(filepath.Join(dir, "commands"))
		require.NoError(c, err)
		require.True(c, strings.HasSuffix(string(data), "resource undrain 4\n"), string(data))
	}, wait, tick)
	require.NoError(t, f.hub.Client.Delete(ctx, root))
}

// BenchmarkOnDemandCycle measures one on-demand cycle against a stand-in flux in the lead
// broker's container (a hub and a member API server in this process; the hub asks Flux every
// second, FluxInterval, and shrinks after 2 s idle):
//
//	go test ./hub -run '^$' -bench OnDemandCycle -benchtime 5x
//
// It reports, as medians over the runs: decide-ms, from a job that waits for the burst's ranks
// until the hub raised the burst's child (the decision and its push); drain-ms, from the end of
// the job until the hub drained the idle rank in Flux, less the 2 s idle time; shrink-ms, from
// Flux reporting the rank drained until the child is gone; and jobs-killed, the ranks removed
// while the stand-in's job ran on them (0 by construction of the rule, counted anyway).
func BenchmarkOnDemandCycle(b *testing.B) {
	f := startFederation(b, hub.Options{FluxInterval: time.Second, FluxIntervalMax: time.Second}, "member-a")
	ctx := context.Background()
	a := f.members["member-a"]
	const idle = 2 * time.Second
	var decide, drain, shrink []time.Duration
	killed := 0
	i := 0
	for b.Loop() {
		i++
		ns := f.namespace(b)
		root := newRoot(ns, fmt.Sprintf("cycle-%d", i), fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 0, MaxSize: 2})
		root.Spec.Flux.Bursting.Scaling = &fluxv1alpha2.Scaling{Mode: fluxv1alpha2.ScalingOnDemand, ScaleDownAfter: &metav1.Duration{Duration: idle}}
		require.NoError(b, f.hub.Client.Create(ctx, root))
		f.waitBurst(b, root, "burst-a", fluxv1alpha2.BurstReserved)
		hosts := []string{root.Name + "-0", root.Name + "-1", root.Name + "-2", root.Name + "-3", "burst-a-0", "burst-a-1"}
		dir := f.execs.standInFlux(b, ns)
		instance(b, dir, hosts, fluxState{online: map[int]bool{0: true, 1: true}})
		runningLead(b, f, root, root.Name)
		time.Sleep(1500 * time.Millisecond) // the hub has seen the idle instance

		start := time.Now()
		instance(b, dir, hosts, fluxState{online: map[int]bool{0: true, 1: true}, pending: 4})
		for c := a.child(b, ns, "burst-a"); c == nil || c.Spec.Size != 2; c = a.child(b, ns, "burst-a") {
			time.Sleep(5 * time.Millisecond)
		}
		decide = append(decide, time.Since(start))

		running := []int{0, 1, 4, 5}
		instance(b, dir, hosts, fluxState{online: map[int]bool{0: true, 1: true, 4: true, 5: true}, running: running})
		time.Sleep(idle + time.Second)
		if c := a.child(b, ns, "burst-a"); c == nil || c.Spec.Size != 2 {
			killed++ // shrunk while its job ran
		}
		start = time.Now()
		instance(b, dir, hosts, fluxState{online: map[int]bool{0: true, 1: true, 4: true, 5: true}})
		for {
			data, _ := os.ReadFile(filepath.Join(dir, "commands"))
			if strings.Contains(string(data), "resource drain") {
				break
			}
			if c := a.child(b, ns, "burst-a"); c == nil || c.Spec.Size < 2 {
				killed++ // removed before it was drained
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		drain = append(drain, time.Since(start)-idle)

		start = time.Now()
		instance(b, dir, hosts, fluxState{online: map[int]bool{0: true, 1: true, 4: true, 5: true}, drained: map[int]bool{4: true, 5: true}})
		for a.child(b, ns, "burst-a") != nil {
			time.Sleep(5 * time.Millisecond)
		}
		shrink = append(shrink, time.Since(start))
		require.NoError(b, f.hub.Client.Delete(ctx, root))
	}
	median := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Milliseconds())
	}
	b.ReportMetric(median(decide), "decide-ms")
	b.ReportMetric(median(drain), "drain-ms")
	b.ReportMetric(median(shrink), "shrink-ms")
	b.ReportMetric(float64(killed), "jobs-killed")
}
