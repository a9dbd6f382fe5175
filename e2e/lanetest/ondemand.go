package lanetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/flux"
)

// OnDemandBursts gives a root two bursts reserved at 0, burst-a on member-a and burst-b on
// member-b, up to 2 brokers each, scaled on demand and shrunk after scaleDownAfter idle.
func OnDemandBursts(b *v1alpha2test.Builder, scaleDownAfter time.Duration) *v1alpha2test.Builder {
	return b.Bursts(fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 0, MaxSize: 2},
		fluxv1alpha2.Burst{Name: "burst-b", Cluster: "member-b", Size: 0, MaxSize: 2}).
		Spec(func(s *fluxv1alpha2.MiniClusterSpec) {
			s.Flux.Bursting.Scaling = &fluxv1alpha2.Scaling{Mode: fluxv1alpha2.ScalingOnDemand,
				ScaleDownAfter: &metav1.Duration{Duration: scaleDownAfter}}
		})
}

// FluxIn runs a flux command (args without "flux") in the lead broker of a root's instance.
type FluxIn func(ctx context.Context, t require.TestingT, args ...string) (string, error)

// FluxJob is what flux jobs --json says of a job.
type FluxJob struct {
	ID        json.Number `json:"id"`
	State     string      `json:"state"`
	Result    string      `json:"result"`
	TRun      float64     `json:"t_run"`
	TInactive float64     `json:"t_inactive"`
	Nnodes    int         `json:"nnodes"`
}

