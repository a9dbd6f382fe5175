package hostlist

import (
	"cmp"
	"math"
	"strconv"
	"strings"
)

// hostRange is one entry of a Hostlist: the numbered hosts prefix+lo through
// prefix+hi, or, when single is set, one host whose whole name is prefix.
//
// A single host is what libhostlist calls a host without a valid numeric
// suffix. Besides names that do not end in a digit, every host produced by
// an expression with a suffix (node[1-2]-ib) is single: libhostlist never
// re-splits those, and that choice shows in how they group, sort and merge.
type hostRange struct {
	prefix string
	lo, hi uint64
	// width is the width the numbers are zero-padded to, kept only while lo
	// itself needs padding (width > digits(lo)); otherwise it is 0. Two
	// widths that render lo the same way are interchangeable, so this is
	// the one form of each class, and libhostlist's width rules reduce to
	// compatible below.
	width  int
	single bool
}

// newRange returns the numbered range prefix[lo-hi] whose numbers are written
// with at least width digits.
func newRange(prefix string, lo, hi uint64, width int) hostRange {
	if width <= numDigits(lo) {
		width = 0
	}
	return hostRange{prefix: prefix, lo: lo, hi: hi, width: width}
}

func singleHost(name string) hostRange {
	return hostRange{prefix: name, single: true}
}

// splitHost splits a host name the way libhostlist does: the prefix is
// everything up to the trailing run of digits, which is the number. ok is
// false when there are no trailing digits or their value does not fit in 64
// bits. digits is the position where the number starts.
func splitHost(name string) (digits int, num uint64, ok bool) {
	digits = len(name)
	for digits > 0 && isDigit(name[digits-1]) {
		digits--
	}
	if digits == len(name) {
		return digits, 0, false
	}
	num, ok = parseDigits(name[digits:])
	return digits, num, ok
}

// rangeForHost returns the entry libhostlist makes for a lone host name.
func rangeForHost(name string) hostRange {
	i, num, ok := splitHost(name)
	if !ok {
		return singleHost(name)
	}
	return newRange(name[:i], num, num, len(name)-i)
}

func (r *hostRange) count() int {
	if r.single {
		return 1
	}
	return int(r.hi - r.lo + 1)
}

// padded reports whether the numbers of r carry leading zeros.
func (r *hostRange) padded() bool {
	return r.width > 0
}

// compatible reports whether a and b may be joined into one range: there is
// a width under which both render their numbers as they are. Unpadded
// numbers render the same under any width up to their digit count; a padded
// one only under its own width.
func compatible(a, b *hostRange) bool {
	switch {
	case a.padded() && b.padded():
		return a.width == b.width
	case a.padded():
		return a.width <= numDigits(b.lo)
	case b.padded():
		return b.width <= numDigits(a.lo)
	default:
		return true
	}
}

// sameGroup reports whether a and b, written next to each other, share one
// pair of brackets.
func sameGroup(a, b *hostRange) bool {
	return !a.single && !b.single && a.prefix == b.prefix
}

// canExtend reports whether r continues tail, that is, appending r to a list
// that ends in tail only raises tail.hi.
func canExtend(tail, r *hostRange) bool {
	return sameGroup(tail, r) &&
		tail.hi != math.MaxUint64 && tail.hi+1 == r.lo &&
		compatible(tail, r)
}

// cmpRange orders entries as libhostlist's sort does: by prefix (bytewise),
// single hosts before numbered ones, then numbered ones by their first host.
// Numbers of one padding class compare by value; otherwise the class with the
// smaller width (the digit count, for unpadded numbers) comes first, padded
// before unpadded at the same width.
func cmpRange(a, b hostRange) int {
	if c := strings.Compare(a.prefix, b.prefix); c != 0 {
		return c
	}
	if a.single != b.single {
		if a.single {
			return -1
		}
		return 1
	}
	if a.single {
		return 0
	}
	if c := cmp.Compare(a.classWidth(), b.classWidth()); c != 0 {
		return c
	}
	if a.padded() != b.padded() {
		if a.padded() {
			return -1
		}
		return 1
	}
	return cmp.Compare(a.lo, b.lo)
}

func (r *hostRange) classWidth() int {
	if r.padded() {
		return r.width
	}
	return numDigits(r.lo)
}

// hostLen is the length of the host with number v in r.
func (r *hostRange) hostLen(v uint64) int {
	if r.single {
		return len(r.prefix)
	}
	return len(r.prefix) + max(r.width, numDigits(v))
}

// appendHost appends the name of the host with number v to buf.
func (r *hostRange) appendHost(buf []byte, v uint64) []byte {
	buf = append(buf, r.prefix...)
	if r.single {
		return buf
	}
	return appendNumber(buf, v, r.width)
}

// host returns the i-th host of r.
func (r *hostRange) host(i int) string {
	if r.single {
		return r.prefix
	}
	v := r.lo + uint64(i)
	return string(r.appendHost(make([]byte, 0, r.hostLen(v)), v))
}

// offsetOf returns the position of name within r.
func (r *hostRange) offsetOf(name string) (int, bool) {
	if r.single {
		return 0, name == r.prefix
	}
	digits, ok := strings.CutPrefix(name, r.prefix)
	if !ok || digits == "" {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if !isDigit(digits[i]) {
			return 0, false
		}
	}
	v, ok := parseDigits(digits)
	if !ok || v < r.lo || v > r.hi || len(digits) != max(r.width, numDigits(v)) {
		return 0, false
	}
	return int(v - r.lo), true
}

// bytesLen is the total length of all host names in r.
func (r *hostRange) bytesLen() int {
	if r.single {
		return len(r.prefix)
	}
	n := r.count() * len(r.prefix)
	// Sum the number widths one decimal order of magnitude at a time.
	lo := r.lo
	for d := numDigits(lo); ; d++ {
		top := uint64(math.MaxUint64)
		if d < 20 {
			top = pow10(d) - 1
		}
		hi := min(r.hi, top)
		n += int(hi-lo+1) * max(r.width, d)
		if hi == r.hi {
			return n
		}
		lo = hi + 1
	}
}

// pow10 returns 10 to the n, for n < 20.
func pow10(n int) uint64 {
	p := uint64(1)
	for range n {
		p *= 10
	}
	return p
}

// numDigits returns the number of decimal digits of v (1 for 0).
func numDigits(v uint64) int {
	n, p := 1, uint64(10)
	for n < 20 && v >= p {
		n++
		p *= 10
	}
	return n
}

// appendNumber appends v in decimal, zero-padded to width.
func appendNumber(buf []byte, v uint64, width int) []byte {
	for i := numDigits(v); i < width; i++ {
		buf = append(buf, '0')
	}
	return strconv.AppendUint(buf, v, 10)
}

// parseDigits parses a non-empty run of decimal digits; ok is false when the
// value does not fit in 64 bits.
func parseDigits(s string) (uint64, bool) {
	var v uint64
	for i := 0; i < len(s); i++ {
		d := uint64(s[i] - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

func isDigit(c byte) bool {
	return '0' <= c && c <= '9'
}
