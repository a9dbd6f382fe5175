package bursting

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/api/v1alpha2/v1alpha2test"
)

// threeBursts is a root of 2 pods (room for 3) with bursts of 4 (member-a), 1 (reserved) and 3
// (member-b) brokers.
func threeBursts() *fluxv1alpha2.MiniCluster {
	return v1alpha2test.MiniCluster("flux-sample").Namespace("hpc").Size(2).MaxSize(3).Bursts(
		fluxv1alpha2.Burst{Name: "burst-0", Size: 4, Cluster: "member-a"},
		fluxv1alpha2.Burst{Name: "burst-1", Size: 1},
		fluxv1alpha2.Burst{Name: "burst-2", Size: 3, Cluster: "member-b"},
	).Obj()
}

var ignoreUnexported = cmpopts.IgnoreUnexported(Layout{})

func TestNewLayout(t *testing.T) {
	tests := []struct {
		name string
		mc   *fluxv1alpha2.MiniCluster
		want *Layout
	}{
		{
			name: "root of size 1",
			mc:   v1alpha2test.MiniCluster("a").Namespace("hpc").Size(1).Obj(),
			want: &Layout{
				Hosts: []string{"a-0"}, Hostlist: "a-0", GlobalHostlist: "a-0",
				LocalStart: 0, LocalEnd: 1, Parents: map[int]int{}, Quorum: 1,
				Groups: []Group{{Name: "a", Start: 0, End: 1}},
			},
		},
		{
			name: "root of size 4",
			mc:   v1alpha2test.MiniCluster("flux-sample").Namespace("hpc").Size(4).Obj(),
			want: &Layout{
				Hosts:    []string{"flux-sample-0", "flux-sample-1", "flux-sample-2", "flux-sample-3"},
				Hostlist: "flux-sample-[0-3]", GlobalHostlist: "flux-sample-[0-3]",
				LocalStart: 0, LocalEnd: 4, Parents: map[int]int{}, Quorum: 4,
				Groups: []Group{{Name: "flux-sample", Start: 0, End: 4}},
			},
		},
		{
			name: "maxSize larger than size reserves hosts but does not wait for them",
			mc:   v1alpha2test.MiniCluster("a").Namespace("hpc").Size(2).MaxSize(4).Obj(),
			want: &Layout{
				Hosts: []string{"a-0", "a-1", "a-2", "a-3"}, Hostlist: "a-[0-3]", GlobalHostlist: "a-[0-3]",
				LocalStart: 0, LocalEnd: 4, Parents: map[int]int{}, Quorum: 2,
				Groups: []Group{{Name: "a", Start: 0, End: 4}},
			},
		},
		{
			name: "minSize sets the quorum",
			mc:   v1alpha2test.Edit(v1alpha2test.MiniCluster("a").Namespace("hpc").Size(4).Obj(), func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.MinSize = 3 }),
			want: &Layout{
				Hosts: []string{"a-0", "a-1", "a-2", "a-3"}, Hostlist: "a-[0-3]", GlobalHostlist: "a-[0-3]",
				LocalStart: 0, LocalEnd: 4, Parents: map[int]int{}, Quorum: 3,
				Groups: []Group{{Name: "a", Start: 0, End: 4}},
			},
		},
		{
			name: "root with three bursts of different sizes",
			mc:   threeBursts(),
			want: &Layout{
				Hosts: []string{
					"flux-sample-0", "flux-sample-1", "flux-sample-2",
					"burst-0-0", "burst-0-1", "burst-0-2", "burst-0-3",
					"burst-1-0",
					"burst-2-0", "burst-2-1", "burst-2-2",
				},
				Hostlist:       "flux-sample-[0-2],burst-0-[0-3],burst-1-0,burst-2-[0-2]",
				GlobalHostlist: "flux-sample-[0-2],burst-0-[0-3],burst-1-0,burst-2-[0-2]",
				LocalStart:     0, LocalEnd: 3,
				Parents: map[int]int{4: 3, 5: 3, 6: 3, 9: 8, 10: 8},
				Quorum:  2,
				Groups: []Group{
					{Name: "flux-sample", Start: 0, End: 3},
					{Name: "burst-0", Cluster: "member-a", Start: 3, End: 7},
					{Name: "burst-1", Start: 7, End: 8},
					{Name: "burst-2", Cluster: "member-b", Start: 8, End: 11},
				},
			},
		},
		{
			name: "child of a burst",
			mc:   v1alpha2test.Child(threeBursts(), "burst-2", "127.0.2.10", 31234),
			want: &Layout{
				Hosts: []string{
					"127.0.2.10", "flux-sample-1", "flux-sample-2",
					"burst-0-0", "burst-0-1", "burst-0-2", "burst-0-3",
					"burst-1-0",
					"burst-2-0", "burst-2-1", "burst-2-2",
				},
				Hostlist:       "127.0.2.10,flux-sample-[1-2],burst-0-[0-3],burst-1-0,burst-2-[0-2]",
				GlobalHostlist: "flux-sample-[0-2],burst-0-[0-3],burst-1-0,burst-2-[0-2]",
				LocalStart:     8, LocalEnd: 11,
				Parents:     map[int]int{4: 3, 5: 3, 6: 3, 9: 8, 10: 8},
				LeadAddress: "127.0.2.10", LeadPort: 31234,
				Groups: []Group{
					{Name: "flux-sample", Start: 0, End: 3},
					{Name: "burst-0", Start: 3, End: 7},
					{Name: "burst-1", Start: 7, End: 8},
					{Name: "burst-2", Start: 8, End: 11},
				},
			},
		},
		{
			name: "child with the default port and a DNS address, root of size 1",
			mc:   v1alpha2test.Child(v1alpha2test.MiniCluster("root").Namespace("hpc").Size(1).Bursts(fluxv1alpha2.Burst{Name: "b", Size: 2, Cluster: "m"}).Obj(), "b", "lead.example.org", 0),
			want: &Layout{
				Hosts:    []string{"lead.example.org", "b-0", "b-1"},
				Hostlist: "lead.example.org,b-[0-1]", GlobalHostlist: "root-0,b-[0-1]",
				LocalStart: 1, LocalEnd: 3, Parents: map[int]int{2: 1},
				LeadAddress: "lead.example.org", LeadPort: 8050,
				Groups: []Group{{Name: "root", Start: 0, End: 1}, {Name: "b", Start: 1, End: 3}},
			},
		},
		{
			name: "custom hostlist on a root",
			mc: v1alpha2test.Edit(v1alpha2test.MiniCluster("a").Namespace("hpc").Size(2).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
				mc.Spec.Flux.Bursting.Hostlist = "a-[0-1],compute-a-[001-002]"
			}),

			want: &Layout{
				Hosts:    []string{"a-0", "a-1", "compute-a-001", "compute-a-002"},
				Hostlist: "a-[0-1],compute-a-[001-002]", GlobalHostlist: "a-[0-1],compute-a-[001-002]",
				LocalStart: 0, LocalEnd: 2, Parents: map[int]int{}, Quorum: 2,
				Groups: []Group{{Name: "a", Start: 0, End: 2}},
			},
		},
		{
			name: "custom hostlist on a child",
			mc: v1alpha2test.Edit(v1alpha2test.MiniCluster("c").Namespace("hpc").Size(2).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
				mc.Spec.Flux.Bursting.LeadBroker = &fluxv1alpha2.LeadBroker{Address: "10.0.0.1", Name: "a", Size: 2, Port: 30000}
				mc.Spec.Flux.Bursting.Hostlist = "10.0.0.1,a-1,c-[0-1]"
			}),

			want: &Layout{
				Hosts:    []string{"10.0.0.1", "a-1", "c-0", "c-1"},
				Hostlist: "10.0.0.1,a-1,c-[0-1]", GlobalHostlist: "a-[0-1],c-[0-1]",
				LocalStart: 2, LocalEnd: 4, Parents: map[int]int{},
				LeadAddress: "10.0.0.1", LeadPort: 30000,
				Groups: []Group{{Name: "c", Start: 2, End: 4}},
			},
		},
		{
			name: "custom topology is fluxfed's tree",
			mc: v1alpha2test.Edit(threeBursts(), func(mc *fluxv1alpha2.MiniCluster) {
				mc.Spec.Flux.Topology = "custom"
			}),

			want: func() *Layout {
				l, err := NewLayout(threeBursts())
				if err != nil {
					panic(err)
				}
				return l
			}(),
		},
		{
			name: "user topology kary:2 without bursts",
			mc: v1alpha2test.Edit(v1alpha2test.MiniCluster("a").Namespace("hpc").Size(7).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
				mc.Spec.Flux.Topology = "kary:2"
			}),

			want: &Layout{
				Hosts:    []string{"a-0", "a-1", "a-2", "a-3", "a-4", "a-5", "a-6"},
				Hostlist: "a-[0-6]", GlobalHostlist: "a-[0-6]",
				LocalStart: 0, LocalEnd: 7, Parents: map[int]int{}, Topology: "kary:2", Quorum: 7,
				Groups: []Group{{Name: "a", Start: 0, End: 7}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NewLayout(tt.mc)
			require.NoError(t, err)
			if diff := cmp.Diff(tt.want, got, ignoreUnexported); diff != "" {
				t.Errorf("NewLayout mismatch (-want +got):\n%s", diff)
			}
			for r, h := range got.Hosts {
				require.Equal(t, r, got.Rank(h), "Rank(%s)", h)
			}
		})
	}
}

