package flux

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// fixture reads a file of testdata/fixtures, real flux-core 0.88.0 output (see its README).
func fixture(t testing.TB, step, file string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "fixtures", step, file))
	require.NoError(t, err)
	return data
}

func viewOf(t testing.TB, step string) *View {
	t.Helper()
	v, err := NewView(string(fixture(t, step, "uptime.txt")), string(fixture(t, step, "resource-status.txt")),
		fixture(t, step, "jobs-pending-running.json"), string(fixture(t, step, "drain.txt")))
	require.NoError(t, err, step)
	return v
}

// TestViewOfTheFixtures reads each step of the recorded experiment: root-[0-1] run, burst-0-[0-1]
// (ranks 2-3) are reserved, join, drain while jobs run there, and leave.
func TestViewOfTheFixtures(t *testing.T) {
	root := func(jobs ...int) []Rank {
		return []Rank{{Host: "root-0", Online: true, Jobs: jobs[0]}, {Host: "root-1", Online: true, Jobs: jobs[1]}}
	}
	tests := []struct {
		step   string
		uptime Uptime
		ranks  []Rank
		demand Demand
		burst  Count
	}{{
		step:   "1-reserved-pending",
		uptime: Uptime{State: "run", Size: 4, Offline: 2},
		ranks:  append(root(0, 0), Rank{Host: "burst-0-0"}, Rank{Host: "burst-0-1"}),
		demand: Demand{Jobs: 3, Nodes: 4},
	}, {
		step:   "2-joined-running",
		uptime: Uptime{State: "run", Size: 4},
		ranks:  append(root(1, 1), Rank{Host: "burst-0-0", Online: true, Jobs: 1}, Rank{Host: "burst-0-1", Online: true, Jobs: 1}),
		burst:  Count{Online: 2},
	}, {
		step:   "3-draining",
		uptime: Uptime{State: "run", Size: 4, Drained: 2},
		ranks: append(root(1, 1), Rank{Host: "burst-0-0", Online: true, Drain: Draining, Jobs: 1, DrainReason: DrainReason},
			Rank{Host: "burst-0-1", Online: true, Drain: Draining, Jobs: 1, DrainReason: DrainReason}),
		burst: Count{Online: 2, Draining: 2},
	}, {
		step:   "4-left",
		uptime: Uptime{State: "run", Size: 4, Drained: 2, Offline: 2},
		ranks: append(root(1, 1), Rank{Host: "burst-0-0", Drain: Draining, Jobs: 1, DrainReason: DrainReason},
			Rank{Host: "burst-0-1", Drain: Drained, DrainReason: DrainReason}),
		burst: Count{Draining: 1, Drained: 1},
	}}
	for _, tt := range tests {
		t.Run(tt.step, func(t *testing.T) {
			v := viewOf(t, tt.step)
			require.Equal(t, tt.uptime, v.Uptime)
			require.Equal(t, tt.ranks, v.Ranks)
			require.Equal(t, tt.demand, v.Demand())
			require.Equal(t, tt.burst, v.Count(2, 4))
			require.Equal(t, Count{Online: 2}, v.Count(0, 2))
		})
	}
}

func TestTheFixturesOtherFormats(t *testing.T) {
	overlay, err := ParseOverlayStatus(string(fixture(t, "4-left", "overlay-status.txt")))
	require.NoError(t, err)
	require.Equal(t, []OverlayRank{
		{Rank: 0, Host: "root-0", Status: "partial"},
		{Rank: 1, Host: "root-1", Status: "full"},
		{Rank: 2, Host: "burst-0-0", Status: "offline", Detail: "administrative shutdown"},
		{Rank: 3, Host: "burst-0-1", Status: "offline", Detail: "administrative shutdown"},
	}, overlay)

	drains, err := ParseDrain(string(fixture(t, "4-left", "drain.txt")))
	require.NoError(t, err)
	require.Equal(t, []Drain{
		{Since: 1795445812.0, State: Draining, Ranks: []int{2}, Hosts: []string{"burst-0-0"}, Reason: "fluxfed: burst scaling down"},
		{Since: 1795445812.0, State: Drained, Ranks: []int{3}, Hosts: []string{"burst-0-1"}, Reason: "fluxfed: burst scaling down"},
	}, drains)
	drains, err = ParseDrain(string(fixture(t, "3-draining", "drain.txt")))
	require.NoError(t, err)
	require.Equal(t, []Drain{{Since: 1795445812.0, State: Draining, Online: true, Ranks: []int{2, 3},
		Hosts: []string{"burst-0-0", "burst-0-1"}, Reason: "fluxfed: burst scaling down"}}, drains)
	drains, err = ParseDrain(string(fixture(t, "1-reserved-pending", "drain.txt")))
	require.NoError(t, err)
	require.Empty(t, drains)

	jobs, err := ParseJobs(fixture(t, "3-draining", "jobs-pending-running.json"))
	require.NoError(t, err)
	require.Equal(t, []Job{
		{ID: "ƒ2k3W3z7", State: "RUN", Nodes: 1, Tasks: 1, Ranks: []int{3}, Submitted: 1795445790.1994407},
		{ID: "ƒ2gmjduy", State: "RUN", Nodes: 3, Tasks: 3, Ranks: []int{0, 1, 2}, Submitted: 1795445790.071228},
	}, jobs)
}

