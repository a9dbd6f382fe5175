package realflux_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fluxfed/fluxfed/e2e/brokersim"
	"github.com/fluxfed/fluxfed/e2e/fluxsim"
	"github.com/fluxfed/fluxfed/e2e/realflux"
	"github.com/fluxfed/fluxfed/flux"
)

// jobsCommand is how the hub lists the jobs that wait or run.
var jobsCommand = []string{"jobs", "-A", "--json", "-f", "pending,running"}

// twin is a real instance and the stand-in's model of it, driven through the same steps: the
// test submits the same jobs to both, and tells the stand-in which ranks are online when the
// real ones are. What the stand-in does not model, the instants the real instance chose (job
// IDs, the job manager's step times, the instant a job started, was cleaned up or a rank was
// drained), is copied from the real instance; everything else is the stand-in's own.
type twin struct {
	t    *testing.T
	real *realflux.System
	sim  *fluxsim.Instance
	cwd  string
	// followed are the lines of the real follower (flux.FollowCommand) once it runs, and last
	// the stand-in as it was when they were last compared.
	followed <-chan string
	last     *fluxsim.Instance
}

// follow starts the hub's follower on the real instance, as the hub leaves it running in the
// lead broker's container, and waits until it says it is ready.
func (w *twin) follow() {
	w.t.Helper()
	argv := flux.FollowCommand("/mnt/flux")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = (&realflux.Instance{Prefix: w.real.Prefix, URI: w.real.URI(0)}).Env()
	out, err := cmd.StdoutPipe()
	require.NoError(w.t, err)
	require.NoError(w.t, cmd.Start())
	w.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 100)
	go func() {
		scan := bufio.NewScanner(out)
		for scan.Scan() {
			lines <- scan.Text()
		}
		close(lines)
	}()
	select {
	case l := <-lines:
		require.Equal(w.t, flux.FollowReady, l)
	case <-time.After(time.Minute):
		require.FailNow(w.t, "the follower did not get ready")
	}
	w.followed, w.last = lines, w.snapshot()
}

// snapshot is a copy of the stand-in's instance.
func (w *twin) snapshot() *fluxsim.Instance {
	data, err := json.Marshal(w.sim)
	require.NoError(w.t, err)
	c := &fluxsim.Instance{}
	require.NoError(w.t, json.Unmarshal(data, c))
	return c
}

// compareFollowed requires the lines the real follower printed since the last step, once it is
// quiet for a second, to be those the stand-in's prints for its change since then: the same lines
// of jobs, as many, and the same lines of resources (real Flux may tell the ranks of one change
// one by one, and interleave jobs that change at one instant in its own order).
func (w *twin) compareFollowed(step string) {
	w.t.Helper()
	var got []string
	for quiet := false; !quiet; {
		select {
		case l, ok := <-w.followed:
			require.True(w.t, ok, "%s: the follower ended", step)
			got = append(got, l)
		case <-time.After(time.Second):
			quiet = true
		}
	}
	cur := w.snapshot()
	want := fluxsim.Changes(w.last, cur)
	w.last = cur
	require.Equal(w.t, followedLines(want), followedLines(got), "%s: what the follower printed: flux-core %q, the stand-in %q", step, got, want)
	w.t.Logf("%s: the followers printed %q (flux-core) and %q (stand-in)", step, got, want)
}

// followedLines is lines sorted, each line of a resource change once.
func followedLines(lines []string) []string {
	out := slices.Clone(lines)
	slices.Sort(out)
	return slices.CompactFunc(out, func(a, b string) bool { return a == b && strings.HasPrefix(a, "resource ") })
}

// realJob is what flux jobs -a --json says of a job, as far as the stand-in copies it.
type liveJob struct {
	ID        uint64  `json:"id"`
	State     string  `json:"state"`
	TSubmit   float64 `json:"t_submit"`
	TDepend   float64 `json:"t_depend"`
	TPriority float64 `json:"t_priority"`
	TSched    float64 `json:"t_sched"`
	TRun      float64 `json:"t_run"`
	TCleanup  float64 `json:"t_cleanup"`
	TInactive float64 `json:"t_inactive"`
}