// TestFederationAgrees checks that the root side and every child side of a federation agree on
// every host's rank (but rank 0, which a child names by the lead broker's address) and on every
// rank's parent, and that every child's pods hold their own burst's ranks.
func TestFederationAgrees(t *testing.T) {
	roots := []struct {
		name string
		root *fluxv1alpha2.MiniCluster
	}{
		{name: "three bursts", root: threeBursts()},
		{name: "maxSize larger than size, bursts of 1", root: v1alpha2test.MiniCluster("r").Namespace("hpc").Size(1).MaxSize(5).Bursts(
			fluxv1alpha2.Burst{Name: "x", Size: 1, Cluster: "m"}, fluxv1alpha2.Burst{Name: "y", Size: 1},
		).Obj()},
		{name: "flat user topology", root: v1alpha2test.Edit(threeBursts(), func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Flux.Topology = "kary:0" })},
		{name: "binomial user topology within clusters", root: v1alpha2test.Edit(
			v1alpha2test.MiniCluster("r").Namespace("hpc").Size(2).Bursts(fluxv1alpha2.Burst{Name: "x", Size: 2, Cluster: "m"}).Obj(),
			func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Flux.Topology = "binomial" })},
		{name: "many bursts", root: func() *fluxv1alpha2.MiniCluster {
			var bursts []fluxv1alpha2.Burst
			for i := range 10 {
				bursts = append(bursts, fluxv1alpha2.Burst{Name: fmt.Sprintf("b%d", i), Size: int32(i%4 + 1), Cluster: "m"})
			}
			return v1alpha2test.MiniCluster("r").Namespace("hpc").Size(3).MaxSize(8).Bursts(bursts...).Obj()
		}()},
	}
	for _, tt := range roots {
		t.Run(tt.name, func(t *testing.T) {
			root, err := NewLayout(tt.root)
			require.NoError(t, err)
			require.Equal(t, root.Hostlist, root.GlobalHostlist)
			for _, burst := range tt.root.Spec.Flux.Bursting.Clusters {
				t.Run(burst.Name, func(t *testing.T) {
					child, err := NewLayout(v1alpha2test.Child(tt.root, burst.Name, "203.0.113.7", 30001))
					require.NoError(t, err)
					require.Equal(t, root.GlobalHostlist, child.GlobalHostlist)
					require.Len(t, child.Hosts, len(root.Hosts))
					require.Equal(t, "203.0.113.7", child.Hosts[0])
					require.Equal(t, root.Hosts[1:], child.Hosts[1:])
					require.Equal(t, root.Parents, child.Parents)
					require.Equal(t, root.Topology, child.Topology)
					for r := range root.Hosts {
						require.Equal(t, root.Parent(r), child.Parent(r), "parent of rank %d", r)
					}
					g, ok := root.GroupOf(child.LocalStart)
					require.True(t, ok)
					require.Equal(t, burst.Name, g.Name)
					require.Equal(t, g.Start, child.LocalStart)
					require.Equal(t, g.End, child.LocalEnd)
					for i := range int(burst.Size) {
						require.Equal(t, child.LocalStart+i, root.Rank(fmt.Sprintf("%s-%d", burst.Name, i)))
					}
					require.Zero(t, child.Quorum)
					require.Equal(t, 30001, child.LeadPort)
					// Every broker of the burst reaches rank 0 or a broker of its own burst.
					for r := child.LocalStart; r < child.LocalEnd; r++ {
						p := child.Parent(r)
						require.True(t, p == 0 || (p >= child.LocalStart && p < r), "rank %d has parent %d", r, p)
					}
				})
			}
		})
	}
}

