package hostlist

import (
	"iter"
	"strings"
)

// Hostlist is an ordered list of host names, duplicates allowed, stored as
// ranges the way libhostlist stores it. The zero value is an empty list ready
// to use. A Hostlist is not safe for concurrent use while it is modified.
type Hostlist struct {
	ranges []hostRange
	n      int
}

// Expand returns the hosts of the hostlist s in order, duplicates included.
// An empty s gives an empty list. A malformed s gives a *SyntaxError.
func Expand(s string) ([]string, error) {
	hl, err := Parse(s)
	if err != nil {
		return nil, err
	}
	return hl.Hosts(), nil
}

// Compress returns the hostlist Flux writes for hosts, in their order. The
// names are read as [Hostlist.AppendHosts] reads them; the result equals
// New(hosts...).String(), written without building the list.
func Compress(hosts []string) string {
	// The first pass measures the result, the second writes it into a
	// buffer of exactly that size.
	measure := encoder{measure: true}
	compress(&measure, hosts)
	var e encoder
	e.sb.Grow(measure.size)
	compress(&e, hosts)
	return e.sb.String()
}

func compress(e *encoder, hosts []string) {
	var cur hostRange
	have := false
	for _, name := range hosts {
		if name == "" {
			continue
		}
		r := rangeForHost(name)
		if have && canExtend(&cur, &r) {
			cur.hi = r.hi
			continue
		}
		if have {
			e.write(&cur, &r)
		}
		cur, have = r, true
	}
	if have {
		e.write(&cur, nil)
	}
}

// Parse parses the hostlist s. A malformed s gives a *SyntaxError.
func Parse(s string) (*Hostlist, error) {
	return parse(s, -1)
}

// New returns the list of the given host names, in order (see
// [Hostlist.AppendHosts]).
func New(hosts ...string) *Hostlist {
	hl := &Hostlist{}
	hl.AppendHosts(hosts...)
	return hl
}

// Clone returns a copy of h that shares nothing with it.
func (h *Hostlist) Clone() *Hostlist {
	if h == nil {
		return &Hostlist{}
	}
	return &Hostlist{ranges: append([]hostRange(nil), h.ranges...), n: h.n}
}

// Count returns the number of hosts in h, duplicates included.
func (h *Hostlist) Count() int {
	if h == nil {
		return 0
	}
	return h.n
}

// Nth returns the host at index i (counting from 0); ok is false when i is
// out of range.
func (h *Hostlist) Nth(i int) (host string, ok bool) {
	if h == nil || i < 0 || i >= h.n {
		return "", false
	}
	for k := range h.ranges {
		r := &h.ranges[k]
		if c := r.count(); i >= c {
			i -= c
			continue
		}
		return r.host(i), true
	}
	return "", false
}

// Find returns the index of the first occurrence of host in h, or -1.
func (h *Hostlist) Find(host string) int {
	if h == nil {
		return -1
	}
	base := 0
	for k := range h.ranges {
		r := &h.ranges[k]
		if off, ok := r.offsetOf(host); ok {
			return base + off
		}
		base += r.count()
	}
	return -1
}

// Append parses the hostlist s and appends its hosts to h. When s is
// malformed it returns a *SyntaxError and leaves h unchanged.
func (h *Hostlist) Append(s string) error {
	other, err := Parse(s)
	if err != nil {
		return err
	}
	h.AppendList(other)
	return nil
}

// AppendHosts appends host names to h. Each name is taken as written, not
// parsed as a hostlist, and split into a prefix and a trailing number the way
// libhostlist splits a name. Empty names are skipped, as Flux skips them.
// Names are not checked: one holding a separator (comma, space, tab) or a
// bracket, or a trailing number beyond 64 bits, is kept as an opaque name,
// and the String of such a list does not parse back to the same hosts.
func (h *Hostlist) AppendHosts(hosts ...string) {
	for _, name := range hosts {
		if name != "" {
			h.appendRange(rangeForHost(name))
		}
	}
}

// AppendList appends the hosts of other to h.
func (h *Hostlist) AppendList(other *Hostlist) {
	if other == nil {
		return
	}
	if h == other {
		other = other.Clone()
	}
	for _, r := range other.ranges {
		h.appendRange(r)
	}
}

