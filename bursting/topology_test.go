package bursting

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// binomialReference builds the binomial tree the way flux-core's topology plugin does: from
// rank 0, children at root+2^j for every order j below the tree's, recursively.
func binomialReference(size int) []int {
	parents := make([]int, size)
	parents[0] = -1
	k := 0
	for 1<<k < size {
		k++
	}
	var generate func(root, k int)
	generate = func(root, k int) {
		for j := range k {
			if child := root + 1<<j; child < size {
				parents[child] = root
				generate(child, j)
			}
		}
	}
	generate(0, k)
	return parents
}

// mincritReference is flux-core's mincrit plugin: rank 0 over k routers, leaves dealt out to
// the routers in turn.
func mincritReference(size, k int) []int {
	parents := make([]int, size)
	parents[0] = -1
	for i := k + 1; i < size && k > 0; i++ {
		parents[i] = (i-k-1)%k + 1
	}
	return parents
}

func parentsOf(t topology, size int) []int {
	got := make([]int, size)
	for r := range got {
		got[r] = t.parent(r, size)
	}
	return got
}

func TestTopologyParents(t *testing.T) {
	tests := []struct {
		name string
		topo string
		size int
		want []int
	}{
		{name: "kary:0 is flat", topo: "kary:0", size: 5, want: []int{-1, 0, 0, 0, 0}},
		{name: "kary:1 is a chain", topo: "kary:1", size: 4, want: []int{-1, 0, 1, 2}},
		{name: "kary:2", topo: "kary:2", size: 8, want: []int{-1, 0, 0, 1, 1, 2, 2, 3}},
		{name: "kary:3", topo: "kary:3", size: 8, want: []int{-1, 0, 0, 0, 1, 1, 1, 2}},
		{name: "binomial of 8", topo: "binomial", size: 8, want: []int{-1, 0, 0, 2, 0, 4, 4, 6}},
		{name: "mincrit:2", topo: "mincrit:2", size: 7, want: []int{-1, 0, 0, 1, 2, 1, 2}},
		{name: "mincrit:0 is flat", topo: "mincrit:0", size: 4, want: []int{-1, 0, 0, 0}},
		{name: "size 1", topo: "binomial", size: 1, want: []int{-1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo, reason := parseTopology(tt.topo)
			require.Empty(t, reason)
			require.Equal(t, tt.want, parentsOf(topo, tt.size))
		})
	}
}

func TestTopologyMatchesFluxCore(t *testing.T) {
	for size := 1; size <= 300; size++ {
		require.Equal(t, binomialReference(size), parentsOf(topology{scheme: topoBinomial}, size), "binomial size %d", size)
		for k := 0; k <= 5; k++ {
			require.Equal(t, mincritReference(size, k), parentsOf(topology{scheme: topoMincrit, k: k, hasK: true}, size), "mincrit:%d size %d", k, size)
		}
	}
	// mincrit without K stays flat up to 1025 brokers, then picks 2 routers or more.
	require.Equal(t, 0, mincritChooseK(1025))
	require.Equal(t, 2, mincritChooseK(1026))
	require.Equal(t, 2, mincritChooseK(2051))
	require.Equal(t, 3, mincritChooseK(2052))
	auto := topology{scheme: topoMincrit}
	require.Equal(t, mincritReference(3000, 3), parentsOf(auto, 3000))
}

// FuzzParseTopology checks that parsing never panics and that every topology Flux accepts gives
// every rank a parent below it, so the tree has no cycles.
func FuzzParseTopology(f *testing.F) {
	for _, s := range []string{"", "custom", "kary:0", "kary:2", "kary:", "binomial", "mincrit", "mincrit:3", "kary:-1", "x:y:z", ":"} {
		f.Add(s, 17)
	}
	f.Fuzz(func(t *testing.T, s string, size int) {
		topo, reason := parseTopology(s)
		if reason != "" {
			return
		}
		if size < 1 || size > 5000 {
			size = 1 + (size%5000+5000)%5000
		}
		for r := 1; r < size; r++ {
			p := topo.parent(r, size)
			if p < 0 || p >= r {
				t.Fatalf("%q: rank %d of %d has parent %d", s, r, size, p)
			}
		}
	})
}