func TestParent(t *testing.T) {
	l, err := NewLayout(threeBursts())
	require.NoError(t, err)
	got := make([]int, len(l.Hosts))
	for r := range got {
		got[r] = l.Parent(r)
	}
	require.Equal(t, []int{-1, 0, 0, 0, 3, 3, 3, 0, 0, 8, 8}, got)
	require.Equal(t, -1, l.Parent(len(l.Hosts)))
	require.Equal(t, -1, l.Rank("nope"))

	// A Layout written by hand works too.
	literal := &Layout{Hosts: []string{"a", "b", "c", "d"}, Topology: "kary:1"}
	require.Equal(t, 2, literal.Parent(3))
	require.Equal(t, 3, literal.Rank("d"))
	literal.Topology = ""
	literal.Parents = map[int]int{3: 1}
	require.Equal(t, 1, literal.Parent(3))
	require.Equal(t, 0, literal.Parent(2))
	literal.Topology = "nonsense"
	require.Equal(t, -1, literal.Parent(2))
}

func TestNewLayoutTopology(t *testing.T) {
	rootAndBurst := func(topo string) *fluxv1alpha2.MiniCluster {
		return v1alpha2test.Edit(v1alpha2test.MiniCluster("r").Namespace("hpc").Size(2).Bursts(fluxv1alpha2.Burst{Name: "x", Size: 4, Cluster: "m"}).Obj(),
			func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.Flux.Topology = topo })

	}
	tests := []struct {
		name    string
		mc      *fluxv1alpha2.MiniCluster
		wantErr string // empty: valid
		parents []int  // when valid: Parent of every rank
	}{
		{name: "kary:0 is flat", mc: rootAndBurst("kary:0"), parents: []int{-1, 0, 0, 0, 0, 0}},
		{name: "kary:5 is flat for 6 brokers", mc: rootAndBurst("kary:5"), parents: []int{-1, 0, 0, 0, 0, 0}},
		{name: "binomial keeps the burst together", mc: rootAndBurst("binomial"), parents: []int{-1, 0, 0, 2, 0, 4}},
		{name: "mincrit below its fanout is flat", mc: rootAndBurst("mincrit"), parents: []int{-1, 0, 0, 0, 0, 0}},
		{name: "mincrit:1 puts everyone under rank 1", mc: v1alpha2test.Edit(v1alpha2test.MiniCluster("r").Namespace("hpc").Size(4).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Topology = "mincrit:1"
		}),

			parents: []int{-1, 0, 1, 1}},
		{name: "kary:2 without bursts", mc: v1alpha2test.Edit(v1alpha2test.MiniCluster("r").Namespace("hpc").Size(5).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Topology = "kary:2"
		}),

			parents: []int{-1, 0, 0, 1, 1}},
		{name: "kary:2 on a custom hostlist of own pods only", mc: v1alpha2test.Edit(v1alpha2test.MiniCluster("r").Namespace("hpc").Size(3).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Topology = "kary:2"
			mc.Spec.Flux.Bursting.Hostlist = "r-[0-2]"
		}),

			parents: []int{-1, 0, 0}},
		{name: "minimalService with the default tree", mc: v1alpha2test.Edit(threeBursts(), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.MinimalService = true
		}),

			parents: []int{-1, 0, 0, 0, 3, 3, 3, 0, 0, 8, 8}},
		{name: "minimalService on a child with the default tree", mc: v1alpha2test.Edit(v1alpha2test.Child(threeBursts(), "burst-0", "127.0.2.1", 0), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.MinimalService = true
		}),

			parents: []int{-1, 0, 0, 0, 3, 3, 3, 0, 0, 8, 8}},

		{name: "kary:2 puts a burst broker under a root pod", mc: rootAndBurst("kary:2"),
			wantErr: `spec.flux.topology "kary:2": rank 3 (x-1) would have parent rank 1 (r-1), which runs in the root MiniCluster r while the broker runs in burst x (cluster m)`},
		{name: "kary:1 on the child side", mc: v1alpha2test.Child(rootAndBurst("kary:1"), "x", "127.0.2.1", 0),
			wantErr: `spec.flux.topology "kary:1": rank 2 (x-0) would have parent rank 1 (r-1), which runs in the root MiniCluster r while the broker runs in burst x;`},
		{name: "binomial puts a burst broker under a root pod", mc: v1alpha2test.Edit(v1alpha2test.MiniCluster("r").Namespace("hpc").Size(3).Bursts(
			fluxv1alpha2.Burst{Name: "x", Size: 2, Cluster: "m"},
		).Obj(),
			func(mc *fluxv1alpha2.MiniCluster) {
				mc.Spec.Flux.Topology = "binomial"
			}),

			wantErr: `rank 3 (x-0) would have parent rank 2 (r-2), which runs in the root MiniCluster r`},
		{name: "binomial across two bursts, other order", mc: v1alpha2test.Edit(v1alpha2test.MiniCluster("r").Namespace("hpc").Size(1).Bursts(
			fluxv1alpha2.Burst{Name: "x", Size: 2, Cluster: "m"}, fluxv1alpha2.Burst{Name: "y", Size: 1},
		).Obj(),
			func(mc *fluxv1alpha2.MiniCluster) {
				mc.Spec.Flux.Topology = "binomial"
			}),

			wantErr: `rank 3 (y-0) would have parent rank 2 (x-1), which runs in burst x (cluster m) while the broker runs in burst y;`},
		{name: "kary:2 with minimalService", mc: v1alpha2test.Edit(v1alpha2test.MiniCluster("r").Namespace("hpc").Size(4).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Topology = "kary:2"
			mc.Spec.Flux.MinimalService = true
		}),

			wantErr: `rank 3 (r-3) would have parent rank 1 (r-1), which has no DNS name because spec.flux.minimalService is set`},
		{name: "kary:2 on a custom hostlist with other hosts", mc: v1alpha2test.Edit(v1alpha2test.MiniCluster("r").Namespace("hpc").Size(2).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Topology = "kary:2"
			mc.Spec.Flux.Bursting.Hostlist = "r-[0-1],other-[0-2]"
		}),

			wantErr: `rank 3 (other-1) would have parent rank 1 (r-1), and fluxfed cannot tell whether they run in the same cluster`},
		{name: "unknown scheme", mc: rootAndBurst("ring"), wantErr: `spec.flux.topology "ring": unknown topology scheme "ring"`},
		{name: "kary without K", mc: rootAndBurst("kary"), wantErr: `spec.flux.topology "kary": kary needs its fanout K`},
		{name: "kary with a negative K", mc: rootAndBurst("kary:-1"), wantErr: `kary needs its fanout K`},
		{name: "kary with a huge K", mc: rootAndBurst("kary:99999999999"), wantErr: `kary needs its fanout K`},
		{name: "binomial with an argument", mc: rootAndBurst("binomial:2"), wantErr: `binomial takes no argument`},
		{name: "custom with an argument", mc: rootAndBurst("custom:x"), wantErr: `custom takes no argument`},
		{name: "mincrit with a bad K", mc: rootAndBurst("mincrit:x"), wantErr: `mincrit takes an optional number of routers K`},
		{name: "empty scheme", mc: rootAndBurst(":2"), wantErr: `unknown topology scheme ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := NewLayout(tt.mc)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				var topoErr *TopologyError
				require.ErrorAs(t, err, &topoErr)
				require.True(t, IsInvalid(err))
				return
			}
			require.NoError(t, err)
			got := make([]int, len(l.Hosts))
			for r := range got {
				got[r] = l.Parent(r)
			}
			require.Equal(t, tt.parents, got)
			if l.Topology != "" {
				require.Empty(t, l.Parents, "parent keys are ignored by Flux unless the topology is custom")
			}
		})
	}
}

func TestNewLayoutErrors(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	tests := []struct {
		name    string
		mc      *fluxv1alpha2.MiniCluster
		want    string
		errType any
	}{
		{name: "no MiniCluster", mc: nil, want: "no MiniCluster given", errType: &SpecError{}},
		{name: "no name", mc: v1alpha2test.MiniCluster("").Namespace("hpc").Size(1).Obj(), want: "metadata.name: is empty", errType: &SpecError{}},
		{name: "size 0", mc: v1alpha2test.MiniCluster("a").Namespace("hpc").Size(0).Obj(), want: "spec.size: must be at least 1", errType: &SpecError{}},
		{name: "minSize above size", mc: v1alpha2test.Edit(v1alpha2test.MiniCluster("a").Namespace("hpc").Size(2).Obj(), func(mc *fluxv1alpha2.MiniCluster) { mc.Spec.MinSize = 3 }),
			want: "spec.minSize: 3 is larger than spec.size 2", errType: &SpecError{}},
		{name: "name fits size", mc: v1alpha2test.MiniCluster(long(61)).Namespace("hpc").Size(10).Obj(), errType: nil},
		{name: "name too long for maxSize", mc: v1alpha2test.MiniCluster(long(61)).Namespace("hpc").Size(10).MaxSize(11).Obj(),
			want: `metadata.name: host "` + long(61) + `-10" has a label longer than 63 characters`, errType: &HostError{}},
		{name: "name with an underscore", mc: v1alpha2test.MiniCluster("a_b").Namespace("hpc").Size(1).Obj(),
			want: `metadata.name: host "a_b-0" contains '_', which Flux does not accept`, errType: &HostError{}},
		{name: "burst name too long for its size", mc: v1alpha2test.MiniCluster("a").Namespace("hpc").Size(1).Bursts(fluxv1alpha2.Burst{Name: long(62), Size: 10}).Obj(),
			want: `spec.flux.bursting.clusters[0].name: host "` + long(62) + `-9" has a label longer than 63 characters`, errType: &HostError{}},
		{name: "burst size 0 without maxSize", mc: v1alpha2test.MiniCluster("a").Namespace("hpc").Size(1).Bursts(fluxv1alpha2.Burst{Name: "b", Size: 0}).Obj(),
			want: "spec.flux.bursting.clusters[0].size: 0 reserves no rank", errType: &SpecError{}},
		{name: "burst size negative", mc: v1alpha2test.MiniCluster("a").Namespace("hpc").Size(1).Bursts(fluxv1alpha2.Burst{Name: "b", Size: -1, MaxSize: 2}).Obj(),
			want: "spec.flux.bursting.clusters[0].size: must be at least 0", errType: &SpecError{}},
		{name: "burst size above maxSize", mc: v1alpha2test.MiniCluster("a").Namespace("hpc").Size(1).Bursts(fluxv1alpha2.Burst{Name: "b", Size: 3, MaxSize: 2}).Obj(),
			want: "spec.flux.bursting.clusters[0].size: 3 exceeds maxSize 2", errType: &SpecError{}},
		{name: "burst maxSize negative", mc: v1alpha2test.MiniCluster("a").Namespace("hpc").Size(1).Bursts(fluxv1alpha2.Burst{Name: "b", Size: 1, MaxSize: -1}).Obj(),
			want: "spec.flux.bursting.clusters[0].maxSize: must be at least 1", errType: &SpecError{}},
		{name: "burst name too long for its maxSize", mc: v1alpha2test.MiniCluster("a").Namespace("hpc").Size(1).Bursts(fluxv1alpha2.Burst{Name: long(61), Size: 1, MaxSize: 100}).Obj(),
			want: "spec.flux.bursting.clusters[0].name", errType: &HostError{}},
		{name: "duplicate burst", mc: v1alpha2test.MiniCluster("a").Namespace("hpc").Size(1).Bursts(fluxv1alpha2.Burst{Name: "b", Size: 1}, fluxv1alpha2.Burst{Name: "b", Size: 2}).Obj(),
			want: `spec.flux.bursting.clusters[1].name: "b" is also the name of clusters[0]`, errType: &SpecError{}},
		{name: "burst named like the root", mc: v1alpha2test.MiniCluster("a").Namespace("hpc").Size(1).Bursts(fluxv1alpha2.Burst{Name: "a", Size: 1}).Obj(),
			want: `spec.flux.bursting.clusters[0].name: "a" is the root MiniCluster's name`, errType: &SpecError{}},
		{name: "burst without a name", mc: v1alpha2test.MiniCluster("a").Namespace("hpc").Size(1).Bursts(fluxv1alpha2.Burst{Size: 1}).Obj(),
			want: `spec.flux.bursting.clusters[0].name: is empty`, errType: &SpecError{}},
		{name: "too many hosts", mc: v1alpha2test.MiniCluster("a").Namespace("hpc").Size(1).MaxSize(MaxHosts + 1).Obj(),
			want: "more than the 65536 fluxfed supports", errType: &SpecError{}},
		{name: "too many hosts with bursts", mc: v1alpha2test.MiniCluster("a").Namespace("hpc").Size(1).Bursts(fluxv1alpha2.Burst{Name: "b", Size: MaxHosts}).Obj(),
			want: "the instance would have 65537 hosts", errType: &SpecError{}},
		{name: "child not named after an entry", mc: v1alpha2test.Edit(v1alpha2test.Child(threeBursts(), "burst-0", "127.0.2.1", 0), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Name = "burst-9"
		}),

			want: `spec.flux.bursting.clusters: no entry is named "burst-9"`, errType: &SpecError{}},
		{name: "child larger than its entry", mc: v1alpha2test.Edit(v1alpha2test.Child(threeBursts(), "burst-0", "127.0.2.1", 0), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.MaxSize = 5
		}),

			want: `spec.maxSize: 5 pods do not fit the 4 ranks of the spec.flux.bursting.clusters entry "burst-0"`, errType: &SpecError{}},
		{name: "child smaller than its entry", mc: v1alpha2test.Edit(v1alpha2test.Child(threeBursts(), "burst-0", "127.0.2.1", 0), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Size = 2
		}),

			errType: nil},
		{name: "lead address with an underscore", mc: v1alpha2test.Child(threeBursts(), "burst-0", "lead_broker", 0),
			want: `spec.flux.bursting.leadBroker.address: host "lead_broker" contains '_'`, errType: &HostError{}},
		{name: "IPv6 lead address", mc: v1alpha2test.Child(threeBursts(), "burst-0", "fd00::1", 0),
			want: `spec.flux.bursting.leadBroker.address: host "fd00::1" contains ':'`, errType: &HostError{}},
		{name: "lead address with an empty label", mc: v1alpha2test.Child(threeBursts(), "burst-0", "lead..example", 0),
			want: `host "lead..example" has an empty label`, errType: &HostError{}},
		{name: "lead address too long", mc: v1alpha2test.Child(threeBursts(), "burst-0", strings.Repeat("abcdefgh.", 29)+"x", 0),
			want: `is longer than 253 characters`, errType: &HostError{}},
		{name: "lead address starting with a dash", mc: v1alpha2test.Child(threeBursts(), "burst-0", "-lead", 0),
			want: `has a label that starts or ends with '-': "-lead"`, errType: &HostError{}},
		{name: "lead address colliding with a burst host", mc: v1alpha2test.Child(threeBursts(), "burst-0", "burst-1-0", 0),
			want: `spec.flux.bursting: host "burst-1-0" appears twice in the hosts (ranks 0 and 7)`, errType: &HostError{}},
		{name: "lead port out of range", mc: v1alpha2test.Child(threeBursts(), "burst-0", "127.0.2.1", 70000),
			want: "spec.flux.bursting.leadBroker.port: 70000 is not a TCP port", errType: &SpecError{}},
		{name: "lead size 0", mc: v1alpha2test.Edit(v1alpha2test.Child(threeBursts(), "burst-0", "127.0.2.1", 0), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Bursting.LeadBroker.Size = 0
		}),

			want: "spec.flux.bursting.leadBroker.size: must be at least 1", errType: &SpecError{}},
		{name: "lead name empty", mc: v1alpha2test.Edit(v1alpha2test.Child(threeBursts(), "burst-0", "127.0.2.1", 0), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Bursting.LeadBroker.Name = ""
		}),

			want: "spec.flux.bursting.leadBroker.name: is empty", errType: &SpecError{}},
		{name: "lead name too long for its size", mc: v1alpha2test.Edit(v1alpha2test.Child(threeBursts(), "burst-0", "127.0.2.1", 0), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Bursting.LeadBroker.Name = long(62)
		}),

			want: `spec.flux.bursting.leadBroker.name: host "` + long(62) + `-2" has a label longer than 63`, errType: &HostError{}},
		{name: "custom hostlist that does not parse", mc: v1alpha2test.Edit(v1alpha2test.MiniCluster("a").Namespace("hpc").Size(1).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Bursting.Hostlist = "a-[0-"
		}),

			want: "spec.flux.bursting.hostlist: hostlist:", errType: &SpecError{}},
		{name: "custom hostlist without the own pods", mc: v1alpha2test.Edit(v1alpha2test.MiniCluster("a").Namespace("hpc").Size(2).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Bursting.Hostlist = "b-[0-1]"
		}),

			want: "spec.flux.bursting.hostlist: does not list a-0, the first pod of this MiniCluster", errType: &SpecError{}},
		{name: "custom hostlist with the own pods apart", mc: v1alpha2test.Edit(v1alpha2test.MiniCluster("a").Namespace("hpc").Size(2).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Bursting.Hostlist = "a-0,b-0,a-1"
		}),

			want: "but a-1 is not at rank 1", errType: &SpecError{}},
		{name: "custom hostlist too short for maxSize", mc: v1alpha2test.Edit(v1alpha2test.MiniCluster("a").Namespace("hpc").Size(2).MaxSize(3).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Bursting.Hostlist = "a-[0-1]"
		}),

			want: "but a-2 is not at rank 2", errType: &SpecError{}},
		{name: "custom hostlist on a root not starting with pod 0", mc: v1alpha2test.Edit(v1alpha2test.MiniCluster("a").Namespace("hpc").Size(1).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Bursting.Hostlist = "login,a-0"
		}),

			want: "must list a-0 first: pod 0 is the lead broker", errType: &SpecError{}},
		{name: "custom hostlist on a child starting with its pod 0", mc: v1alpha2test.Edit(v1alpha2test.MiniCluster("c").Namespace("hpc").Size(1).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Bursting.LeadBroker = &fluxv1alpha2.LeadBroker{Address: "10.0.0.1", Name: "a", Size: 1}
			mc.Spec.Flux.Bursting.Hostlist = "c-0,a-1"
		}),

			want: "lists c-0 first, but rank 0 of a burst child is the lead broker", errType: &SpecError{}},
		{name: "custom hostlist with a bad host", mc: v1alpha2test.Edit(v1alpha2test.MiniCluster("a").Namespace("hpc").Size(1).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Bursting.Hostlist = "a-0,a_b"
		}),

			want: `spec.flux.bursting.hostlist: host "a_b" contains '_'`, errType: &HostError{}},
		{name: "custom hostlist with a duplicate", mc: v1alpha2test.Edit(v1alpha2test.MiniCluster("a").Namespace("hpc").Size(1).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Bursting.Hostlist = "a-0,b,c,b"
		}),

			want: `spec.flux.bursting.hostlist: host "b" appears twice in the hosts (ranks 1 and 3)`, errType: &HostError{}},
		{name: "custom hostlist too large", mc: v1alpha2test.Edit(v1alpha2test.MiniCluster("a").Namespace("hpc").Size(1).Obj(), func(mc *fluxv1alpha2.MiniCluster) {
			mc.Spec.Flux.Bursting.Hostlist = "a-0,n[0-999999]"
		}),

			want: "the instance would have 1000001 hosts", errType: &SpecError{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewLayout(tt.mc)
			if tt.errType == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.want)
			require.True(t, IsInvalid(err))
			require.True(t, IsInvalid(fmt.Errorf("wrapped: %w", err)))
			switch tt.errType.(type) {
			case *SpecError:
				var e *SpecError
				require.ErrorAs(t, err, &e)
			case *HostError:
				var e *HostError
				require.ErrorAs(t, err, &e)
			}
		})
	}
	require.False(t, IsInvalid(errors.New("other")))
	require.False(t, IsInvalid(nil))
}

