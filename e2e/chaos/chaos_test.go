package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestReportSaysWhatWasFound(t *testing.T) {
	clean := Report{Kills: 20, Changes: 130, Took: 95 * time.Second,
		Settles: []Settle{{After: 10, Consistent: true, Took: 20 * time.Millisecond}, {After: 20, Consistent: true, Took: 1500 * time.Millisecond}},
		Cleanup: Settle{After: 20, Consistent: true, Took: 900 * time.Millisecond}}
	require.False(t, clean.Failed())
	require.Equal(t, `20 kills of the hub, 130 changes to the roots, in 1m35s
settle checks consistent: 2 of 2; time to consistent after the workload paused: median 1.5s, max 1.5s
objects leaked: 0, bursts duplicated: 0, false Conflicts: 0
after deleting every root: nothing left on the members, 900ms after the deletes
`, clean.String())

	for name, broken := range map[string]Report{
		"a settle check that timed out":    {Settles: []Settle{{After: 10, Leaked: []string{"member-a Secret chaos/x-curve"}}}, Cleanup: clean.Cleanup},
		"something left after the deletes": {Cleanup: Settle{After: 10, Leaked: []string{"member-a MiniCluster chaos/x"}}},
		"a Conflict":                       {Conflicts: []string{"root-1/root-1-a: Conflict: ..."}, Cleanup: clean.Cleanup},
	} {
		require.True(t, broken.Failed(), name)
	}
	// The same object found leaked at two checks is one object leaked.
	leak := "member-a Secret chaos/x-curve (root x, uid 1) is wanted by no root"
	broken := Report{Kills: 10, Settles: []Settle{{After: 10, Leaked: []string{leak},
		Duplicated: []string{"burst 1 x/x-a has 2 children: ..."}}},
		Cleanup: Settle{After: 10, Leaked: []string{leak}}, Conflicts: []string{"x/x-a: Conflict: MiniCluster chaos/x-a: ..."}}
	require.Equal(t, `10 kills of the hub, 0 changes to the roots, in 0s
settle checks consistent: 0 of 1
objects leaked: 1, bursts duplicated: 1, false Conflicts: 1
after deleting every root: 1 object left
after 10 kills, not consistent within the timeout:
  member-a Secret chaos/x-curve (root x, uid 1) is wanted by no root
  burst 1 x/x-a has 2 children: ...
after deleting every root, not consistent within the timeout:
  member-a Secret chaos/x-curve (root x, uid 1) is wanted by no root
false Conflict: x/x-a: Conflict: MiniCluster chaos/x-a: ...
`, broken.String())
}
