package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fluxfed/fluxfed/e2e/chaos"
)

// TestTheHubKilledAtRandomLeavesTheFederationAsSpecified kills the hub's process (SIGKILL) a few
// times at random moments while roots are created, resized, moved and deleted: at every settle
// check and after every root is deleted, the members hold exactly what the roots' specs want, and
// the hub never reported a Conflict with its own objects. `make chaos` runs the same with 100
// kills on a fleet of its own.
func TestTheHubKilledAtRandomLeavesTheFederationAsSpecified(t *testing.T) {
	report, err := chaos.Run(context.Background(), shared, chaos.Options{
		Kills: 6, SettleEvery: 3, Roots: 4, Seed: uint64(time.Now().UnixNano()), Namespace: "chaos-e2e", Logf: t.Logf,
		SettleTimeout: wait,
	})
	t.Log("\n" + report.String())
	require.NoError(t, err)
	require.False(t, report.Failed(), "the federation was not as specified")
	require.Equal(t, 6, report.Kills)
}
