package hub_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hub"
	"github.com/fluxfed/fluxfed/hub/members"
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

// withDefaultHealth is hub.Options with the members' health checks and timeouts at the
// defaults a hub runs with (the tests' federations check more often).
func withDefaultHealth(opts hub.Options) hub.Options {
	opts.Members.HealthInterval = members.DefaultHealthInterval
	opts.Members.HealthTimeout = members.DefaultHealthTimeout
	opts.Members.FailureThreshold = members.DefaultFailureThreshold
	opts.MemberTimeout = hub.DefaultMemberTimeout
	return opts
}

// BenchmarkMemberOutage measures, with the default health checks, how long the hub takes to see
// that a member stopped answering (its MemberCluster Ready=False, and the root's burst there
// Unreachable), and to see it back (Ready=True, and the burst Applied again after its re-sync):
//
//	go test ./hub -run '^$' -bench MemberOutage -benchtime 3x
//
// Each run stops the member at a random point of the health check's period (the proxy the hub
// reaches it through refuses connections), so the figures spread over one period.
func BenchmarkMemberOutage(b *testing.B) {
	f := startFederation(b, withDefaultHealth(hub.Options{}), "member-a", "member-b")
	_, root := f.burstOntoBoth(b, "outage")
	m := f.members["member-b"]
	var detect, unreachable, recover, back []time.Duration
	for b.Loop() {
		time.Sleep(time.Duration(rand.Int64N(int64(members.DefaultHealthInterval))))
		start := time.Now()
		m.proxy.Cut()
		detect = append(detect, f.waitMemberB(b, metav1.ConditionFalse, start))
		f.waitBurst(b, root, "burst-b", fluxv1alpha2.BurstUnreachable)
		unreachable = append(unreachable, time.Since(start))

		time.Sleep(time.Duration(rand.Int64N(int64(members.DefaultHealthInterval))))
		start = time.Now()
		m.proxy.Restore(b)
		recover = append(recover, f.waitMemberB(b, metav1.ConditionTrue, start))
		f.waitBurst(b, root, "burst-b", fluxv1alpha2.BurstApplied)
		back = append(back, time.Since(start))
	}
	report(b, "detect", detect)
	report(b, "burst-unreachable", unreachable)
	report(b, "recover", recover)
	report(b, "burst-back", back)
}

// waitMemberB waits until member-b's Ready condition has status, and returns how long after start.
func (f *federation) waitMemberB(b testing.TB, status metav1.ConditionStatus, start time.Time) time.Duration {
	const member = "member-b"
	for {
		c := meta.FindStatusCondition(f.memberCluster(b, member).Status.Conditions, fedv1alpha1.ConditionReady)
		if c != nil && c.Status == status {
			return time.Since(start)
		}
		if time.Since(start) > 2*time.Minute {
			b.Fatalf("member %s never turned Ready=%s", member, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BenchmarkHangingMember measures, with the default timeouts, what a member that stops answering
// (it accepts connections and never replies) costs the bursts on other members:
//
//		go test ./hub -run '^$' -bench HangingMember -benchtime 3x
//
//	  - other-root: a root that bursts only onto member-a, while member-b hangs, from its creation
//	    until its burst is reported Applied; compare with baseline, the same before member-b hangs.
//	  - same-root: a root that bursts onto both, created the moment member-b starts to hang (the
//	    hub still thinks it Ready): until its burst on member-a is reported Applied. The push to
//	    member-b holds the report back by at most the member timeout (10s).
//	  - same-root-later: the same once the hub has seen member-b hang: nothing is held back.
func BenchmarkHangingMember(b *testing.B) {
	f := startFederation(b, withDefaultHealth(hub.Options{}), "member-a", "member-b")
	ctx := context.Background()
	m := f.members["member-b"]
	var baseline, otherRoot, sameRoot, sameRootLater []time.Duration
	i := 0
	applied := func(ns, name string, bursts ...fluxv1alpha2.Burst) time.Duration {
		root := newRoot(ns, name, bursts...)
		start := time.Now()
		require.NoError(b, f.hub.Client.Create(ctx, root))
		f.waitBurst(b, root, bursts[0].Name, fluxv1alpha2.BurstApplied)
		return time.Since(start)
	}
	for b.Loop() {
		i++
		// Every root in a namespace of its own: its children's names are the bursts'.
		onA := fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 1}
		onB := fluxv1alpha2.Burst{Name: "burst-b", Cluster: "member-b", Size: 1}
		baseline = append(baseline, applied(f.namespace(b), fmt.Sprintf("baseline-%d", i), onA))

		m.proxy.Hang()
		sameRoot = append(sameRoot, applied(f.namespace(b), fmt.Sprintf("same-%d", i), onA, onB))
		otherRoot = append(otherRoot, applied(f.namespace(b), fmt.Sprintf("other-%d", i), onA))
		f.waitMemberB(b, metav1.ConditionFalse, time.Now())
		sameRootLater = append(sameRootLater, applied(f.namespace(b), fmt.Sprintf("later-%d", i), onA, onB))

		m.proxy.Unhang()
		f.waitMemberB(b, metav1.ConditionTrue, time.Now())
	}
	report(b, "baseline", baseline)
	report(b, "other-root", otherRoot)
	report(b, "same-root", sameRoot)
	report(b, "same-root-later", sameRootLater)
}

// report records the median and the largest of durations, in seconds.
func report(b *testing.B, name string, durations []time.Duration) {
	slices.Sort(durations)
	b.ReportMetric(durations[len(durations)/2].Seconds(), name+"-median-s")
	b.ReportMetric(durations[len(durations)-1].Seconds(), name+"-max-s")
}
