package members

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
)

// TestTheHeartbeatIsNeverOlderThanARecordIntervalAndACheck follows a healthy member for an
// hour as the reconciler sees it: visited every record interval, its last answer up to one
// health interval before each visit. The recorded heartbeat is never older than a record
// interval and a health interval; with a threshold of the record interval alone, an answer just
// under it old is skipped and the heartbeat read up to two record intervals old (the issue's
// 75-108 s with a minute).
func TestTheHeartbeatIsNeverOlderThanARecordIntervalAndACheck(t *testing.T) {
	const recordInterval, healthInterval = time.Minute, 5 * time.Second
	start := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	for _, skew := range []time.Duration{0, time.Second, 2500 * time.Millisecond, 4900 * time.Millisecond} {
		mc := &fedv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "m", Generation: 1}}
		oldest := time.Duration(0)
		for visit := range 60 {
			now := start.Add(time.Duration(visit)*recordInterval + time.Duration(visit%5)*time.Second/7)
			// The last health check answered some time within the last health interval.
			seen := now.Add(-skew)
			snap := Snapshot{State: State{Phase: PhaseReady, Reason: fedv1alpha1.ReasonConnected}, LastSeen: seen}
			if mc.Status.LastHeartbeatTime != nil {
				// How old the heartbeat reads just before this visit records anything.
				oldest = max(oldest, now.Sub(mc.Status.LastHeartbeatTime.Time))
			}
			mc.Status = ComputeStatus(mc, snap, Children{}, metav1.NewTime(now), heartbeatAfter(recordInterval, healthInterval))
		}
		require.LessOrEqual(t, oldest, recordInterval+healthInterval+time.Second, "skew %v", skew)
	}
}

func TestHeartbeatAfter(t *testing.T) {
	require.Equal(t, 55*time.Second, heartbeatAfter(time.Minute, 5*time.Second))
	require.Equal(t, 30*time.Second, heartbeatAfter(time.Minute, 50*time.Second), "never less than half the record interval")
}