func TestParseUptime(t *testing.T) {
	tests := []struct {
		in   string
		want Uptime
		err  string
	}{
		{in: " 14:56:45 run 30s,  owner root,  depth 0,  size 4,  2 offline\n", want: Uptime{State: "run", Size: 4, Offline: 2}},
		{in: " 09:00:01 quorum 2.5s,  owner flux,  depth 1,  size 8\n", want: Uptime{State: "quorum", Size: 8}},
		{in: " 14:56:58 run 1.2h,  owner 1000,  depth 0,  size 4,  1 drained,  2 offline\n  submit disabled,  scheduler disabled\n",
			want: Uptime{State: "run", Size: 4, Drained: 1, Offline: 2, SubmitDisabled: true, SchedulerStopped: true}},
		// What flux-core 0.88.0 prints after flux queue stop, and flux queue disable too.
		{in: " 14:45:53 run 5.4s,  owner root,  depth 0,  size 4,  1 drained\n  scheduler stopped\n",
			want: Uptime{State: "run", Size: 4, Drained: 1, SchedulerStopped: true}},
		{in: " 14:45:58 run 1s,  owner root,  depth 0,  size 2\n  submit disabled,  scheduler stopped\n",
			want: Uptime{State: "run", Size: 2, SubmitDisabled: true, SchedulerStopped: true}},
		{in: "", err: "want one or two lines"},
		{in: "a\nb\nc\n", err: "want one or two lines"},
		{in: " 14:56:45 run 30s,  owner root,  depth 0\n", err: "want time, state and duration"},
		{in: " 14:56:45 run,  owner root,  depth 0,  size 4\n", err: "the broker state and its duration"},
		{in: " 14:56:45 RUN 3s,  owner root,  depth 0,  size 4\n", err: "not a word"},
		{in: " 14:56:45 run 3s,  user root,  depth 0,  size 4\n", err: "want owner and depth"},
		{in: " 14:56:45 run 3s,  owner root,  depth 0,  sz 4\n", err: "want the size"},
		{in: " 14:56:45 run 3s,  owner root,  depth 0,  size -4\n", err: "not a count"},
		{in: " 14:56:45 run 3s,  owner root,  depth 0,  size 99999999999\n", err: "out of range"},
		{in: " 14:56:45 run 3s,  owner root,  depth 0,  size 4,  2 lost\n", err: "unknown count"},
		{in: " 14:56:45 run 3s,  owner root,  depth 0,  size 4\n  queue stopped\n", err: "unknown \"queue stopped\""},
	}
	for _, tt := range tests {
		got, err := ParseUptime(tt.in)
		if tt.err != "" {
			require.ErrorContains(t, err, tt.err, "%q", tt.in)
			continue
		}
		require.NoError(t, err, "%q", tt.in)
		require.Equal(t, tt.want, got, "%q", tt.in)
	}
}

func TestParseResourceStatusErrors(t *testing.T) {
	for in, want := range map[string]string{
		"avail ✔ 2 0-1\n":                "want state, up, nnodes, ranks and nodelist",
		"Avail ✔ 1 0 a-0\n":              "not a word",
		"avail + 1 0 a-0\n":              "neither ✔ nor ✗",
		"avail* ✔ 1 0 a-0\n":             "disagree",
		"avail ✗ 1 0 a-0\n":              "disagree",
		"avail ✔ x 0 a-0\n":              "not a count",
		"avail ✔ 2 0-1 a-0\n":            "2 nodes, but 2 ranks and 1 hosts",
		"avail ✔ 1 1-0 a-0\n":            "goes down",
		"avail ✔ 1 [0 a-0\n":             "unbalanced",
		"avail ✔ 1 0 a-[0\n":             "",
		"avail ✔ 1 0-99999999 a-[0-9]\n": "out of range",
		"avail ✔ 1 0-1048575 a-[0-9]\n":  "more than",
		"avail ✔ 1 0 a-0\navail ✔ 1 0\n": "want state",
	} {
		_, err := ParseResourceStatus(in)
		require.Error(t, err, "%q", in)
		require.ErrorContains(t, err, want, "%q", in)
	}
}

