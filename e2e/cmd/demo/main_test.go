package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fluxfed/fluxfed/e2e/netguard"
)

func TestMain(m *testing.M) { netguard.Main(m) }

// TestDemoShowsTheFederation runs the demo, the README's first command, and checks that it shows
// what it promises, the hub's greeting of the lead broker answered by rank 0's stand-in
// included, and the elastic cycle of the on-demand example, then leaves nothing behind.
func TestDemoShowsTheFederation(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, options{}, dir), out.String())
	for _, want := range []string{
		"Every broker of the federation runs",
		"global hostlist: bursting-root-[0-1],burst-a-[0-2],burst-b-[0-1]",
		"BurstsReady          True   AllBurstsReady   2 of 2 bursts ready",
		"burst-a  member-a  demo       3     3      Ready  3 of 3 brokers ready",
		"burst-b  member-b  demo       2     2      Ready  2 of 2 brokers ready",
		"rank 0 (bursting-root-0) saw 7 of 7 ranks join",
		"every rank answers it.",
		"--context member-a -n demo get minicluster,jobs,pods",
	} {
		require.Contains(t, out.String(), want)
	}
	// The elastic act: the bursts grow for the waiting job and shrink once idle; nothing is killed.
	for _, want := range []string{
		"Flux run, 2/6 ranks online, 1 job waits for 6 nodes",
		"Flux run, 6/6 ranks online | burst-a Joined size 2/2 online 2 | burst-b Joined size 2/2 online 2",
		"the bursts idled 10s, were drained in Flux and shrank to 0, and Flux sees their ranks gone. Jobs killed: 0",
		"BurstScaledUp    raised burst burst-a from 0 to 2 brokers: 1 job waits for 6 nodes",
		"BurstScaledUp    raised burst burst-b from 0 to 2 brokers: 1 job waits for 6 nodes",
		"BurstScaledDown  lowered burst burst-b from 2 to 0 brokers: no job waits, and ranks 4-5 ran no job for 10s",
	} {
		require.Contains(t, out.String(), want)
	}
	require.Regexp(t, `(?m)\| job RUN on 6 ranks$`, out.String())
	require.Regexp(t, `(?m)^  LeadBrokerReachable\s+True\s+\w+\s+the lead broker is reachable at 127\.101\.0\.\d+:\d+$`, out.String())
	require.Regexp(t, `(?m)^lead broker:\s+127\.101\.0\.\d+:\d+ `, out.String())
	require.NotContains(t, out.String(), "NotAnswering")
	for _, member := range []string{"member-a", "member-b"} {
		require.Contains(t, out.String(), "fluxfed member add "+member+" --member-context "+member+" --hub-context hub --lend demo,demo-elastic")
		require.Regexp(t, `(?m)^  `+member+`: Ready after \S+ \(\S+ since member add began\): v1\.\d+\.\d+, 2 nodes$`, out.String())
		require.Regexp(t, `(?m)^  `+member+`\s+True\s+v1\.\d+\.\d+\s+2\s+1\s+Connected\s+[0-9a-f-]{36}\s+\S+$`, out.String(),
			"fluxfed member list shows the members Ready, each with one child")
	}
	// fluxfed status of both roots, with the pods of every cluster by rank.
	require.Contains(t, out.String(), "  MiniCluster demo/bursting-root on hub: root")
	require.Contains(t, out.String(), "  MiniCluster demo-elastic/on-demand on hub: root")
	// bursting-root's Flux instance answers the hub at the end, so its status has Flux's view.
	require.Contains(t, out.String(), "  Flux:         run, 7/7 ranks online\n")
	require.Regexp(t, `(?m)^    burst-a\s+member-a\s+demo\s+3\s+3\s+3\s+Joined\s+3\s+0\s+0\s`, out.String())
	require.Regexp(t, `(?m)^    burst-b\s+member-b\s+demo\s+2\s+2\s+2\s+Joined\s+2\s+0\s+0\s`, out.String())
	require.NotContains(t, out.String(), "not answering")
	require.Regexp(t, `(?m)^    2-3\s+burst-a-\[0-1\]\s+burst-a\s+member-a\s+-\s+2-3$`, out.String(), "the on-demand bursts are reserved again")
	require.Regexp(t, `(?m)^    6\s+member-b\s+demo/burst-b-1-\w+\s+burst-b-1\s+member-b-node-\d\s+Running\s+true$`, out.String())
	for rank, host := range []string{"bursting-root-0", "bursting-root-1", "burst-a-0", "burst-a-1", "burst-a-2", "burst-b-0", "burst-b-1"} {
		require.Regexp(t, `(?m)^  `+string(rune('0'+rank))+`\s+\S+\s+demo/`+host+`-\w+\s+`+host+`\s+\S+\s+Running$`, out.String())
	}
	_, err := os.Stat(dir)
	require.True(t, os.IsNotExist(err), "the demo removes its directory")
}

// TestDemoWithRealFlux runs make demo FLUX=real: real flux-core brokers behind every broker pod,
// the hub asking them at its default intervals.
func TestDemoWithRealFlux(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, options{RealFlux: true}, dir), out.String())
	for _, want := range []string{
		"Every rank of the federation is online in the root's Flux instance, as the hub reads it",
		"the hub asks it every 10s at first, backing off to 2m0s while nothing changes",
		"Flux run, 2/6 ranks online, 1 job waits for 6 nodes",
		"the bursts idled 10s, were drained in Flux and shrank to 0, and Flux sees their ranks gone. Jobs killed: 0",
		"BurstScaledDown  lowered burst burst-a from 2 to 0 brokers: no job waits, and ranks 2-3 ran no job for 10s",
		"  Flux:         run, 7/7 ranks online\n",
	} {
		require.Contains(t, out.String(), want)
	}
	for rank, host := range []string{"bursting-root-0", "bursting-root-1", "burst-a-0", "burst-a-1", "burst-a-2", "burst-b-0", "burst-b-1"} {
		require.Contains(t, out.String(), fmt.Sprintf("\n  %d: %s\n", rank, host), "one job ran on every rank")
	}
	require.Regexp(t, `(?m)\| job RUN on 6 ranks$`, out.String())
	require.NotContains(t, out.String(), "stand-in")
	_, err := os.Stat(dir)
	require.True(t, os.IsNotExist(err), "the demo removes its directory")
}

func TestDemoRefusesKeepWithRealFlux(t *testing.T) {
	err := run(context.Background(), &bytes.Buffer{}, options{Keep: true, RealFlux: true}, t.TempDir())
	require.ErrorContains(t, err, "KEEP=1 does not go with FLUX=real")
}

func TestDemoRefusesToStartOverARunningOne(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "state.json"), []byte(`{"clusters":[]}`), 0o600))
	err := run(context.Background(), &bytes.Buffer{}, options{}, dir)
	require.ErrorContains(t, err, "a demo is still running in "+dir)
}
