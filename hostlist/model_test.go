package hostlist

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// This file holds a slow model of how libhostlist sorts and deduplicates,
// written step by step after its algorithm (hostlist_sort: qsort, then
// hostlist_coalesce and hostlist_collapse; hostlist_uniq: qsort, then pairwise
// hostrange_join), with raw widths that are adjusted the way width_equiv
// adjusts them. Sort and Uniq use a different, faster formulation; the tests
// check that both agree.

type modelRange struct {
	prefix string
	lo, hi uint64
	width  int
	single bool
}

// modelUndefined marks inputs on which libhostlist itself goes wrong (an
// assertion fails, a range comes out empty, a difference is truncated), so
// there is nothing to compare with.
type modelUndefined struct{}

func modelDigits(n uint64) int { return len(strconv.FormatUint(n, 10)) }

// modelPad is the number of zeros printed before n at width w.
func modelPad(n uint64, w int) int { return max(w-modelDigits(n), 0) }

// modelWidthsAgree decides whether n (width *wn) and m (width *wm) can share a
// range and, when they can, gives one of them the other's width.
func modelWidthsAgree(n uint64, wn *int, m uint64, wm *int) bool {
	nSame := modelPad(n, *wn) == modelPad(n, *wm)
	mSame := modelPad(m, *wm) == modelPad(m, *wn)
	switch {
	case !nSame && !mSame:
		return false
	case !nSame:
		*wm = *wn
	default:
		*wn = *wm
	}
	return true
}

func modelPrefixCmp(a, b *modelRange) int {
	if c := strings.Compare(a.prefix, b.prefix); c != 0 {
		return c
	}
	return boolInt(b.single) - boolInt(a.single)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// modelCmp compares like hostrange_cmp, widths adjusted on the way.
func modelCmp(a, b *modelRange) int {
	if c := modelPrefixCmp(a, b); c != 0 {
		return c
	}
	if modelWidthsAgree(a.lo, &a.width, b.lo, &b.width) {
		if diff := max(a.lo, b.lo) - min(a.lo, b.lo); diff >= 1<<31 {
			// libhostlist stores this difference in an int.
			panic(modelUndefined{})
		}
		return cmp.Compare(a.lo, b.lo)
	}
	return cmp.Compare(a.width, b.width)
}

func modelSortRanges(rs []modelRange) {
	sort.SliceStable(rs, func(i, j int) bool { return modelCmp(&rs[i], &rs[j]) < 0 })
}

func modelSort(rs []modelRange) []modelRange {
	rs = slices.Clone(rs)
	modelSortRanges(rs)
	// Split overlapping neighbours until none overlap.
	for i := len(rs) - 1; i > 0; i-- {
		prev, next := &rs[i-1], &rs[i]
		if prev.single || next.single {
			continue
		}
		if modelCmp(prev, next) > 0 {
			panic(modelUndefined{}) // an assertion in hostrange_intersect
		}
		if modelPrefixCmp(prev, next) != 0 || prev.hi <= next.lo ||
			!modelWidthsAgree(prev.lo, &prev.width, next.lo, &next.width) {
			continue
		}
		dupLo, dupHi := next.lo, min(next.hi, prev.hi)
		width := prev.width
		if dupHi < prev.hi {
			next.hi = prev.hi
		}
		prev.hi = dupLo
		next.lo = dupHi
		var between []modelRange
		for v := dupLo; ; v++ {
			one := modelRange{prefix: prev.prefix, lo: v, hi: v, width: width}
			if v > prev.hi {
				between = append(between, one)
			}
			if v < next.lo {
				between = append(between, one)
			}
			if v == dupHi {
				break
			}
		}
		rs = slices.Insert(rs, i, between...)
		i = len(rs)
	}
	// Join neighbours that continue each other, from the back.
	for i := len(rs) - 1; i > 0; i-- {
		prev, next := &rs[i-1], &rs[i]
		if modelPrefixCmp(prev, next) == 0 && prev.hi+1 == next.lo &&
			modelWidthsAgree(prev.lo, &prev.width, next.lo, &next.width) {
			prev.hi = next.hi
			rs = slices.Delete(rs, i, i+1)
		}
	}
	return rs
}

func modelUniq(rs []modelRange) []modelRange {
	rs = slices.Clone(rs)
	modelSortRanges(rs)
	for i := 1; i < len(rs); {
		h1, h2 := &rs[i-1], &rs[i]
		joined := false
		if modelPrefixCmp(h1, h2) == 0 && modelWidthsAgree(h1.lo, &h1.width, h2.lo, &h2.width) {
			switch {
			case h1.single && h2.single:
				joined = true
			case h2.lo == 0 && h1.hi == math.MaxUint64:
				panic(modelUndefined{}) // lo-1 wraps around
			case h1.hi == h2.lo-1:
				h1.hi = h2.hi
				joined = true
			case h1.hi >= h2.lo:
				h1.hi = max(h1.hi, h2.hi)
				joined = true
			}
		}
		if joined {
			rs = slices.Delete(rs, i, i+1)
		} else {
			i++
		}
	}
	return rs
}

// toModel converts h's ranges, writing unpadded widths as wide as lo (what
// libhostlist reads) or as 0 (what its own tests construct).
func toModel(h *Hostlist, zeroWidths bool) []modelRange {
	rs := make([]modelRange, 0, len(h.ranges))
	for _, r := range h.ranges {
		m := modelRange(r)
		if !r.single && r.width == 0 && !zeroWidths {
			m.width = modelDigits(r.lo)
		}
		rs = append(rs, m)
	}
	return rs
}

func fromModel(rs []modelRange) string {
	var h Hostlist
	for _, m := range rs {
		if m.lo > m.hi {
			panic(modelUndefined{})
		}
		if m.single {
			h.ranges = append(h.ranges, singleHost(m.prefix))
		} else {
			h.ranges = append(h.ranges, newRange(m.prefix, m.lo, m.hi, m.width))
		}
	}
	return h.String()
}

// modelResult runs f and reports false when the model hits undefined
// behaviour of libhostlist.
func modelResult(f func() string) (s string, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			if _, undefined := r.(modelUndefined); !undefined {
				panic(r)
			}
			ok = false
		}
	}()
	return f(), true
}