func TestNewViewErrors(t *testing.T) {
	up := " 14:56:45 run 30s,  owner root,  depth 0,  size 2\n"
	noJobs := []byte(`{"jobs": []}`)
	tests := []struct {
		name, uptime, status, drain string
		jobs                        []byte
		err                         string
	}{
		{name: "a rank past the size", uptime: up, status: "avail ✔ 3 0-2 a-[0-2]\n", jobs: noJobs, err: "lists rank 2, but the instance has 2"},
		{name: "a rank avail and drained", uptime: up, status: "avail ✔ 2 0-1 a-[0-1]\ndrained ✔ 1 1 a-1\n", jobs: noJobs, err: "lists rank 1 as both avail and drained"},
		{name: "a rank draining and drained", uptime: up, status: "avail ✔ 1 0 a-0\ndraining ✔ 1 1 a-1\ndrained ✔ 1 1 a-1\n", jobs: noJobs, err: "lists rank 1 as both draining and drained"},
		{name: "a rank twice in one state", uptime: up, status: "avail ✔ 2 0-1 a-[0-1]\navail* ✗ 1 1 a-1\n", jobs: noJobs, err: "lists rank 1 as avail twice"},
		{name: "a rank only in housekeeping", uptime: up, status: "avail ✔ 1 0 a-0\nhousekeeping ✔ 1 1 a-1\n", jobs: noJobs, err: "does not list rank 1 of 2"},
		{name: "a rank of two hosts", uptime: up, status: "avail ✔ 2 0-1 a-[0-1]\nhousekeeping ✔ 1 1 b-1\n", jobs: noJobs, err: "names rank 1 both a-1 and b-1"},
		{name: "a rank missing", uptime: up, status: "avail ✔ 1 0 a-0\n", jobs: noJobs, err: "does not list rank 1 of 2"},
		{name: "a job on no rank", uptime: up, status: "avail ✔ 2 0-1 a-[0-1]\n",
			jobs: []byte(`{"jobs": [{"jobid": "f1", "state": "RUN", "ranks": "[1-2]"}]}`), err: "runs on rank 2"},
		{name: "no jobs array", uptime: up, status: "avail ✔ 2 0-1 a-[0-1]\n", jobs: []byte(`{}`), err: "no jobs array"},
		{name: "not JSON", uptime: up, status: "avail ✔ 2 0-1 a-[0-1]\n", jobs: []byte(`jobs`), err: "flux jobs --json"},
		{name: "a job without a state", uptime: up, status: "avail ✔ 2 0-1 a-[0-1]\n", jobs: []byte(`{"jobs": [{"jobid": "f1"}]}`), err: "no jobid or state"},
		{name: "a drain of no rank", uptime: up, status: "avail ✔ 2 0-1 a-[0-1]\n", jobs: noJobs, drain: "1.0 drained 5 a-5 x\n", err: "drain lists rank 5"},
		{name: "negative nnodes", uptime: up, status: "avail ✔ 2 0-1 a-[0-1]\n",
			jobs: []byte(`{"jobs": [{"jobid": "f1", "state": "SCHED", "nnodes": -1}]}`), err: "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewView(tt.uptime, tt.status, tt.jobs, tt.drain)
			require.ErrorContains(t, err, tt.err)
		})
	}

	// Before the instance runs, flux answers nothing else; neither is read.
	v, err := NewView(" 14:56:45 quorum 3s,  owner root,  depth 0,  size 4\n", "garbage", []byte("garbage"), "garbage")
	require.NoError(t, err)
	require.Equal(t, &View{Uptime: Uptime{State: "quorum", Size: 4}}, v)
}

func TestIDSet(t *testing.T) {
	tests := []struct {
		in       string
		want     []int
		plain    string
		brackets string
	}{
		{in: "", want: nil, plain: "", brackets: ""},
		{in: "[]", want: nil, plain: "", brackets: ""},
		{in: "3", want: []int{3}, plain: "3", brackets: "3"},
		{in: "0-1", want: []int{0, 1}, plain: "0-1", brackets: "[0-1]"},
		{in: "[0-2]", want: []int{0, 1, 2}, plain: "0-2", brackets: "[0-2]"},
		{in: "[0-2,5,7-9]", want: []int{0, 1, 2, 5, 7, 8, 9}, plain: "0-2,5,7-9", brackets: "[0-2,5,7-9]"},
		{in: "[5,0-2,1]", want: []int{0, 1, 2, 5}, plain: "0-2,5", brackets: "[0-2,5]"},
	}
	for _, tt := range tests {
		got, err := ParseIDSet(tt.in)
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.want, got, tt.in)
		require.Equal(t, tt.plain, FormatIDSet(got, false), tt.in)
		require.Equal(t, tt.brackets, FormatIDSet(got, true), tt.in)
	}
	for _, bad := range []string{"[", "[0", "0]", "a", "-1", "1-", "2-1", "1,,2", "[,]", "1048577", "0x1", " 1"} {
		_, err := ParseIDSet(bad)
		require.Error(t, err, "%q", bad)
	}
}