// appendRange appends r, extending the last range when r continues it.
func (h *Hostlist) appendRange(r hostRange) {
	h.n += r.count()
	if k := len(h.ranges); k > 0 {
		if tail := &h.ranges[k-1]; canExtend(tail, &r) {
			tail.hi = r.hi
			return
		}
	}
	h.ranges = append(h.ranges, r)
}

// Hosts returns every host of h in order. The names are cut from one shared
// buffer, so holding on to any of them keeps the text of the whole list in
// memory; copy a name (strings.Clone) to keep it alone.
func (h *Hostlist) Hosts() []string {
	if h == nil {
		return []string{}
	}
	// Write all generated names into one buffer and hand out substrings of
	// it: two allocations for the whole list instead of one per host.
	size := 0
	for k := range h.ranges {
		if r := &h.ranges[k]; !r.single {
			size += r.bytesLen()
		}
	}
	var sb strings.Builder
	sb.Grow(size)
	buf := make([]byte, 0, 64)
	for k := range h.ranges {
		r := &h.ranges[k]
		if r.single {
			continue
		}
		for v := r.lo; ; v++ {
			buf = r.appendHost(buf[:0], v)
			sb.Write(buf)
			if v == r.hi {
				break
			}
		}
	}
	all := sb.String()
	hosts := make([]string, 0, h.n)
	off := 0
	for k := range h.ranges {
		r := &h.ranges[k]
		if r.single {
			hosts = append(hosts, r.prefix)
			continue
		}
		for v := r.lo; ; v++ {
			n := r.hostLen(v)
			hosts = append(hosts, all[off:off+n])
			off += n
			if v == r.hi {
				break
			}
		}
	}
	return hosts
}

// All returns an iterator over the hosts of h in order. It builds each name
// as it is reached, so ranging over a huge list takes little memory.
func (h *Hostlist) All() iter.Seq[string] {
	return func(yield func(string) bool) {
		if h == nil {
			return
		}
		for k := range h.ranges {
			r := &h.ranges[k]
			for i := range r.count() {
				if !yield(r.host(i)) {
					return
				}
			}
		}
	}
}

// String returns the hostlist encoding of h, as libhostlist's
// hostlist_encode writes it: ranges in their order, each run of neighbouring
// numbered ranges with the same prefix in one pair of brackets.
func (h *Hostlist) String() string {
	if h == nil {
		return ""
	}
	measure := encoder{measure: true}
	h.encode(&measure)
	var e encoder
	e.sb.Grow(measure.size)
	h.encode(&e)
	return e.sb.String()
}

func (h *Hostlist) encode(e *encoder) {
	for k := range h.ranges {
		var next *hostRange
		if k+1 < len(h.ranges) {
			next = &h.ranges[k+1]
		}
		e.write(&h.ranges[k], next)
	}
}

// encoder writes ranges one after the other in libhostlist's encoding, or,
// when measure is set, only adds up the length of the result in size.
type encoder struct {
	measure bool
	size    int
	sb      strings.Builder
	num     []byte
	started bool
	open    bool // inside brackets
}

// write appends r. next is the range that will follow r, or nil: only its
// prefix and kind are looked at, and they decide whether r shares brackets
// with it. A group is bracketed when it holds more than one range or more
// than one host.
func (e *encoder) write(r, next *hostRange) {
	joined := next != nil && sameGroup(r, next)
	if e.open {
		e.writeByte(',')
	} else {
		if e.started {
			e.writeByte(',')
		}
		e.writeString(r.prefix)
		if joined || r.count() > 1 {
			e.writeByte('[')
			e.open = true
		}
	}
	if !r.single {
		e.writeNumber(r.lo, r.width)
		if r.lo < r.hi {
			e.writeByte('-')
			e.writeNumber(r.hi, r.width)
		}
	}
	if e.open && !joined {
		e.writeByte(']')
		e.open = false
	}
	e.started = true
}

func (e *encoder) writeByte(c byte) {
	if e.measure {
		e.size++
		return
	}
	e.sb.WriteByte(c)
}

func (e *encoder) writeString(s string) {
	if e.measure {
		e.size += len(s)
		return
	}
	e.sb.WriteString(s)
}

func (e *encoder) writeNumber(v uint64, width int) {
	if e.measure {
		e.size += max(width, numDigits(v))
		return
	}
	e.num = appendNumber(e.num[:0], v, width)
	e.sb.Write(e.num)
}