// checkAgainstModel compares Sort and Uniq of h with the model.
func checkAgainstModel(t *testing.T, h *Hostlist) {
	t.Helper()
	for _, zero := range []bool{false, true} {
		want, ok := modelResult(func() string { return fromModel(modelSort(toModel(h, zero))) })
		if ok {
			got := h.Clone()
			got.Sort()
			require.Equal(t, want, got.String(), "Sort(%s)", h)
		}
		want, ok = modelResult(func() string { return fromModel(modelUniq(toModel(h, zero))) })
		if ok {
			got := h.Clone()
			got.Uniq()
			require.Equal(t, want, got.String(), "Uniq(%s)", h)
		}
	}
}

func TestSortUniqMatchesModel(t *testing.T) {
	inputs := []string{
		"foo,f,bar,baz", "[5-6],[3-4],[1-2,0]", "[0-20],12,15", "0,1,2,3,4,5,1,5",
		"[0-20],45,12,15", "[0-20],45,12,015", "bar1,bar2,foo1,foo,foo", "foo[5-6],foo3,foo4",
		"foo[5-6],foo[4-7]", "foo[0-3],foo[0-3]", "foo[0-2],foo[0-2],foo[0-2]",
		"host2,host1,host3,host1", "foo[1-7,1-7,1-7]", "[0-10],[2-9],[5-6]",
		"n10,n9,n08", "n10,n07,n7", "n002,n01,n3", "[5-15],07", "[0-20],07,12",
		"n[1-2]x3,n1x4", "n[08-12],n[09-10],n11", "[098-102],[099-100],100,0100",
		"[1-3,2-4,3-5],[0-9]", "n[0-5],n[05-07],n6",
	}
	for _, in := range inputs {
		t.Run(in, func(t *testing.T) {
			h, err := Parse(in)
			require.NoError(t, err)
			checkAgainstModel(t, h)
		})
	}
}

func TestModelSeesUndefinedInputs(t *testing.T) {
	// libhostlist would fail an assertion sorting this: after the first pair
	// is split, the piece 12-13 sits in front of 07, out of order.
	h, err := Parse("[5-13],[9-12],07")
	require.NoError(t, err)
	_, ok := modelResult(func() string { return fromModel(modelSort(toModel(h, false))) })
	require.False(t, ok)
	// Sort still gives the hosts in libhostlist's range order.
	h.Sort()
	require.Equal(t, "[5-9,9-10,10-11,11-12,12-13,07]", h.String())
}

func FuzzSortUniq(f *testing.F) {
	for _, s := range []string{
		"", "foo[0-3],foo[0-3]", "[0-20],45,12,015", "n10,n9,n08", "[5-15],07",
		"[0-10],[2-9],[5-6]", "a,b,a,n[1-3]x", "n[08-12],n[09-10],n11", "[0-9],[00-09],[000-009]",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := parse(s, 300)
		if err != nil {
			return
		}
		before := h.Hosts()
		checkAgainstModel(t, h)

		sorted := h.Clone()
		sorted.Sort()
		require.Equal(t, len(before), sorted.Count())
		require.ElementsMatch(t, before, sorted.Hosts())

		uniq := h.Clone()
		uniq.Uniq()
		got := uniq.Hosts()
		require.Len(t, got, uniq.Count())
		seen := make(map[string]bool, len(before))
		for _, host := range before {
			seen[host] = true
		}
		missing := len(seen)
		found := make(map[string]bool)
		for _, host := range got {
			require.True(t, seen[host], "Uniq invented %q", host)
			if !found[host] {
				found[host] = true
				missing--
			}
		}
		require.Zero(t, missing, "Uniq lost hosts")
	})
}
