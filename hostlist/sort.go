package hostlist

import (
	"cmp"
	"container/heap"
	"math"
	"slices"
)

// Sort sorts h as libhostlist's hostlist_sort does, keeping duplicates.
//
// Entries are ordered by prefix, single hosts first, then numbered ranges by
// their first number within a padding class (see cmpRange). Overlapping
// neighbours of compatible padding are then interleaved into ascending
// order, so foo[0-3],foo[0-3] becomes foo[0,0-1,1-2,2-3,3]: the hosts in
// order, written as libhostlist writes them. Ranges are compared by their
// first number only, as in libhostlist, so a range that spans several digit
// counts sorts by its start: [5-15],07 stays [5-15,07].
func (h *Hostlist) Sort() {
	if h == nil || len(h.ranges) <= 1 {
		return
	}
	rs := h.ranges
	slices.SortStableFunc(rs, cmpRange)
	out := Hostlist{ranges: make([]hostRange, 0, len(rs))}
	for i := 0; i < len(rs); {
		if rs[i].single {
			out.appendRange(rs[i])
			i++
			continue
		}
		// A block is a run of neighbours that libhostlist may interleave:
		// same prefix and compatible padding. Within it the ranges are in
		// ascending order of their first number.
		j := i + 1
		for j < len(rs) && sameGroup(&rs[j-1], &rs[j]) && compatible(&rs[j-1], &rs[j]) {
			j++
		}
		out.appendSorted(rs[i:j])
		i = j
	}
	*h = out
}

// appendSorted appends the hosts of block, a run of ranges with one prefix
// and compatible padding sorted by first number, in ascending order, merging
// each host into the range before it when it continues it.
func (h *Hostlist) appendSorted(block []hostRange) {
	if len(block) == 1 {
		h.appendRange(block[0])
		return
	}
	// cmpRange already orders a block by first number (its padding classes
	// follow each other in numeric order); sorting again costs little and
	// keeps the sweep below correct on its own terms.
	slices.SortStableFunc(block, func(a, b hostRange) int { return cmp.Compare(a.lo, b.lo) })
	prefix := block[0].prefix
	width := 0
	for k := range block {
		width = max(width, block[k].width)
	}
	// Sweep the numbers from low to high, keeping the ends of the ranges
	// that cover the current number in a heap: between two ends or starts
	// every number occurs the same number of times.
	var active endHeap
	next := 0
	var x uint64
	for next < len(block) || len(active) > 0 {
		if len(active) == 0 {
			x = block[next].lo
		}
		for next < len(block) && block[next].lo <= x {
			heap.Push(&active, block[next].hi)
			next++
		}
		end := active[0]
		if next < len(block) && block[next].lo-1 < end {
			end = block[next].lo - 1
		}
		if copies := len(active); copies == 1 {
			h.appendRange(newRange(prefix, x, end, width))
		} else {
			for v := x; ; v++ {
				for range copies {
					h.appendRange(newRange(prefix, v, v, width))
				}
				if v == end {
					break
				}
			}
		}
		for len(active) > 0 && active[0] == end {
			heap.Pop(&active)
		}
		if end == math.MaxUint64 {
			return
		}
		x = end + 1
	}
}

// Uniq sorts h and removes duplicate hosts, as libhostlist's hostlist_uniq
// does: after sorting, each entry is merged into the one before it when they
// overlap or touch and their padding is compatible. Like libhostlist it only
// looks at neighbours, so a duplicate separated by a range of another padding
// class survives: [0-20],07,12 gives [0-20,07,12].
func (h *Hostlist) Uniq() {
	if h == nil || len(h.ranges) <= 1 {
		return
	}
	slices.SortStableFunc(h.ranges, cmpRange)
	out := h.ranges[:1]
	for _, r := range h.ranges[1:] {
		last := &out[len(out)-1]
		if last.single && r.single && last.prefix == r.prefix {
			continue
		}
		// Sorted and compatible, so r.lo >= last.lo.
		if sameGroup(last, &r) && compatible(last, &r) &&
			(r.lo <= last.hi || r.lo-1 == last.hi) {
			last.hi = max(last.hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	clear(h.ranges[len(out):])
	h.ranges = out
	h.n = 0
	for k := range out {
		h.n += out[k].count()
	}
}

// endHeap is a min-heap of range ends.
type endHeap []uint64

func (e endHeap) Len() int           { return len(e) }
func (e endHeap) Less(i, j int) bool { return e[i] < e[j] }
func (e endHeap) Swap(i, j int)      { e[i], e[j] = e[j], e[i] }
func (e *endHeap) Push(x any)        { *e = append(*e, x.(uint64)) }
func (e *endHeap) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}