// FuzzNewLayout feeds arbitrary custom hostlists, topologies and bursts to NewLayout: it must
// never panic, every error must be one of its typed errors, and every layout it returns must be
// consistent: ranks match Hosts, the own pods sit at LocalStart.., and every parent is rank 0
// or in the broker's own group.
func FuzzNewLayout(f *testing.F) {
	f.Add("a-[0-1],b-[0-2]", "", "a", int32(2), int32(0), "", int32(0), false)
	f.Add("", "kary:2", "a", int32(3), int32(5), "b", int32(4), false)
	f.Add("", "binomial", "r", int32(2), int32(0), "x", int32(2), true)
	f.Add("10.0.0.1,a-1,c-[0-1]", "mincrit", "c", int32(2), int32(0), "", int32(0), true)
	f.Fuzz(func(t *testing.T, hosts, topo, name string, size, maxSize int32, burst string, burstSize int32, child bool) {
		mc := v1alpha2test.MiniCluster(name).Namespace("hpc").Size(size % 70).MaxSize(maxSize % 70).Obj()
		mc.Spec.Flux.Bursting.Hostlist = hosts
		mc.Spec.Flux.Topology = topo
		if burst != "" {
			mc.Spec.Flux.Bursting.Clusters = []fluxv1alpha2.Burst{{Name: burst, Size: burstSize % 70}}
		}
		if child {
			mc.Spec.Flux.Bursting.LeadBroker = &fluxv1alpha2.LeadBroker{Address: "127.0.2.1", Name: "lead", Size: 3}
		}
		l, err := NewLayout(mc)
		if err != nil {
			if !IsInvalid(err) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		for r, h := range l.Hosts {
			if l.Rank(h) != r {
				t.Fatalf("Rank(%q) = %d, want %d", h, l.Rank(h), r)
			}
			if r == 0 {
				continue
			}
			p := l.Parent(r)
			if p < 0 || p >= len(l.Hosts) || p == r {
				t.Fatalf("rank %d has parent %d", r, p)
			}
			if p != 0 {
				gr, gp := l.groupIndex(r), l.groupIndex(p)
				if gr < 0 || gr != gp {
					t.Fatalf("rank %d has parent %d in another group", r, p)
				}
			}
		}
		for i := 0; i < l.LocalEnd-l.LocalStart && i < int(mc.MaxSize()); i++ {
			if want := fmt.Sprintf("%s-%d", name, i); l.Hosts[l.LocalStart+i] != want {
				t.Fatalf("rank %d is %q, want %q", l.LocalStart+i, l.Hosts[l.LocalStart+i], want)
			}
		}
	})
}
