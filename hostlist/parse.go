package hostlist

import (
	"fmt"
	"strings"
)

// Limits of libhostlist's parser; a list beyond them is an error in Flux too.
const (
	// maxRangeHosts is the most hosts one lo-hi range may hold.
	maxRangeHosts = 1 << 20
	// maxBracketRanges is the most ranges one pair of brackets may hold.
	maxBracketRanges = 10240
	// maxHostLen is the longest host name accepted. libhostlist truncates
	// longer names in some paths (at 270 bytes when it prints a host, at
	// 1023 when it reads one), so they are refused rather than misread.
	maxHostLen = 255
)

// idRange is one element of a bracketed id list.
type idRange struct {
	lo, hi uint64
	width  int
	pos    int
}

// parser turns a hostlist string into a Hostlist.
type parser struct {
	input string
	// maxHosts bounds the size of the result; negative means no bound.
	maxHosts int
	hl       Hostlist
	ids      []idRange
}

// parse parses s, failing once the list would hold more than maxHosts hosts
// (no bound when maxHosts is negative).
func parse(s string, maxHosts int) (*Hostlist, error) {
	p := &parser{input: s, maxHosts: maxHosts}
	for i := 0; i < len(s); {
		if isSeparator(s[i]) {
			i++
			continue
		}
		next, err := p.expression(i)
		if err != nil {
			return nil, err
		}
		i = next
	}
	return &p.hl, nil
}

func (p *parser) errorf(pos int, format string, args ...any) error {
	return &SyntaxError{Input: p.input, Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// expression parses the expression that starts at start and returns the
// position just after it.
func (p *parser) expression(start int) (int, error) {
	s := p.input
	open, err := p.scanName(start)
	if err != nil {
		return 0, err
	}
	if open == len(s) || s[open] != '[' {
		return open, p.addHost(start, s[start:open])
	}
	closing := strings.IndexByte(s[open+1:], ']')
	if closing < 0 {
		return 0, p.errorf(open, "missing ']' for '['")
	}
	closing += open + 1
	if err := p.idList(open, closing); err != nil {
		return 0, err
	}
	end, err := p.scanName(closing + 1)
	if err != nil {
		return 0, err
	}
	if end < len(s) && s[end] == '[' {
		return 0, p.errorf(end, "second '[' in one host name")
	}
	return end, p.addIDs(start, s[start:open], s[closing+1:end])
}

// scanName checks the name characters from i on and returns the position of
// the first byte that is a separator or bracket, or len(input).
func (p *parser) scanName(i int) (int, error) {
	s := p.input
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case isSeparator(c), c == '[':
			return i, nil
		case c == ']':
			return 0, p.errorf(i, "unmatched ']'")
		case !isNameChar(c):
			return 0, p.errorf(i, "invalid character %q", c)
		}
	}
	return i, nil
}

// idList parses the id list between the brackets at open and closing into
// p.ids.
func (p *parser) idList(open, closing int) error {
	s := p.input
	p.ids = p.ids[:0]
	if open+1 == closing {
		return p.errorf(open+1, "empty brackets")
	}
	for i := open + 1; ; {
		start := i
		lo, width, next, err := p.number(i)
		if err != nil {
			return err
		}
		hi := lo
		if s[next] == '-' {
			if hi, _, next, err = p.number(next + 1); err != nil {
				return err
			}
		}
		if lo > hi {
			return p.errorf(start, "invalid range %q", s[start:next])
		}
		if hi-lo >= maxRangeHosts {
			return p.errorf(start, "range %q has more than %d hosts", s[start:next], maxRangeHosts)
		}
		if len(p.ids) == maxBracketRanges {
			return p.errorf(start, "more than %d ranges in brackets", maxBracketRanges)
		}
		p.ids = append(p.ids, idRange{lo: lo, hi: hi, width: width, pos: start})
		switch {
		case next == closing:
			return nil
		case s[next] == ',':
			i = next + 1
		default:
			return p.errorf(next, "unexpected %q in brackets", s[next])
		}
	}
}