func (w *twin) flux(args ...string) string {
	w.t.Helper()
	out, err := w.real.Flux(args...)
	require.NoError(w.t, err, "flux %s", strings.Join(args, " "))
	return out
}

// liveJobs lists every job of the real instance, oldest first.
func (w *twin) liveJobs(c require.TestingT) []liveJob {
	out, err := w.real.Flux("jobs", "-a", "--json")
	require.NoError(c, err)
	var list struct {
		Jobs []liveJob `json:"jobs"`
	}
	require.NoError(c, json.Unmarshal([]byte(out), &list))
	slices.SortFunc(list.Jobs, func(a, b liveJob) int {
		return strings.Compare(strconv.FormatFloat(a.TSubmit, 'f', 6, 64), strconv.FormatFloat(b.TSubmit, 'f', 6, 64))
	})
	return list.Jobs
}

// copyInstants gives the stand-in's jobs what it does not model of the real ones.
func (w *twin) copyInstants() {
	live := w.liveJobs(w.t)
	require.Len(w.t, live, len(w.sim.Jobs), "the stand-in has the real instance's jobs")
	for i := range w.sim.Jobs {
		j, r := &w.sim.Jobs[i], live[i]
		j.ID, j.TDepend, j.TPriority, j.TSched = r.ID, r.TDepend, r.TPriority, r.TSched
		if j.TRun != 0 && r.TRun != 0 {
			j.TRun = r.TRun
		}
		if j.TCleanup != 0 && r.TCleanup != 0 {
			j.TCleanup = r.TCleanup
		}
	}
}

// submit submits a job to both.
func (w *twin) submit(nnodes, ntasks int, command ...string) {
	w.t.Helper()
	args := []string{"submit", "-N" + strconv.Itoa(nnodes)}
	if ntasks > 0 {
		args = append(args, "-n"+strconv.Itoa(ntasks))
	}
	w.flux(append(args, command...)...)
	live := w.liveJobs(w.t)
	_, err := w.sim.Submit(command, nnodes, ntasks, w.cwd, live[len(live)-1].TSubmit)
	require.NoError(w.t, err)
}

func now() float64 { return float64(time.Now().UnixNano()) / 1e9 }

// compare reads the four outputs the hub reads from the real instance and requires the
// stand-in to print the same, byte for byte, at the same instant: flux uptime's clock and
// durations are computed at an instant between the call and its answer, and a running job's
// runtime, which Flux reads from the clock once per job, to the millisecond it took to answer.
func (w *twin) compare(step string) {
	w.t.Helper()
	t0 := now()
	w.sim.Advance(t0)
	w.copyInstants()
	uptime := w.flux("uptime")
	status := w.flux(flux.ResourceStatusCommand[1:]...)
	drain := w.flux(flux.DrainCommand[1:]...)
	jobs := w.flux(jobsCommand...)
	t1 := now()
	require.Equal(w.t, status, w.sim.ResourceStatus(), "%s: flux resource status", step)
	require.Equal(w.t, drain, w.sim.DrainList(), "%s: flux resource drain", step)
	requireAt(w.t, t0, t1, uptime, func(at float64) string { return w.sim.Uptime(at, time.Local) }, "%s: flux uptime", step)
	runtimes := regexpRuntime.ReplaceAllString(jobs, `"runtime": R`)
	require.Equal(w.t, runtimes, regexpRuntime.ReplaceAllString(w.sim.JobsJSON(t1, "root"), `"runtime": R`), "%s: flux jobs", step)
	for i, m := range regexpRuntime.FindAllStringSubmatch(jobs, -1) {
		got, _ := strconv.ParseFloat(m[1], 64)
		want := regexpRuntime.FindAllStringSubmatch(w.sim.JobsJSON(t1, "root"), -1)[i][1]
		sim, _ := strconv.ParseFloat(want, 64)
		require.InDelta(w.t, sim, got, t1-t0+1e-3, "%s: the runtime of job %d", step, i)
	}
	w.t.Logf("%s: the stand-in printed what flux-core printed:\n%s%s%s%s", step, uptime, status, drain, jobs)
	if w.followed != nil {
		w.compareFollowed(step)
	}
}

