package hub

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
	"github.com/fluxfed/fluxfed/internal/report"
)

// TestJudgeAsksOncePerVersion: the policy check renders the child's pods, so it runs again only
// when the root, its lead broker's endpoint or the MemberCluster changed.
func TestJudgeAsksOncePerVersion(t *testing.T) {
	m := &rootMemory{}
	asked := 0
	refused := errors.New("namespace x is not lent")
	check := func(err error) func() error {
		return func() error { asked++; return err }
	}
	key := verdictKey{root: 1, endpoint: "127.0.0.1:30001", member: 3}

	require.NoError(t, m.judge("burst-a", key, check(nil)))
	require.NoError(t, m.judge("burst-a", key, check(refused)), "the same question, the same verdict")
	require.Equal(t, 1, asked)

	require.NoError(t, m.judge("burst-b", key, check(nil)), "each burst has its own")
	require.Equal(t, 2, asked)

	for _, changed := range []verdictKey{
		{root: 2, endpoint: key.endpoint, member: key.member},
		{root: 2, endpoint: "127.0.0.1:30002", member: key.member},
		{root: 2, endpoint: "127.0.0.1:30002", member: 4},
	} {
		before := asked
		require.ErrorIs(t, m.judge("burst-a", changed, check(refused)), refused)
		require.Equal(t, before+1, asked, "asked again for %+v", changed)
		require.ErrorIs(t, m.judge("burst-a", changed, check(nil)), refused, "a refusal is kept too")
		require.Equal(t, before+1, asked)
	}
}

// TestForgetStopsTheFollower: a root the hub forgets (deleted, or no longer bursting) leaves no
// follower running in its lead broker's container.
func TestForgetStopsTheFollower(t *testing.T) {
	r := &Reconciler{status: &report.Status{}}
	root := v1alpha2test.MiniCluster("root").UID("uid-1").Obj()
	ctx, cancel := context.WithCancel(context.Background())
	w := r.memory.of(root.UID).fluxWatch()
	w.mu.Lock()
	w.follower = &follower{cancel: cancel}
	w.mu.Unlock()

	r.forget(root)
	require.ErrorIs(t, ctx.Err(), context.Canceled, "the follower's session is closed")
	_, kept := r.memory.peek(root.UID)
	require.False(t, kept)
	r.forget(root) // a root forgotten twice is no error
}
