package status

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func ptr[T any](v T) *T { return &v }

// rootReport is a root of three bursts: one joined, one whose member does not answer, one
// reserved, with draining ranks and a waiting job.
func rootReport() *Report {
	return &Report{
		Cluster: "hub", Namespace: "research", Name: "lammps", Role: "root", Size: 2, MaxSize: 2, Ready: 2,
		LeadBroker: &Endpoint{Address: "203.0.113.7", Port: 30050},
		Hostlist:   "lammps-[0-1],burst-a-[0-2],burst-b-0,burst-c-[0-1]",
		Ranks: []RankGroup{
			{Name: "lammps", First: 0, Last: 1, Hosts: "lammps-[0-1]", Running: ptr[int32](2)},
			{Name: "burst-a", Cluster: "member-a", First: 2, Last: 4, Hosts: "burst-a-[0-2]", Running: ptr[int32](2)},
			{Name: "burst-b", Cluster: "member-b", First: 5, Last: 5, Hosts: "burst-b-0", Running: ptr[int32](1)},
			{Name: "burst-c", Cluster: "member-a", First: 6, Last: 7, Hosts: "burst-c-[0-1]", Running: ptr[int32](0)},
		},
		Conditions: []Condition{
			{Type: "Ready", Status: "True", Reason: "AllBrokersReady", Message: "2 of 2 brokers ready",
				LastTransitionTime: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
			{Type: "BurstsReady", Status: "False", Reason: "Unreachable", Message: "member member-b\nis unreachable",
				LastTransitionTime: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		},
		Flux: &Flux{State: "run", Size: 8, Online: 4, PendingJobs: 1, PendingNodes: 6},
		Bursts: []Burst{
			{Name: "burst-a", Cluster: "member-a", Namespace: "research", Size: 2, MaxSize: 3, Ready: 2, Phase: "Joined", Online: 2, Draining: 1},
			{Name: "burst-b", Cluster: "member-b", Namespace: "research", Size: 1, MaxSize: 1, Phase: "Unreachable",
				Message: "member member-b is unreachable"},
			{Name: "burst-c", Cluster: "member-a", Namespace: "research", MaxSize: 2, Phase: "Reserved"},
		},
		Pods: []Pod{
			{Rank: 0, Cluster: "hub", Namespace: "research", Name: "lammps-0-x7k2p", Hostname: "lammps-0", Node: "hub-1", Phase: "Running", Ready: true},
			{Rank: 1, Cluster: "hub", Namespace: "research", Name: "lammps-1-q9d4s", Hostname: "lammps-1", Node: "hub-2", Phase: "Running", Ready: true},
			{Rank: 2, Cluster: "member-a", Namespace: "research", Name: "burst-a-0-b8v2m", Hostname: "burst-a-0", Node: "a-7", Phase: "Running", Ready: true},
			{Rank: 3, Cluster: "member-a", Namespace: "research", Name: "burst-a-1-z3c5n", Hostname: "burst-a-1", Phase: "Pending"},
		},
		Problems: []string{"burst burst-b on member-b: no MemberCluster member-b on the hub"},
	}
}

func TestWrite(t *testing.T) {
	tests := []struct {
		name   string
		report *Report
		format string
	}{
		{name: "root.txt", report: rootReport(), format: FormatText},
		{name: "root.json", report: rootReport(), format: FormatJSON},
		{name: "root.yaml", report: rootReport(), format: FormatYAML},
		{name: "new.txt", format: FormatText, report: FromMiniCluster("kind-kind", &fluxv1alpha2.MiniCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "flux-sample"},
			Spec:       fluxv1alpha2.MiniClusterSpec{Size: 4, Containers: []fluxv1alpha2.Container{{Image: "rockylinux:9"}}},
		})},
		{name: "child.txt", format: FormatText, report: &Report{
			Cluster: "member-a", Namespace: "research", Name: "burst-a", Role: "burst child of lammps", Size: 2, MaxSize: 3, Ready: 1,
			LeadBroker: &Endpoint{Address: "203.0.113.7", Port: 30050}, Hostlist: "lammps-[0-1],burst-a-[0-2]",
			Ranks: []RankGroup{
				{Name: "lammps", First: 0, Last: 1, Hosts: "lammps-[0-1]"},
				{Name: "burst-a", Cluster: "member-a", First: 2, Last: 4, Hosts: "burst-a-[0-2]", Running: ptr[int32](2)},
			},
			Pods: []Pod{{Rank: 2, Cluster: "member-a", Namespace: "research", Name: "burst-a-0-b8v2m", Hostname: "burst-a-0", Node: "a-7", Phase: "Running", Ready: true}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, Write(&b, tt.report, tt.format))
			golden := filepath.Join("testdata", tt.name)
			if *update {
				require.NoError(t, os.WriteFile(golden, b.Bytes(), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			if diff := cmp.Diff(string(want), b.String()); diff != "" {
				t.Errorf("%s differs (-want +got), run with -update to accept:\n%s", golden, diff)
			}
		})
	}
	require.ErrorContains(t, Write(&bytes.Buffer{}, rootReport(), "wide"), `unknown format "wide"`)
}

func TestDescribeFlux(t *testing.T) {
	tests := []struct {
		name string
		flux Flux
		want string
	}{
		{name: "never asked", want: "not asked yet"},
		{name: "never answered", flux: Flux{Message: "running flux in pod lammps-0-x7k2p:\nno such file"},
			want: "not answering: running flux in pod lammps-0-x7k2p: no such file"},
		{name: "waiting for its quorum", flux: Flux{State: "quorum", Size: 8, Online: 1}, want: "quorum, 1/8 ranks online"},
		{name: "answered", flux: Flux{State: "run", Size: 8, Online: 8}, want: "run, 8/8 ranks online"},
		{name: "jobs wait", flux: Flux{State: "run", Size: 8, Online: 2, PendingJobs: 3, PendingNodes: 6},
			want: "run, 2/8 ranks online, pending jobs: 3 (the largest asks for 6 nodes)"},
		{name: "answered once, not now", flux: Flux{State: "run", Size: 8, Online: 8, Message: "exec timed out"},
			want: "run, 8/8 ranks online when last asked; not answering now: exec timed out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, describeFlux(&tt.flux))
		})
	}
}