// requireAt requires print to give want at some instant of [t0, t1], a millisecond apart.
func requireAt(t *testing.T, t0, t1 float64, want string, print func(float64) string, format string, args ...any) {
	t.Helper()
	var got []string
	for at := t0; at <= t1+1e-3; at += 1e-3 {
		out := print(at)
		if out == want {
			return
		}
		if !slices.Contains(got, out) {
			got = append(got, out)
		}
	}
	require.Failf(t, "the stand-in printed something else", format+": flux-core printed %q, the stand-in %q", append(args, want, got)...)
}

// TestTheStandInPrintsWhatRealFluxPrints replays the experiment of shared/flux-fixtures on a
// real instance and on the stand-in at once: a root of two ranks with two reserved for a burst,
// three jobs that wait for them, the burst joining, drained, leaving while its jobs run, and
// joining again; at every step the stand-in prints what flux-core prints. The real instance
// also shows the stand-in where it was wrong: a job killed by a lost rank stays in CLEANUP for
// 25 s, not a few.
func TestTheStandInPrintsWhatRealFluxPrints(t *testing.T) {
	hosts := []string{"root-0", "root-1", "burst-0-0", "burst-0-1"}
	real := realflux.NewSystem(t, realflux.SystemConfig{Hosts: hosts, Quorum: 2, Cores: 2})
	cwd, err := os.Getwd()
	require.NoError(t, err)
	w := &twin{t: t, real: real, cwd: cwd}

	// Rank 0 alone waits for its quorum.
	real.Start(t, 0)
	var state string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		out, err := real.Flux("uptime")
		require.NoError(c, err)
		u, err := flux.ParseUptime(out)
		require.NoError(c, err, out)
		state = u.State
		require.Equal(c, "quorum", u.State, out)
	}, time.Minute, 100*time.Millisecond)
	start, err := strconv.ParseFloat(strings.TrimSpace(w.flux("getattr", "broker.starttime")), 64)
	require.NoError(t, err)
	w.sim, err = fluxsim.New(hosts, 2, 2, start)
	require.NoError(t, err)
	w.sim.UserID = os.Getuid()
	t0 := now()
	uptime := w.flux("uptime")
	require.NoError(t, w.sim.SetOnline([]int{0}, quorumSince(t, real)))
	requireAt(t, t0, now(), uptime, func(at float64) string { return w.sim.Uptime(at, time.Local) }, "waiting for the quorum (%s)", state)
	t.Logf("0: rank 0 waits for its quorum: the stand-in printed what flux-core printed:\n%s", uptime)

	// Rank 1 joins: the instance runs with the burst's ranks offline; three jobs wait for them.
	real.Start(t, 1)
	joined := waitOnline(t, real, 2)
	require.NoError(t, w.sim.SetOnline([]int{0, 1}, joined))
	w.follow()
	w.compare("1: the root runs")
	w.submit(4, 0, "hostname")
	w.submit(3, 3, "sleep", "100")
	w.submit(1, 0, "sleep", "100")
	w.compare("1: three jobs wait for the reserved ranks")

	// 2: the burst joins; the job of four nodes runs and ends, the other two run.
	real.Start(t, 2, 3)
	joined = waitOnline(t, real, 4)
	require.NoError(t, w.sim.SetOnline([]int{0, 1, 2, 3}, joined))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		states := []string{}
		for _, j := range w.liveJobs(c) {
			states = append(states, j.State)
		}
		require.Equal(c, []string{"INACTIVE", "RUN", "RUN"}, states)
	}, time.Minute, 100*time.Millisecond)
	w.compare("2: the burst joined, two jobs run")

	// 3: the burst is drained while its jobs run.
	w.flux("resource", "drain", "burst-0-[0-1]", "fluxfed: burst scaling down")
	fields := strings.Fields(w.flux(flux.DrainCommand[1:]...))
	require.NotEmpty(t, fields)
	drainedAt, err := strconv.ParseFloat(fields[0], 64)
	require.NoError(t, err)
	require.NoError(t, w.sim.Drain([]int{2, 3}, "fluxfed: burst scaling down", false, drainedAt))
	w.compare("3: draining")
	require.Zero(t, w.sim.Killed)
	// Both refuse to drain a drained rank again, or to undrain one that is not drained, alike.
	for _, args := range [][]string{{"resource", "drain", "1-3", "again"}, {"resource", "undrain", "1-2"}} {
		_, err := real.Flux(args...)
		require.Error(t, err, "flux %s", strings.Join(args, " "))
		var stdout, stderr strings.Builder
		require.Equal(t, 1, fluxsim.Run(w.sim, args, &stdout, &stderr), "flux %s", strings.Join(args, " "))
		require.Empty(t, stdout.String())
		require.Equal(t, realStderr(err), stderr.String(), "flux %s", strings.Join(args, " "))
	}
	w.compare("3: refusals changed nothing")

	// 4: the burst's brokers stop while their jobs run: the job of rank 3 alone ends at once,
	// the one of ranks 0-2 is killed and cleaned up, holding its ranks.
	real.Stop(t, 2, 3)
	left := waitOnline(t, real, 2)
	require.NoError(t, w.sim.SetOnline([]int{0, 1}, left))
	require.Equal(t, 2, w.sim.Killed)
	w.compare("4: the burst left, a killed job is cleaned up")

	// 5: the killed job ends when Flux is done cleaning up.
	var live []liveJob
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		live = w.liveJobs(c)
		require.Equal(c, "INACTIVE", live[1].State)
	}, 2*time.Minute, 500*time.Millisecond)
	cleanup := live[1].TInactive - live[1].TCleanup
	t.Logf("a job that lost a rank was cleaned up in %.1f s", cleanup)
	require.InDelta(t, fluxsim.CleanupSeconds, cleanup, 1, "how long a killed job stays in CLEANUP")
	// The stand-in ends it at its own time; the real one's instant is copied.
	w.sim.Advance(live[1].TCleanup + fluxsim.CleanupSeconds)
	w.sim.Jobs[1].TInactive = live[1].TInactive
	w.compare("5: the killed job ended")

	// 6: undrained while offline, a new job of four nodes waits, the burst joins and it runs.
	w.flux("resource", "undrain", "burst-0-[0-1]")
	require.NoError(t, w.sim.Undrain([]int{2, 3}, now()))
	w.submit(4, 0, "hostname")
	w.compare("6: undrained, a job waits for the offline ranks")
	real.Start(t, 2, 3)
	joined = waitOnline(t, real, 4)
	require.NoError(t, w.sim.SetOnline([]int{0, 1, 2, 3}, joined))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		live = w.liveJobs(c)
		require.Equal(c, "INACTIVE", live[3].State)
	}, time.Minute, 100*time.Millisecond)
	w.sim.Advance(now())
	require.Equal(t, fluxsim.StateInactive, w.sim.Jobs[3].State, "the job ran at once on the stand-in too")
	w.compare("6: the burst joined again, the job ran")

	// Where each broker placed itself is where the overlay's stand-in computes it.
	for rank, h := range hosts {
		place, err := brokersim.Locate([]byte(real.Config()), h)
		require.NoError(t, err)
		require.Equal(t, rank, place.Rank, h)
		require.Equal(t, len(hosts), place.Size, h)
		got, err := real.FluxOn(rank, "getattr", "tbon.parent-endpoint")
		if rank == 0 {
			require.Error(t, err, "rank 0 has no parent")
			require.Empty(t, place.Connect)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, place.Connect, strings.TrimSpace(got), "%s: the parent's URI", h)
	}
}