// Jobs lists every job of an instance, newest first, as flux jobs -a --json does.
func Jobs(t require.TestingT, fluxIn FluxIn) []FluxJob {
	out, err := fluxIn(context.Background(), t, "jobs", "-a", "--json")
	require.NoError(t, err)
	var list struct {
		Jobs []FluxJob `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	return list.Jobs
}

// Cycle is one on-demand cycle of a root made with OnDemandBursts, on the hub of clients (the
// fleet's clients by cluster name).
type Cycle struct {
	Clients map[string]client.Client
	Root    *fluxv1alpha2.MiniCluster
	FluxIn  FluxIn
	// Wait is how long each step may take, asking every Tick (and five times as often while the
	// bursts join, which is timed); ScaleDownAfter is the root's.
	Wait, Tick, ScaleDownAfter time.Duration
}

// Run runs the cycle: submit makes a job that needs every reserved rank wait and returns when;
// the hub grows both bursts, their brokers join, the job runs and ends, and once idle the bursts
// are drained and shrunk to 0, their pods gone. It returns the time of each step (Timeline).
func (cy Cycle) Run(t *testing.T, submit func() time.Time) map[string]time.Time {
	t.Helper()
	ctx := context.Background()
	hub, root := cy.Clients["hub"], cy.Root
	at := map[string]time.Time{"submitted": submit()}
	got := &fluxv1alpha2.MiniCluster{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, hub.Get(ctx, client.ObjectKeyFromObject(root), got))
		a, b := BurstOf(got, "burst-a"), BurstOf(got, "burst-b")
		require.NotNil(c, a)
		require.NotNil(c, b)
		if _, ok := at["decided"]; !ok && (a.Size > 0 || b.Size > 0) {
			at["decided"] = time.Now()
		}
		if _, ok := at["online"]; !ok && at["decided"] != (time.Time{}) {
			if out, err := cy.FluxIn(ctx, c, "uptime"); err == nil {
				if u, err := flux.ParseUptime(out); err == nil && u.Offline == 0 {
					at["online"] = time.Now()
				}
			}
		}
		require.Equal(c, []fluxv1alpha2.BurstPhase{fluxv1alpha2.BurstJoined, fluxv1alpha2.BurstJoined}, []fluxv1alpha2.BurstPhase{a.Phase, b.Phase},
			"%s; %s", a.Message, b.Message)
		at["joined"] = time.Now()
	}, cy.Wait, cy.Tick/5, "the bursts never joined")

	var job FluxJob
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		list := Jobs(c, cy.FluxIn)
		require.NotEmpty(c, list)
		job = list[0]
		require.Equal(c, "INACTIVE", job.State, "the job ran and ended")
	}, cy.Wait, cy.Tick)
	require.Equal(t, "COMPLETED", job.Result, "the job ran to its end")
	at["running"], at["ended"] = FloatTime(job.TRun), FloatTime(job.TInactive)

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, hub.Get(ctx, client.ObjectKeyFromObject(root), got))
		if _, ok := at["drained"]; !ok && BurstOf(got, "burst-a").Drained+BurstOf(got, "burst-b").Drained > 0 {
			at["drained"] = time.Now()
		}
		for _, b := range []string{"burst-a", "burst-b"} {
			s := BurstOf(got, b)
			require.Equal(c, fluxv1alpha2.BurstReserved, s.Phase, "%s: %s", b, s.Message)
		}
		for _, m := range []string{"member-a", "member-b"} {
			var pods corev1.PodList
			require.NoError(c, cy.Clients[m].List(ctx, &pods, client.InNamespace(root.Namespace)))
			require.Empty(c, pods.Items, "the burst's pods on %s", m)
		}
		at["shrunk"] = time.Now()
	}, cy.Wait+cy.ScaleDownAfter, cy.Tick, "the bursts never shrank")
	return at
}

// FloatTime is the time of a flux timestamp (seconds since the epoch).
func FloatTime(s float64) time.Time { return time.Unix(0, int64(s*1e9)) }

// Timeline prints the steps of a cycle, each with the time since the one before.
func Timeline(at map[string]time.Time) string {
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

// LeadPod returns the running pod of rank 0 of root on the hub of clients.
func LeadPod(t require.TestingT, clients map[string]client.Client, root *fluxv1alpha2.MiniCluster) *corev1.Pod {
	return RunningPod(t, clients["hub"], root, 0)
}

// TwoBurstRoot is the root both lanes' federation tests run: lammps in namespace research, two
// brokers on the hub, a burst of two on member-a and one of one on member-b.
func TwoBurstRoot(b *v1alpha2test.Builder) *v1alpha2test.Builder {
	return b.Interactive().Bursts(fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 2},
		fluxv1alpha2.Burst{Name: "burst-b", Cluster: "member-b", Size: 1})
}

// WaitJoined waits until the hub reads every one of online ranks of root online and both of its
// bursts Joined, and returns root as the hub last read it.
func WaitJoined(t *testing.T, clients map[string]client.Client, root *fluxv1alpha2.MiniCluster, online int32, wait, tick time.Duration) *fluxv1alpha2.MiniCluster {
	t.Helper()
	got := &fluxv1alpha2.MiniCluster{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, clients["hub"].Get(context.Background(), client.ObjectKeyFromObject(root), got))
		require.NotNil(c, got.Status.Flux, "the hub has not asked Flux yet")
		require.Equal(c, online, got.Status.Flux.Online, "ranks online: %+v", got.Status.Flux)
		for _, b := range []string{"burst-a", "burst-b"} {
			s := BurstOf(got, b)
			require.NotNil(c, s)
			require.Equal(c, fluxv1alpha2.BurstJoined, s.Phase, "%s: %s", b, s.Message)
		}
	}, wait, tick)
	return got
}

// RequireHosts requires the output of flux run hostname to be want, in any order.
func RequireHosts(t *testing.T, out string, want ...string) {
	t.Helper()
	hosts := strings.Fields(out)
	slices.Sort(hosts)
	require.Equal(t, want, hosts)
}

// DeleteAndWaitGone deletes root and waits until it is gone from the hub and no pod is left in
// its namespace on the hub, member-a and member-b.
func DeleteAndWaitGone(t *testing.T, clients map[string]client.Client, root *fluxv1alpha2.MiniCluster, wait, tick time.Duration) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, clients["hub"].Delete(ctx, root))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, apierrors.IsNotFound(clients["hub"].Get(ctx, client.ObjectKeyFromObject(root), &fluxv1alpha2.MiniCluster{})))
		for _, name := range []string{"hub", "member-a", "member-b"} {
			var pods corev1.PodList
			require.NoError(c, clients[name].List(ctx, &pods, client.InNamespace(root.Namespace)))
			require.Empty(c, pods.Items, "pods left on %s", name)
		}
	}, wait, tick)
}
