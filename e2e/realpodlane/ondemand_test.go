//go:build realpods

package realpodlane

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/fleet"
	"github.com/fluxfed/fluxfed/flux"
)

// scaleDownAfter is the idle time of the on-demand root, short for the test.
const scaleDownAfter = 10 * time.Second

// fluxJob is what flux jobs --json says of a job.
type fluxJob struct {
	ID        json.Number `json:"id"`
	State     string      `json:"state"`
	Result    string      `json:"result"`
	TRun      float64     `json:"t_run"`
	TInactive float64     `json:"t_inactive"`
}

// testOnDemand runs the on-demand cycle on real pods with the hub's default settings: a root of
// two brokers with two bursts reserved at 0 (up to 2 brokers each) gets a job that needs every
// reserved rank; the hub grows both bursts, their brokers join from the members' real pods, the
// job runs and ends, and once idle the bursts are drained and shrunk to 0.
func testOnDemand(t *testing.T, f *fleet.Fleet) {
	ctx := context.Background()
	hubClient := f.Clients["hub"]
	const ns = "on-demand"
	require.NoError(t, hubClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	describeOnFailure(t, hubClient, ns)
	for _, m := range f.Members {
		describeOnFailure(t, f.Clients[m.Name], ns)
	}
	root := realMiniCluster("on-demand", ns, 2, "hostname").Interactive().Expose(hubAddress.String()).
		Bursts(fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 0, MaxSize: 2},
			fluxv1alpha2.Burst{Name: "burst-b", Cluster: "member-b", Size: 0, MaxSize: 2}).
		Spec(func(s *fluxv1alpha2.MiniClusterSpec) {
			s.Flux.Bursting.Scaling = &fluxv1alpha2.Scaling{Mode: fluxv1alpha2.ScalingOnDemand,
				ScaleDownAfter: &metav1.Duration{Duration: scaleDownAfter}}
		}).Obj()
	created := time.Now()
	require.NoError(t, hubClient.Create(ctx, root))
	t.Cleanup(func() { _ = hubClient.Delete(context.Background(), root) })
	got := &fluxv1alpha2.MiniCluster{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, hubClient.Get(ctx, client.ObjectKeyFromObject(root), got))
		require.NotNil(c, got.Status.Flux)
		require.Equal(c, fluxv1alpha2.FluxStatus{State: "run", Size: 6, Online: 2}, *got.Status.Flux)
	}, busyWait, time.Second)
	t.Logf("The on-demand root runs on its two ranks, as the hub reads it, %s after its creation", time.Since(created).Round(100*time.Millisecond))

	_, err := fluxIn(ctx, t, f, root, "submit", "-N6", "sleep", "4")
	require.NoError(t, err)
	at := map[string]time.Time{"submitted": time.Now()}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, hubClient.Get(ctx, client.ObjectKeyFromObject(root), got))
		a, b := burstOf(got, "burst-a"), burstOf(got, "burst-b")
		require.NotNil(c, a)
		require.NotNil(c, b)
		if _, ok := at["decided"]; !ok && (a.Size > 0 || b.Size > 0) {
			at["decided"] = time.Now()
		}
		if _, ok := at["decided"]; ok {
			if _, ok := at["online"]; !ok {
				if out, err := fluxIn(ctx, c, f, root, "uptime"); err == nil {
					if u, err := flux.ParseUptime(out); err == nil && u.Offline == 0 {
						at["online"] = time.Now()
					}
				}
			}
		}
		require.Equal(c, []fluxv1alpha2.BurstPhase{fluxv1alpha2.BurstJoined, fluxv1alpha2.BurstJoined}, []fluxv1alpha2.BurstPhase{a.Phase, b.Phase},
			"%s; %s", a.Message, b.Message)
		at["joined"] = time.Now()
	}, busyWait, 200*time.Millisecond, "the bursts never joined")

	var job fluxJob
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		out, err := fluxIn(ctx, c, f, root, "jobs", "-a", "--json")
		require.NoError(c, err)
		var list struct {
			Jobs []fluxJob `json:"jobs"`
		}
		require.NoError(c, json.Unmarshal([]byte(out), &list))
		require.NotEmpty(c, list.Jobs)
		job = list.Jobs[0]
		require.Equal(c, "INACTIVE", job.State, "the job ran and ended")
	}, busyWait, time.Second)
	require.Equal(t, "COMPLETED", job.Result, "the job ran to its end")
	at["running"], at["ended"] = floatTime(job.TRun), floatTime(job.TInactive)

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, hubClient.Get(ctx, client.ObjectKeyFromObject(root), got))
		if _, ok := at["drained"]; !ok && burstOf(got, "burst-a").Drained+burstOf(got, "burst-b").Drained > 0 {
			at["drained"] = time.Now()
		}
		for _, b := range []string{"burst-a", "burst-b"} {
			s := burstOf(got, b)
			require.Equal(c, fluxv1alpha2.BurstReserved, s.Phase, "%s: %s", b, s.Message)
		}
		for _, m := range []string{"member-a", "member-b"} {
			var pods corev1.PodList
			require.NoError(c, f.Clients[m].List(ctx, &pods, client.InNamespace(ns)))
			require.Empty(c, pods.Items, "the burst's pods on %s", m)
		}
		at["shrunk"] = time.Now()
	}, busyWait+scaleDownAfter, time.Second, "the bursts never shrank")
	t.Logf("On-demand cycle on real pods, the hub's default settings (load average %s): %s", loadAverage(), timeline(at))
}

func floatTime(s float64) time.Time { return time.Unix(0, int64(s*1e9)) }

// timeline prints the steps of a cycle, each with the time since the one before.
func timeline(at map[string]time.Time) string {
	var b strings.Builder
	prev := at["submitted"]
	for _, step := range []string{"decided", "online", "joined", "running", "ended", "drained", "shrunk"} {
		if t, ok := at[step]; ok {
			fmt.Fprintf(&b, " -> %s +%v", step, t.Sub(prev).Round(100*time.Millisecond))
			prev = t
		}
	}
	return "submitted" + b.String()
}
