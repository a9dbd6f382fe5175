package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/fleet"
	"github.com/fluxfed/fluxfed/e2e/netguard"
	"github.com/fluxfed/fluxfed/hub/probe"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

func TestMain(m *testing.M) { netguard.Main(m) }

// TestDemoShowsTheFederation runs the demo, the README's first command, and checks that it shows
// what it promises, the hub's greeting of the lead broker answered by rank 0's stand-in
// included, and the elastic cycle of the on-demand example, then leaves nothing behind. It
// shows the root once, in full, and its progress lines each from one observation.
func TestDemoShowsTheFederation(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, options{}, dir), out.String())
	text := out.String()
	for _, want := range []string{
		"Every broker of the federation runs",
		"the burst brokers routed through the lead broker's NodePort: rank 0 (bursting-root-0) saw 7 of 7 ranks join in ",
		"; every rank answers it\n",
		"KEEP=1 make demo leaves all this running, and says how to look at it and how to stop it.",
	} {
		require.Contains(t, text, want)
	}
	// The elastic act: the bursts grow for the waiting job and shrink once idle; nothing is killed.
	for _, want := range []string{
		"] hub: Flux run, 2/6 ranks online, 1 job waits for 6 nodes | burst-a ",
		"] hub: Flux run, 6/6 ranks online | burst-a Joined size 2/2 online 2 | burst-b Joined size 2/2 online 2\n",
		"] hub: Flux run, 2/6 ranks online | burst-a Reserved size 0/2 online 0 draining 0 drained 2 | burst-b Reserved size 0/2 online 0 draining 0 drained 2\n",
		"the bursts idled 10s, were drained in Flux and shrank to 0, and Flux sees their ranks gone. Jobs killed: 0",
		"BurstScaledUp    raised burst burst-a from 0 to 2 brokers: 1 job waits for 6 nodes",
		"BurstScaledUp    raised burst burst-b from 0 to 2 brokers: 1 job waits for 6 nodes",
		"BurstScaledDown  lowered burst burst-b from 2 to 0 brokers: no job waits, and ranks 4-5 ran no job for 10s",
	} {
		require.Contains(t, text, want)
	}
	// The jobs as the instance lists them are a line of their own, never mixed with what the
	// hub last read of Flux.
	require.Regexp(t, `(?m)^\[\s*\d+\.\ds\] flux jobs: RUN on 6 ranks$`, text)
	require.NotRegexp(t, `hub: .*job (SCHED|RUN|INACTIVE)`, text)
	require.NotContains(t, text, "NotAnswering")
	for _, member := range []string{"member-a", "member-b"} {
		require.Contains(t, text, "fluxfed member add "+member+" --member-context "+member+" --hub-context hub --lend demo,demo-elastic")
		require.Regexp(t, `(?m)^  `+member+`: Ready after \S+ \(\S+ since member add began\): v1\.\d+\.\d+, 2 nodes$`, text)
	}
	require.Contains(t, text, "  member-a: installed access from deploy/member-access", "member add's output is shown for the first member")
	require.NotContains(t, text, "  member-b: installed access", "and not again for the second")
	// The root, once, in full: fluxfed status with Flux's view, the lead broker, every burst and
	// the pods of every cluster by rank.
	require.Equal(t, 1, strings.Count(text, "  MiniCluster demo/bursting-root on hub: root\n"), "the root is shown once")
	require.Equal(t, 1, strings.Count(text, "Hostlist:"), "the root is shown once")
	require.NotContains(t, text, "on-demand on hub: root", "the on-demand root's end shows in its progress line, not in another status")
	require.Contains(t, text, "  Hostlist:     bursting-root-[0-1],burst-a-[0-2],burst-b-[0-1]\n")
	require.Contains(t, text, "  Flux:         run, 7/7 ranks online\n")
	require.Regexp(t, `(?m)^  Lead broker:\s+127\.101\.0\.\d+:\d+$`, text)
	require.Regexp(t, `(?m)^    BurstsReady\s+True\s+AllBurstsReady\s+2 of 2 bursts ready$`, text)
	require.Regexp(t, `(?m)^    LeadBrokerReachable\s+True\s+\w+\s+the lead broker is reachable at 127\.101\.0\.\d+:\d+$`, text)
	require.Regexp(t, `(?m)^    burst-a\s+member-a\s+demo\s+3\s+3\s+3\s+Joined\s+3\s+0\s+0\s`, text)
	require.Regexp(t, `(?m)^    burst-b\s+member-b\s+demo\s+2\s+2\s+2\s+Joined\s+2\s+0\s+0\s`, text)
	require.NotContains(t, text, "not answering")
	for rank, host := range []string{"bursting-root-0", "bursting-root-1", "burst-a-0", "burst-a-1", "burst-a-2", "burst-b-0", "burst-b-1"} {
		require.Regexp(t, `(?m)^    `+strconv.Itoa(rank)+`\s+\S+\s+demo/`+host+`-\w+\s+`+host+`\s+\S+\s+Running\s+true$`, text)
	}
	require.Less(t, strings.Count(text, "\n"), 100, "the demo says it in under 100 lines")
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
	require.Regexp(t, `(?m)^\[\s*\d+\.\ds\] flux jobs: RUN on 6 ranks$`, out.String())
	require.Equal(t, 1, strings.Count(out.String(), "  MiniCluster demo/bursting-root on hub: root\n"), "the root is shown once")
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