// realStderr is the standard error of a flux command that failed, as realflux reports it.
func realStderr(err error) string {
	_, msg, _ := strings.Cut(err.Error(), ": ")
	return msg + "\n"
}

// waitOnline waits until n ranks of real are online, and returns when the test saw it.
func waitOnline(t *testing.T, real *realflux.System, n int) float64 {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		out, err := real.Flux("uptime")
		require.NoError(c, err)
		u, err := flux.ParseUptime(out)
		require.NoError(c, err, out)
		require.Equal(c, "run", u.State, out)
		require.Equal(c, n, u.Size-u.Offline, out)
	}, time.Minute, 100*time.Millisecond)
	return now()
}

// regexpRuntime finds the runtimes of a jobs listing.
var regexpRuntime = regexp.MustCompile(`"runtime": ([0-9.]+)`)

// quorumSince returns when rank 0 of real entered the quorum state, from its log.
func quorumSince(t *testing.T, real *realflux.System) float64 {
	t.Helper()
	out, err := real.Flux("dmesg")
	require.NoError(t, err)
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "init->quorum") {
			at, err := time.Parse(time.RFC3339Nano, strings.Fields(line)[0])
			require.NoError(t, err, line)
			return float64(at.UnixNano()) / 1e9
		}
	}
	require.Fail(t, "rank 0 did not log its entry into quorum", out)
	return 0
}

