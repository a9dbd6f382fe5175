package bursting

import (
	"strconv"
	"strings"
)

// topoScheme is a TBON topology scheme as flux-core's overlay module names it
// (src/modules/overlay/topology.c, flux-broker-attributes(7) tbon.topo).
type topoScheme int

const (
	// topoCustom takes the tree from the parent keys of the [bootstrap] hosts entries; a host
	// without one is a child of rank 0. It is Flux's default when booting from [bootstrap].
	topoCustom topoScheme = iota
	// topoKary is the complete k-ary tree; kary:0 is flat.
	topoKary
	// topoMincrit is a k-ary tree squashed to at most three levels.
	topoMincrit
	// topoBinomial is the binomial tree of the smallest order that fits the instance.
	topoBinomial
)

// topology is a parsed tbon.topo value.
type topology struct {
	scheme topoScheme
	// k is the argument of kary:K and mincrit:K; hasK is false for a bare "mincrit".
	k    int
	hasK bool
}

// maxTopoK bounds K so that parent arithmetic cannot overflow; any K at least the instance size
// gives the same (flat) tree anyway.
const maxTopoK = 1 << 30

// parseTopology reads a tbon.topo value the way flux-core's topology plugins do: a scheme name,
// optionally followed by ':' and a directive. The empty string means Flux's default for a
// [bootstrap] instance, custom. It returns a reason when Flux would refuse the value.
func parseTopology(s string) (topology, string) {
	if s == "" {
		return topology{scheme: topoCustom}, ""
	}
	name, arg, hasArg := strings.Cut(s, ":")
	switch name {
	case "custom":
		if arg != "" {
			return topology{}, "custom takes no argument"
		}
		return topology{scheme: topoCustom}, ""
	case "kary":
		k, ok := parseK(arg)
		if !hasArg || !ok {
			return topology{}, "kary needs its fanout K, an integer >= 0, as in kary:2"
		}
		return topology{scheme: topoKary, k: k, hasK: true}, ""
	case "mincrit":
		if arg == "" {
			return topology{scheme: topoMincrit}, ""
		}
		k, ok := parseK(arg)
		if !ok {
			return topology{}, "mincrit takes an optional number of routers K, an integer >= 0, as in mincrit:4"
		}
		return topology{scheme: topoMincrit, k: k, hasK: true}, ""
	case "binomial":
		if arg != "" {
			return topology{}, "binomial takes no argument"
		}
		return topology{scheme: topoBinomial}, ""
	}
	return topology{}, "unknown topology scheme " + strconv.Quote(name) + "; Flux knows kary:K, mincrit[:K], binomial and custom"
}

// parseK reads K of kary:K or mincrit:K: decimal digits only. flux-core uses strtoul, which also
// takes a sign or leading spaces; those are refused here rather than read in a surprising way.
func parseK(s string) (int, bool) {
	if s == "" || len(s) > 10 {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	k, err := strconv.Atoi(s)
	if err != nil || k > maxTopoK {
		return 0, false
	}
	return k, true
}

// parent returns the TBON parent of rank in an instance of size brokers under t, for every
// scheme but custom (whose parents come from the hosts array); -1 for rank 0.
func (t topology) parent(rank, size int) int {
	if rank <= 0 || rank >= size {
		return -1
	}
	switch t.scheme {
	case topoKary:
		if t.k == 0 {
			return 0
		}
		return (rank - 1) / t.k
	case topoMincrit:
		k := t.k
		if !t.hasK {
			k = mincritChooseK(size)
		}
		if k == 0 || rank <= k {
			return 0
		}
		return (rank-k-1)%k + 1
	case topoBinomial:
		// Each rank hangs below the rank that has its lowest set bit cleared: rank 6 (110)
		// below 4 (100), rank 7 (111) below 6, rank 8 below 0.
		return rank & (rank - 1)
	}
	return 0
}

// mincritMaxFanout is the fanout flux-core's mincrit avoids exceeding when it picks K itself.
const mincritMaxFanout = 1024

// mincritChooseK picks the number of routers flux-core picks for mincrit without K: 0 (flat)
// while rank 0 can serve everyone within mincritMaxFanout, else the smallest K >= 2 that keeps
// every router's fanout within it.
func mincritChooseK(size int) int {
	const maxFanout = mincritMaxFanout
	if size <= maxFanout+1 {
		return 0
	}
	k := 2
	for {
		leaves := size - 1 - k
		fanout := (leaves + k - 1) / k
		if fanout <= maxFanout {
			return k
		}
		k++
	}
}