// TestDemoKeepLeavesAWorkingFederation runs KEEP=1 make demo: after the demo returned, and its
// own stand-ins with it, the kept root's Flux still answers the hub (through exec into its lead
// broker's pod, so the nodes' kubelet endpoints are still served) and its lead broker endpoint
// still greets as ZMTP; `fluxfed status` shows both. make clusters-down then stops everything,
// the stand-ins' process included, and leaves nothing in the demo's directory.
func TestDemoKeepLeavesAWorkingFederation(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	t.Cleanup(func() { // whatever a failure left running
		if f, err := fleet.Load(dir); err == nil {
			_ = f.Stop()
		}
	})
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, options{Keep: true}, dir), out.String())
	text := out.String()
	require.Contains(t, text, "The clusters, the managers and the stand-ins keep running (KEEP=1). Stop them all, and remove their files, with:\n  make clusters-down CLUSTERS_DIR="+dir+"\n")
	require.Regexp(t, `The stand-ins \(Flux of both roots, rank 0 behind each lead broker's NodePort, exec into pods\) run on in process \d+; its log: `+regexp.QuoteMeta(dir)+`/hub/logs/demo-stand-ins.log`, text)
	require.Contains(t, text, "  bin/fluxfed status bursting-root -n demo --context hub --member-context member-a=member-a --member-context member-b=member-b\n")
	require.Contains(t, text, "  export KUBECONFIG="+dir+"/kubeconfig\n")

	f, err := fleet.Load(dir)
	require.NoError(t, err)
	ctx := context.Background()
	root := &fluxv1alpha2.MiniCluster{}
	key := client.ObjectKey{Namespace: namespace, Name: "bursting-root"}
	require.NoError(t, f.Clients["hub"].Get(ctx, key, root))

	// Flux answers through the exec API, as the hub asks it.
	uptime, err := f.ExecFlux(ctx, key, "uptime")
	require.NoError(t, err, "flux in the kept root's lead broker container")
	require.Regexp(t, ` run .*size 7`, uptime)
	// The lead broker endpoint greets as rank 0 does.
	lead := root.Status.LeadBroker
	require.NoError(t, probe.GreetWith((&netguard.Dialer{}).DialContext)(ctx, lead.Address, lead.Port), "the lead broker endpoint %s:%d", lead.Address, lead.Port)
	// The hub keeps reading Flux: after several of its asks (every 1-4 s here) and greetings,
	// fluxfed status still shows every rank online and the endpoint reachable.
	time.Sleep(10 * time.Second)
	status, err := exec.Command(f.Binary, append(statusArgs(f), "--kubeconfig", f.Env.Kubeconfig)...).CombinedOutput()
	require.NoError(t, err, string(status))
	require.Contains(t, string(status), "Flux:         run, 7/7 ranks online\n")
	require.Regexp(t, `(?m)^  LeadBrokerReachable\s+True\s`, string(status))
	require.NotContains(t, string(status), "not answering")

	// make clusters-down stops it all and removes every file the demo made.
	var pids []int
	for _, c := range f.Env.Clusters {
		for _, p := range c.Processes {
			pids = append(pids, p.PID)
		}
	}
	down := exec.Command("go", "run", "./e2e/clusters/cmd/clusters", "down", "-dir", dir)
	down.Dir = testenv.RepoRoot()
	downOut, err := down.CombinedOutput()
	require.NoError(t, err, string(downOut))
	require.Contains(t, string(downOut), "stopped 3 clusters and removed their files from "+dir)
	_, err = os.Stat(dir)
	require.True(t, os.IsNotExist(err), "make clusters-down removes the demo's directory, binaries and stand-ins included: %v", err)
	for _, pid := range pids {
		require.Eventually(t, func() bool { return syscall.Kill(pid, 0) != nil }, 10*time.Second, 100*time.Millisecond, "process %d stopped", pid)
	}
}