// TestTheOverlayStandInJoinsAsRealBrokersDo starts the brokers of one config for real and as
// stand-ins (e2e/brokersim), with one broker wrong in each of the ways the stand-in tells
// apart, and requires both to agree on which ranks join rank 0 and on the broker that does
// not, and why.
func TestTheOverlayStandInJoinsAsRealBrokersDo(t *testing.T) {
	hosts := []string{"root-0", "root-1", "burst-0-0", "burst-0-1"}
	for _, tc := range []struct {
		name string
		// wrong changes the last broker: its hostname and config (the instance's passed).
		wrong func(real *realflux.System, config string) (hostname, changed string)
		// reason is why the stand-in says the last broker did not join; "" when it does.
		reason brokersim.Reason
		// exits is set when the real broker ends by itself, printing this.
		exits string
		// refused is set when rank 0 refuses the broker's hello, logging why as the stand-in
		// says it; silent when the real broker logs nothing.
		refused, silent bool
	}{
		{name: "every broker right"},
		{
			name: "a broker with another certificate",
			wrong: func(real *realflux.System, config string) (string, string) {
				return "burst-0-1", strings.Replace(config, real.Cert(), real.Keygen(t), 1)
			},
			reason: brokersim.ReasonCertificate,
			silent: true,
		},
		{
			name: "a broker whose hosts are in another order",
			wrong: func(_ *realflux.System, config string) (string, string) {
				a, b := `host = "burst-0-0"`, `host = "burst-0-1"`
				return "burst-0-1", strings.NewReplacer(a, b, b, a).Replace(config)
			},
			reason:  brokersim.ReasonHostname,
			exits:   "root-0 (rank 0) sent disconnect control message",
			refused: true,
		},
		{
			name: "a broker whose hostname is not in the hosts",
			wrong: func(_ *realflux.System, config string) (string, string) {
				return "burst-0-9", config
			},
			reason: brokersim.ReasonConfig,
			exits:  "burst-0-9 not found in hosts",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			real := realflux.NewSystem(t, realflux.SystemConfig{Hosts: hosts, Quorum: 1, Cores: 1})
			config := real.Config()
			cert, err := os.ReadFile(real.Cert())
			require.NoError(t, err)
			last, lastConfig := hosts[3], config
			if tc.wrong != nil {
				last, lastConfig = tc.wrong(real, config)
			}
			lastCert := cert
			if path := certPath(lastConfig); path != real.Cert() {
				lastCert, err = os.ReadFile(path)
				require.NoError(t, err)
			}

			// The stand-ins, on loopback addresses routed as the config's URIs.
			network := brokersim.NewNetwork()
			var brokers []brokersim.Broker
			for rank, h := range hosts {
				place, err := brokersim.Locate([]byte(config), h)
				require.NoError(t, err)
				if place.Bind != "" { // a parent: its URI is the same to bind and to connect
					host, port, err := brokersim.SplitTCP(place.Bind)
					require.NoError(t, err)
					require.NoError(t, network.AddRoute(brokersim.Route{Cluster: "local", Host: host, Port: port,
						Target: brokersim.Listener{Cluster: "local", Hostname: h, Port: port}}))
				}
				b := brokersim.Broker{Cluster: "local", Hostname: h, BrokerTOML: []byte(config), CurveCert: cert}
				if rank == 3 {
					b = brokersim.Broker{Cluster: "local", Hostname: last, BrokerTOML: []byte(lastConfig), CurveCert: lastCert}
				}
				brokers = append(brokers, b)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sim, err := brokersim.Run(ctx, brokers, network)
			require.NoError(t, err)

			// The real brokers.
			real.Start(t, 0, 1, 2)
			if lastConfig == config {
				lastConfig = ""
			}
			real.StartAs(t, 3, last, lastConfig)
			want := []int{0, 1, 2, 3}
			if tc.reason != "" {
				want = want[:3]
			}
			require.Equal(t, want, sim.Online, "the stand-ins: %v", sim.Failures)
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				require.Equal(c, want, onlineRanks(c, real))
			}, time.Minute, 200*time.Millisecond)
			if tc.reason == "" {
				require.Empty(t, sim.Failures)
				return
			}
			// The wrong broker never joins, by either.
			time.Sleep(5 * time.Second)
			require.Equal(t, want, onlineRanks(t, real), "rank 0's log:\n%s", real.Log(0))
			f, ok := sim.FailureOf(last)
			require.True(t, ok, "the stand-ins: %v", sim.Failures)
			require.Equal(t, tc.reason, f.Reason, f.Error())
			exited, how := real.Exited(3)
			require.Equal(t, tc.exits != "", exited, "the real broker ended (%s):\n%s", how, real.Log(3))
			if tc.exits != "" {
				require.Contains(t, real.Log(3), tc.exits)
			}
			if tc.refused {
				_, why, _ := strings.Cut(f.Detail, "refused it: ")
				require.Contains(t, real.Log(0), why, "rank 0 logs why it refused the hello")
			}
			if tc.silent {
				require.Empty(t, real.Log(3), "the real broker logs nothing")
			}
			t.Logf("stand-in: %s; real broker's log:\n%s", f.Error(), real.Log(3))
		})
	}
}

// onlineRanks are the ranks that rank 0 of real sees online.
func onlineRanks(t require.TestingT, real *realflux.System) []int {
	out, err := real.Flux(flux.OverlayStatusCommand[1:]...)
	require.NoError(t, err)
	ranks, err := flux.ParseOverlayStatus(out)
	require.NoError(t, err)
	var online []int
	for _, r := range ranks {
		if r.Status == "full" || r.Status == "partial" || r.Status == "degraded" {
			online = append(online, r.Rank)
		}
	}
	return online
}

// certPath is the curve_cert of a config.
func certPath(config string) string {
	m := regexp.MustCompile(`curve_cert = "([^"]*)"`).FindStringSubmatch(config)
	if m == nil {
		return ""
	}
	return m[1]
}