// number parses the digits at i. The input holds a ']' after i, so the scan
// stops inside the string.
func (p *parser) number(i int) (v uint64, width, next int, err error) {
	s := p.input
	next = i
	for isDigit(s[next]) {
		next++
	}
	if next == i {
		return 0, 0, 0, p.errorf(i, "expected a number, found %q", s[i])
	}
	v, ok := parseDigits(s[i:next])
	if !ok {
		return 0, 0, 0, p.errorf(i, "number %s does not fit in 64 bits", s[i:next])
	}
	return v, next - i, next, nil
}

// addHost appends a host name written without brackets.
func (p *parser) addHost(pos int, name string) error {
	if len(name) > maxHostLen {
		return p.errorf(pos, "host name longer than %d bytes", maxHostLen)
	}
	i, num, ok := splitHost(name)
	if !ok {
		if i < len(name) {
			return p.errorf(pos+i, "number %s does not fit in 64 bits", name[i:])
		}
		return p.add(pos, singleHost(name))
	}
	return p.add(pos, newRange(name[:i], num, num, len(name)-i))
}

// addIDs appends the hosts of prefix[ids]suffix.
func (p *parser) addIDs(pos int, prefix, suffix string) error {
	for _, id := range p.ids {
		probe := hostRange{prefix: prefix, width: id.width}
		if probe.hostLen(id.hi)+len(suffix) > maxHostLen {
			return p.errorf(pos, "host name longer than %d bytes", maxHostLen)
		}
		// Digits next to the brackets join the number of the name. Refuse
		// names whose trailing number could not be read back on its own;
		// the largest such number is that of the last host.
		if (suffix == "" && endsInDigit(prefix)) || endsInDigit(suffix) {
			last := string(append(probe.appendHost(nil, id.hi), suffix...))
			if i, _, ok := splitHost(last); !ok {
				return p.errorf(pos, "host name %s ends in number %s, which does not fit in 64 bits", last, last[i:])
			}
		}
		if suffix == "" {
			if err := p.add(id.pos, newRange(prefix, id.lo, id.hi, id.width)); err != nil {
				return err
			}
			continue
		}
		// libhostlist writes the names of an expression with a suffix into
		// a buffer sized for the first id of the list, so it cuts the end
		// off the names of an id written 20 or more digits wider than the
		// first: n[1,000000000000000000001]x reads as
		// n1x,n000000000000000000001.
		if id.width >= p.ids[0].width+20 {
			return p.errorf(id.pos, "id %s is written 20 or more digits wider than the first id of the list, and libhostlist cuts its names short before a suffix", p.input[id.pos:id.pos+id.width])
		}
		// libhostlist keeps each host with a suffix as an opaque name.
		if err := p.checkSize(id.pos, int(id.hi-id.lo+1)); err != nil {
			return err
		}
		var buf []byte
		for v := id.lo; ; v++ {
			buf = probe.appendHost(buf[:0], v)
			buf = append(buf, suffix...)
			p.hl.appendRange(singleHost(string(buf)))
			if v == id.hi {
				break
			}
		}
	}
	return nil
}

func (p *parser) add(pos int, r hostRange) error {
	if err := p.checkSize(pos, r.count()); err != nil {
		return err
	}
	p.hl.appendRange(r)
	return nil
}

func (p *parser) checkSize(pos, n int) error {
	if p.maxHosts >= 0 && p.hl.n+n > p.maxHosts {
		return p.errorf(pos, "more than %d hosts", p.maxHosts)
	}
	return nil
}

func endsInDigit(s string) bool {
	return s != "" && isDigit(s[len(s)-1])
}

// isSeparator reports whether c separates expressions. libhostlist splits on
// these three only; other white space would become part of a name.
func isSeparator(c byte) bool {
	return c == ',' || c == ' ' || c == '\t'
}

// isNameChar reports whether c may appear in a host name: RFC 29 allows
// printable ASCII other than white space, brackets and the comma.
func isNameChar(c byte) bool {
	return c > ' ' && c < 0x7f && c != ',' && c != '[' && c != ']'
}