// TestDemoSwitches pins how make demo's switches are read: PODS=real runs real pods, alone (it
// runs Flux in the pods, so not with FLUX=real) and not kept (KEEP=1: its kubelets' proxies end
// with the demo); an unknown value is refused with the values there are.
func TestDemoSwitches(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		want    options
		wantErr string
	}{
		{env: map[string]string{}, want: options{}},
		{env: map[string]string{"PODS": "real"}, want: options{RealPods: true}},
		{env: map[string]string{"PODS": "simulated", "KEEP": "1"}, want: options{Keep: true}},
		{env: map[string]string{"FLUX": "real"}, want: options{RealFlux: true}},
		{env: map[string]string{"KEEP": "1"}, want: options{Keep: true}},
		{env: map[string]string{"PODS": "yes"}, wantErr: "PODS=yes: PODS is real (real nodes run the pods, Flux in them) or empty (simulated pods)"},
		{env: map[string]string{"FLUX": "fake"}, wantErr: "FLUX=fake: FLUX is real"},
		{env: map[string]string{"PODS": "real", "FLUX": "real"}, wantErr: "PODS=real runs Flux in the pods, FLUX=real runs it behind simulated pods: set one of the two"},
		{env: map[string]string{"PODS": "real", "KEEP": "1"}, wantErr: "KEEP=1 does not go with PODS=real: the real nodes' kubelets reach their API server, and the members' pods the hub's node ports, through proxies in the demo's process"},
		{env: map[string]string{"FLUX": "real", "KEEP": "1"}, wantErr: "KEEP=1 does not go with FLUX=real"},
	} {
		got, err := parseOptions(func(k string) string { return tc.env[k] }, 0)
		if tc.wantErr != "" {
			require.ErrorContains(t, err, tc.wantErr, "%v", tc.env)
			continue
		}
		require.NoError(t, err, "%v", tc.env)
		require.Equal(t, tc.want, got, "%v", tc.env)
	}
}

// TestDemoRefusesRealPodsWithoutRoot: PODS=real needs root, and says so before anything is built.
func TestDemoRefusesRealPodsWithoutRoot(t *testing.T) {
	_, err := parseOptions(func(k string) string { return map[string]string{"PODS": "real"}[k] }, 1000)
	require.EqualError(t, err, "PODS=real needs root: the real nodes mount file systems and create network namespaces and cgroups; run make demo PODS=real as root (make real-pod-deps installs containerd, runc and the CNI plugins, as root)")
	_, err = parseOptions(func(string) string { return "" }, 1000)
	require.NoError(t, err, "the demo of simulated pods runs as any user")
}

// TestOnRealPods pins what the demo changes in an example to run it on the real nodes.
func TestOnRealPods(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "bursting-root.yaml"))
	require.NoError(t, err)
	root := &fluxv1alpha2.MiniCluster{}
	require.NoError(t, yaml.UnmarshalStrict(data, root))
	onRealPods(root)
	require.Equal(t, "fluxfed.test/flux-app:bookworm", root.Spec.Containers[0].Image)
	require.Equal(t, fluxv1alpha2.PullNever, root.Spec.Containers[0].ImagePullPolicy)
	require.Empty(t, root.Spec.Containers[0].WorkingDir, "the application image has no lammps")
	require.Equal(t, "fluxfed.test/flux-view:0.88.0", root.Spec.Flux.Container.Image)
	require.Equal(t, "10.0.0.1", root.Spec.Flux.Bursting.Expose.Address)
	require.Equal(t, fluxv1alpha2.ExposeNodePort, root.Spec.Flux.Bursting.Expose.Type, "the example's own settings stay")
}
