package hostlist

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// Rows marked "flux-core" come from flux-core's own tests:
// src/common/libhostlist/test/{hostlist,hostrange,hostname}.c,
// t/t0035-hostlist-cmd.t (flux hostlist) and t/python/t0013-hostlist.py.
// Rows marked "rfc29" are the test vectors of RFC 29.

func TestExpand(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  []string
	}{
		{"rfc29 empty", "", []string{}},
		{"rfc29 plain names", "foox,fooy,fooz", []string{"foox", "fooy", "fooz"}},
		{"rfc29 no prefix", "[1-3,5-6]", []string{"1", "2", "3", "5", "6"}},
		{"rfc29 range", "foo[1-5]", []string{"foo1", "foo2", "foo3", "foo4", "foo5"}},
		{"rfc29 suffix", "foo[0-4]-eth2", []string{"foo0-eth2", "foo1-eth2", "foo2-eth2", "foo3-eth2", "foo4-eth2"}},
		{"rfc29 repeated hosts", "foo1,foo1,foo1", []string{"foo1", "foo1", "foo1"}},
		{"rfc29 padded range", "[00-02]", []string{"00", "01", "02"}},
		{"rfc29 padding from lower bound", "[00-2]", []string{"00", "01", "02"}},
		{"rfc29 repeated ids", "foo[1,1,2,1]", []string{"foo1", "foo1", "foo2", "foo1"}},
		{"flux-core suffix after list", "foo[1,3]-bar", []string{"foo1-bar", "foo3-bar"}},
		{"flux-core padded with suffix", "[00-03]p", []string{"00p", "01p", "02p", "03p"}},
		{"flux-core prefix and suffix", "p[00-3]p", []string{"p00p", "p01p", "p02p", "p03p"}},
		{"flux-core leading comma", ",1,2,3", []string{"1", "2", "3"}},
		{"flux-core trailing comma", "1,2,3,", []string{"1", "2", "3"}},
		{"flux-core flux hostlist -e", "foo[1-3]", []string{"foo1", "foo2", "foo3"}},
		{"single host", "login", []string{"login"}},
		{"single numbered host", "node7", []string{"node7"}},
		{"zero", "0", []string{"0"}},
		{"zero in brackets", "n[0]", []string{"n0"}},
		{"zero range", "n[0-0]", []string{"n0"}},
		{"spaces separate", "a b  c", []string{"a", "b", "c"}},
		{"tabs and commas mixed", " a ,\tb ,, c\t", []string{"a", "b", "c"}},
		{"only separators", " ,\t, ", []string{}},
		{"brackets then space", "n[1-2] n4", []string{"n1", "n2", "n4"}},
		{"each element keeps its own width", "n[005,4,11-13]", []string{"n005", "n4", "n11", "n12", "n13"}},
		{"upper bound width ignored", "n[01-010]", []string{"n01", "n02", "n03", "n04", "n05", "n06", "n07", "n08", "n09", "n10"}},
		{"range across digit counts", "n[9-11]", []string{"n9", "n10", "n11"}},
		{"padded range across digit counts", "n[098-101]", []string{"n098", "n099", "n100", "n101"}},
		{"dash and digits in prefix", "rack1-node[1-2]", []string{"rack1-node1", "rack1-node2"}},
		{"prefix ending in a digit", "n1[2-3]", []string{"n12", "n13"}},
		{"ipv4 addresses", "10.0.0.[1-3]", []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}},
		{"dotted names", "n[1-2].cluster.local", []string{"n1.cluster.local", "n2.cluster.local"}},
		{"digits inside a name", "foo01bar", []string{"foo01bar"}},
		{"largest numbers", "n[18446744073709551614-18446744073709551615]", []string{"n18446744073709551614", "n18446744073709551615"}},
		{"largest number without brackets", "n18446744073709551615", []string{"n18446744073709551615"}},
		{"digits around brackets", "n1[8-9]0", []string{"n180", "n190"}},
		{"suffix after an id 19 digits wider than the first", "n[1,00000000000000000001]x", []string{"n1x", "n00000000000000000001x"}},
		{"suffix after ids narrower than the first", "n[000000000000000000001,2]x", []string{"n000000000000000000001x", "n2x"}},
		{"wide id without a suffix", "n[1,000000000000000000001]", []string{"n1", "n000000000000000000001"}},
		{"largest number split by brackets", "n1844674407370955161[4-5]", []string{"n18446744073709551614", "n18446744073709551615"}},
		{"long zero padding", "n[0000000000000000000000001]", []string{"n0000000000000000000000001"}},
		{"many leading zeros without brackets", "n000000000000000000000000007", []string{"n000000000000000000000000007"}},
		{"punctuation allowed by rfc29", "a_b!c", []string{"a_b!c"}},
		{"mixed", "login,node[1-3,5],gpu[01-02]-ib,node7", []string{"login", "node1", "node2", "node3", "node5", "gpu01-ib", "gpu02-ib", "node7"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Expand(tt.input)
			require.NoError(t, err)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Expand(%q) mismatch (-want +got):\n%s", tt.input, diff)
			}
		})
	}
}

func TestExpandErrors(t *testing.T) {
	long := strings.Repeat("a", 256)
	tests := []struct {
		name  string
		input string
		pos   int
		msg   string
	}{
		{"flux-core empty brackets alone", "[]", 1, "empty brackets"},
		{"flux-core empty brackets", "foo[]", 4, "empty brackets"},
		{"flux-core open bracket at end", "foo[", 3, "missing ']'"},
		{"flux-core unclosed list", "foo[1,3", 3, "missing ']'"},
		{"flux-core nested bracket", "foo[[1,3]", 4, "expected a number"},
		{"flux-core lone closing bracket", "foo]", 3, "unmatched ']'"},
		{"flux-core letters", "foo[x-y]", 4, "expected a number"},
		{"flux-core negative bound", "foo[0-1,2--5]", 10, "expected a number"},
		{"flux-core flux hostlist rejects", "foo[1-", 3, "missing ']'"},
		{"flux-core range too large", "foo[0-1048576]", 4, "more than 1048576 hosts"},
		{"reversed range", "n[3-1]", 2, `invalid range "3-1"`},
		{"unclosed range", "n[1-", 1, "missing ']'"},
		{"letters in range", "n[a-b]", 2, "expected a number, found 'a'"},
		{"letter after dash", "n[1-b]", 4, "expected a number, found 'b'"},
		{"empty brackets short", "n[]", 2, "empty brackets"},
		{"missing upper bound", "n[1-]", 4, "expected a number"},
		{"negative number", "n[-1]", 2, "expected a number"},
		{"empty element at end", "n[1,]", 4, "expected a number"},
		{"empty element at start", "n[,1]", 2, "expected a number"},
		{"two dashes", "n[1-2-3]", 5, `unexpected '-'`},
		{"space in brackets", "n[1, 2]", 4, `expected a number, found ' '`},
		{"space before comma", "n[1 ,2]", 3, `unexpected ' '`},
		{"plus sign", "n[+1]", 2, "expected a number"},
		{"garbage after number", "n[1a-2]", 3, `unexpected 'a'`},
		{"second bracket group", "n[1]x[2]", 5, "second '['"},
		{"closing bracket after list", "n[1]]", 4, "unmatched ']'"},
		{"closing bracket before opening", "a]b[1]", 1, "unmatched ']'"},
		{"unclosed after good expression", "a,b,c[1", 5, "missing ']'"},
		{"number beyond 64 bits", "n18446744073709551616", 1, "does not fit in 64 bits"},
		{"number beyond 64 bits in brackets", "n[18446744073709551616]", 2, "does not fit in 64 bits"},
		{"upper bound beyond 64 bits", "n[1-99999999999999999999]", 4, "does not fit in 64 bits"},
		{"digits after brackets beyond 64 bits", "n[1]99999999999999999999", 0, "ends in number 199999999999999999999"},
		{"digits before brackets beyond 64 bits", "n9999999999999999999[0-9]", 0, "ends in number 99999999999999999999"},
		{"newline", "a\nb", 1, `invalid character '\n'`},
		{"carriage return", "a\r", 1, `invalid character '\r'`},
		{"non-ascii", "nodé", 3, "invalid character"},
		{"control character in suffix", "n[1]\x01", 4, "invalid character"},
		{"name too long", "x," + long, 2, "longer than 255 bytes"},
		{"generated name too long", long[:254] + "[1-10]", 0, "longer than 255 bytes"},
		{"too many ranges", "n[" + strings.Repeat("0,", maxBracketRanges) + "0]", 2 + 2*maxBracketRanges, "more than 10240 ranges"},
		{"closing bracket after list swallows the rest", "n[1]],a", 4, "unmatched ']'"},
		{"suffix after an id 20 digits wider than the first", "n[1,000000000000000000001]x", 4, "20 or more digits wider than the first id"},
		{"suffix after a wide id in a later range", "n[01-02,3,0000000000000000000000004-5]-ib", 10, "20 or more digits wider than the first id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Expand(tt.input)
			require.Error(t, err, "Expand(%q) = %q", tt.input, got)
			var se *SyntaxError
			require.ErrorAs(t, err, &se)
			require.Equal(t, tt.input, se.Input)
			require.Equal(t, tt.pos, se.Pos, "position in %q: %v", tt.input, err)
			require.Contains(t, se.Msg, tt.msg)
			require.Equal(t, fmt.Sprintf("hostlist: %s at position %d", se.Msg, se.Pos), err.Error())
		})
	}
}

func TestLimits(t *testing.T) {
	t.Run("flux-core largest range", func(t *testing.T) {
		hl, err := Parse("foo[0-1048575]")
		require.NoError(t, err)
		require.Equal(t, 1<<20, hl.Count())
	})
	t.Run("most ranges in brackets", func(t *testing.T) {
		hl, err := Parse("n[" + strings.Repeat("0,", maxBracketRanges-1) + "0]")
		require.NoError(t, err)
		require.Equal(t, maxBracketRanges, hl.Count())
	})
	t.Run("longest name", func(t *testing.T) {
		hl, err := Parse(strings.Repeat("a", 253) + "[1-99]")
		require.NoError(t, err)
		require.Equal(t, 99, hl.Count())
	})
	t.Run("host bound", func(t *testing.T) {
		_, err := parse("a[0-9],b[0-9]", 15)
		var se *SyntaxError
		require.ErrorAs(t, err, &se)
		require.Equal(t, 9, se.Pos)
		_, err = parse("a[0-9]x", 5)
		require.ErrorAs(t, err, &se)
		require.Equal(t, 2, se.Pos)
		hl, err := parse("a[0-9],b[0-9]", 20)
		require.NoError(t, err)
		require.Equal(t, 20, hl.Count())
	})
}

func TestCompress(t *testing.T) {
	tests := []struct {
		name  string
		hosts []string
		want  string
	}{
		{"empty", nil, ""},
		{"empty names are skipped", []string{"", "a", ""}, "a"},
		{"single host", []string{"node1"}, "node1"},
		{"brief example", []string{"node1", "node2", "node3", "node5", "node07", "node08", "node010", "a", "b", "c"}, "node[1-3,5,07-08,010],a,b,c"},
		{"flux-core order is kept", []string{"host1", "host0", "host5", "host4"}, "host[1,0,5,4]"},
		{"flux-core repeats are kept", []string{"host1", "host1", "host1"}, "host[1,1,1]"},
		{"flux-core stdin", []string{"foo1", "foo2", "foo3"}, "foo[1-3]"},
		{"flux-core names before numbers", []string{"fooi", "foo1", "foo2", "foo3", "foo5", "foo7", "foo8"}, "fooi,foo[1-3,5,7-8]"},
		{"flux-core name splits a run", []string{"foo1", "fooi", "foo2", "foo3"}, "foo1,fooi,foo[2-3]"},
		{"flux-core numbers only", []string{"1", "2", "3", "4", "5", "9"}, "[1-5,9]"},
		{"flux-core number only", []string{"14636"}, "14636"},
		{"flux-core dash digits in prefix", []string{"foo-1a-2", "foo-1a-3"}, "foo-1a-[2-3]"},
		{"flux-core python iterable", []string{"foo1", "foo2"}, "foo[1-2]"},
		{"flux-core python different prefixes", []string{"foo0", "bar1"}, "foo0,bar1"},
		{"duplicate pair", []string{"foo1", "foo1"}, "foo[1,1]"},
		{"one two three", []string{"1", "2", "3"}, "[1-3]"},
		{"zero", []string{"0"}, "0"},
		{"zero and padded zero", []string{"0", "00"}, "[0,00]"},
		{"padded numbers only", []string{"00", "01"}, "[00-01]"},
		{"names without numbers never merge", []string{"x", "x"}, "x,x"},
		{"only adjacent runs merge", []string{"n1", "n2", "m1", "n3"}, "n[1-2],m1,n3"},
		{"descending does not merge", []string{"n3", "n2", "n1"}, "n[3,2,1]"},
		{"unpadded crosses a digit", []string{"node9", "node10", "node11"}, "node[9-11]"},
		{"padded crosses a digit", []string{"node08", "node09", "node10"}, "node[08-10]"},
		{"padded crosses a digit at 100", []string{"node098", "node099", "node100"}, "node[098-100]"},
		{"unpadded to padded is a new range", []string{"node9", "node010"}, "node[9,010]"},
		{"width matters", []string{"node7", "node08"}, "node[7,08]"},
		{"padded run then shorter number", []string{"n007", "n008", "n009", "n10"}, "n[007-009,10]"},
		{"padded run then long enough number", []string{"n07", "n08", "n09", "n10"}, "n[07-10]"},
		{"padded then unpadded same value", []string{"node07", "node7"}, "node[07,7]"},
		{"widths differ", []string{"n01", "n002"}, "n[01,002]"},
		{"suffix names stay whole", []string{"foo1-bar", "foo2-bar"}, "foo1-bar,foo2-bar"},
		{"number after dash", []string{"rack1-node1", "rack1-node2", "rack2-node1"}, "rack1-node[1-2],rack2-node1"},
		{"ipv4", []string{"10.0.0.1", "10.0.0.2", "10.0.0.4"}, "10.0.0.[1-2,4]"},
		{"name equal to a prefix", []string{"n", "n1", "n2"}, "n,n[1-2]"},
		{"largest numbers", []string{"n18446744073709551614", "n18446744073709551615"}, "n[18446744073709551614-18446744073709551615]"},
		{"no wrap after the largest number", []string{"n18446744073709551615", "n0"}, "n[18446744073709551615,0]"},
		{"number beyond 64 bits is opaque", []string{"n18446744073709551616", "n1"}, "n18446744073709551616,n1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compress(tt.hosts)
			require.Equal(t, tt.want, got)
			require.Equal(t, got, New(tt.hosts...).String())
		})
	}
}

func TestParseString(t *testing.T) {
	mcr := "mcr[336-359,488-550,553,556,559,561,567,569-571,573-575,578,581,584,587-589,592,594,597,600-602,605,608,610,618-622,627,634,636-670,687-696,699-733,735-742,744-760,762-773]"
	tests := []struct {
		name  string
		input string
		want  string
		count int
	}{
		{"flux-core dash digits", "foo-1a-2,foo-1a-3", "foo-1a-[2-3]", 2},
		{"flux-core name after run", "foo1,foo2,foo3,fooi", "foo[1-3],fooi", 4},
		{"flux-core name inside run", "foo1,fooi,foo2,foo3", "foo1,fooi,foo[2-3]", 4},
		{"flux-core name before run", "fooi,foo1,foo2,foo3", "fooi,foo[1-3]", 4},
		{"flux-core gaps", "fooi,foo1,foo2,foo3,foo5,foo7,foo8", "fooi,foo[1-3,5,7-8]", 7},
		{"flux-core numbers", "1,2,3,4,5,9", "[1-5,9]", 6},
		{"flux-core leading comma", ",1,2,3,4,5,9", "[1-5,9]", 6},
		{"flux-core both commas", ",1,2,3,4,5,9,", "[1-5,9]", 6},
		{"flux-core brackets only", "[1-5]", "[1-5]", 5},
		{"flux-core suffix", "foo[1,3]-bar", "foo1-bar,foo3-bar", 2},
		{"flux-core padded suffix", "[00-03]p", "00p,01p,02p,03p", 4},
		{"flux-core prefix suffix", "p[00-3]p", "p00p,p01p,p02p,p03p", 4},
		{"flux-core number", "14636", "14636", 1},
		{"flux-core long list", mcr, mcr, 237},
		{"flux-core python empty", "", "", 0},
		{"flux-core python one", "foo0", "foo0", 1},
		{"flux-core python two", "foo0,foo1", "foo[0-1]", 2},
		{"flux-core python prefixes", "foo0,bar1", "foo0,bar1", 2},
		{"flux-core python range", "foo[0-10]", "foo[0-10]", 11},
		{"flux-core flux hostlist -c", "foo[1-10]", "foo[1-10]", 10},
		{"touching ranges join", "n[1-2,3-4]", "n[1-4]", 4},
		{"ranges join across expressions", "n[1-2],n3", "n[1-3]", 3},
		{"padded range takes unpadded next", "n[08-09],n10", "n[08-10]", 3},
		{"prefix ending in a digit is kept", "n1[2-3]", "n1[2-3]", 2},
		{"different prefixes stay apart", "n1[2-3],n14", "n1[2-3],n14", 3},
		{"suffix hosts never join", "n[1-2]x3,n2x4", "n1x3,n2x3,n2x4", 3},
		{"per element widths", "n[005,4,11-13]", "n[005,4,11-13]", 5},
		{"upper bound width dropped", "n[01-010]", "n[01-10]", 10},
		{"plus zero", "n[0,00,000]", "n[0,00,000]", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hl, err := Parse(tt.input)
			require.NoError(t, err)
			require.Equal(t, tt.want, hl.String())
			require.Equal(t, tt.count, hl.Count())
			require.Len(t, hl.Hosts(), tt.count)
			require.Equal(t, tt.want, hl.Clone().String(), "flux-core: copy encodes the same")
		})
	}
}

func TestNth(t *testing.T) {
	tests := []struct {
		name  string
		input string
		index int
		want  string
		ok    bool
	}{
		{"flux-core empty list", "", 0, "", false},
		{"flux-core first", "foo[1-2,4,5],bar", 0, "foo1", true},
		{"flux-core last", "foo[1-2,4,5],bar", 4, "bar", true},
		{"flux-core middle", "foo[1-2,4,5],bar", 2, "foo4", true},
		{"flux-core past the end", "foo[1-2,4,5],bar", 5, "", false},
		{"flux-core negative", "foo[1-2,4,5],bar", -1, "", false},
		{"flux-core flux hostlist --nth", "foo[1-10]", 1, "foo2", true},
		{"flux-core python last", "foo[0-9]", 9, "foo9", true},
		{"flux-core hostrange last", "foo[1-10]", 9, "foo10", true},
		{"flux-core hostrange middle", "foo[1-10]", 4, "foo5", true},
		{"flux-core hostrange width", "foo[001-010]", 4, "foo005", true},
		{"padded across digit count", "n[08-10]", 2, "n10", true},
		{"padded number only", "[00-02]", 1, "01", true},
		{"suffix host", "n[1-3]-ib", 2, "n3-ib", true},
		{"duplicates", "n[1,1,2]", 1, "n1", true},
		{"largest number", "n[18446744073709551614-18446744073709551615]", 1, "n18446744073709551615", true},
		{"deep in a large range", "node[0-999999]", 765432, "node765432", true},
		{"after a large range", "node[0-999999],login", 1000000, "login", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hl, err := Parse(tt.input)
			require.NoError(t, err)
			got, ok := hl.Nth(tt.index)
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestFind(t *testing.T) {
	tests := []struct {
		name  string
		input string
		host  string
		want  int
	}{
		{"flux-core number vs name", "tst0", "tst", -1},
		{"flux-core name after number", "tst0,tst", "tst", 1},
		{"flux-core name before number", "tst,tst0", "tst", 0},
		{"flux-core number not in name", "tst", "tst0", -1},
		{"flux-core suffix", "foo[1-5]-eth0", "foo3-eth0", 2},
		{"flux-core suffix not in range", "foo[1-5]", "foo3-eth0", -1},
		{"flux-core numbers only", "[0-5]", "3", 3},
		{"flux-core number vs suffix", "[0-5]i", "0", -1},
		{"flux-core padding must match", "i[0-5]", "i00", -1},
		{"flux-core padded first", "i[00-05]", "i00", 0},
		{"flux-core padded", "i[00-05]", "i04", 4},
		{"flux-core digits in prefix", "f00[7-8]", "f007", 0},
		{"flux-core digits in prefix list", "f00[7-8,10]", "f0010", 2},
		{"flux-core long digit prefix", "f0010001[07-08]", "f001000108", 1},
		{"flux-core longer name", "cornp2", "corn", -1},
		{"flux-core other letter", "cornp2", "corn2", -1},
		{"flux-core dash", "corn-p2", "corn2", -1},
		{"flux-core digit dash", "corn1-p2", "corn2", -1},
		{"flux-core within first", "foo[0-10]", "foo0", 0},
		{"flux-core within middle", "foo[0-10]", "foo5", 5},
		{"flux-core within last", "foo[0-10]", "foo10", 10},
		{"flux-core within padded", "foo[0-10]", "foo01", -1},
		{"flux-core within digit prefix", "foo0[0-5]", "foo03", 3},
		{"flux-core within past end", "foo[0-10]", "foo11", -1},
		{"flux-core within other prefix", "foo[0-10]", "bar5", -1},
		{"flux-core within no number", "foo[0-10]", "foo", -1},
		{"flux-core flux hostlist -F first", "foo[1-10]", "foo1", 0},
		{"flux-core flux hostlist -F last", "foo[1-10]", "foo10", 9},
		{"flux-core flux hostlist -F missing", "foo[2-10]", "foo1", -1},
		{"flux-core python contains", "foo[0-9]", "foo5", 5},
		{"flux-core python not contains", "foo[0-9]", "foo10", -1},
		{"first of duplicates", "foo[1-3],foo[1-3]", "foo2", 1},
		{"padded range unpadded tail", "node[08-10]", "node10", 2},
		{"padded range rejects extra zero", "node[08-10]", "node010", -1},
		{"padded range rejects missing zero", "node[08-10]", "node8", -1},
		{"second range", "n[1-3],m[7-9]", "m8", 4},
		{"empty list", "", "n1", -1},
		{"empty name", "n1", "", -1},
		{"name with brackets", "n[1-2]", "n[1]", -1},
		{"number beyond 64 bits", "n[1-2]", "n18446744073709551617", -1},
		{"largest number", "n[18446744073709551614-18446744073709551615]", "n18446744073709551615", 1},
		{"deep in a large range", "node[0-999999]", "node999999", 999999},
		{"suffixed hosts", "n[1-3]-ib", "n2-ib", 1},
		{"ipv4", "10.0.0.[1-9]", "10.0.0.7", 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hl, err := Parse(tt.input)
			require.NoError(t, err)
			require.Equal(t, tt.want, hl.Find(tt.host))
		})
	}
}

func TestSortUniq(t *testing.T) {
	tests := []struct {
		name   string
		input  string
		sorted string
		uniq   string
	}{
		{"flux-core names", "foo,f,bar,baz", "bar,baz,f,foo", "bar,baz,f,foo"},
		{"flux-core ranges", "[5-6],[3-4],[1-2,0]", "[0-6]", "[0-6]"},
		{"flux-core contained hosts", "[0-20],12,15", "[0-12,12-15,15-20]", "[0-20]"},
		{"flux-core repeated numbers", "0,1,2,3,4,5,1,5", "[0-1,1-5,5]", "[0-5]"},
		{"flux-core contained and beyond", "[0-20],45,12,15", "[0-12,12-15,15-20,45]", "[0-20,45]"},
		{"flux-core padded sorts last", "[0-20],45,12,015", "[0-12,12-20,45,015]", "[0-20,45,015]"},
		{"flux-core names before numbers", "bar1,bar2,foo1,foo,foo", "bar[1-2],foo,foo,foo1", "bar[1-2],foo,foo1"},
		{"flux-core joins", "foo[5-6],foo3,foo4", "foo[3-6]", "foo[3-6]"},
		{"flux-core overlap", "foo[5-6],foo[4-7]", "foo[4-5,5-6,6-7]", "foo[4-7]"},
		{"flux-core same range twice", "foo[0-3],foo[0-3]", "foo[0,0-1,1-2,2-3,3]", "foo[0-3]"},
		{"flux-core same range thrice", "foo[0-2],foo[0-2],foo[0-2]", "foo[0,0,0-1,1,1-2,2,2]", "foo[0-2]"},
		{"flux-core flux hostlist -S", "host3,host2,host1,host0", "host[0-3]", "host[0-3]"},
		{"flux-core flux hostlist -S duplicates", "host2,host1,host3,host1", "host[1,1-3]", "host[1-3]"},
		{"flux-core flux hostlist -u contained", "host[1-3],host2", "host[1-2,2-3]", "host[1-3]"},
		{"flux-core flux hostlist -u names", "host[1-3],bar,baz", "bar,baz,host[1-3]", "bar,baz,host[1-3]"},
		{"flux-core python sort", "foo[7,6,5,4,3,2,1]", "foo[1-7]", "foo[1-7]"},
		{"flux-core python uniq", "foo[1-7,1-7,1-7]", "foo[1,1,1-2,2,2-3,3,3-4,4,4-5,5,5-6,6,6-7,7,7]", "foo[1-7]"},
		{"empty", "", "", ""},
		{"one range", "n[3-5]", "n[3-5]", "n[3-5]"},
		{"one host twice", "a,a", "a,a", "a"},
		{"three overlapping", "[0-10],[2-9],[5-6]", "[0-2,2-3,3-4,4-5,5,5-6,6,6-7,7-8,8-9,9-10]", "[0-10]"},
		{"prefix order is bytewise", "b1,B1,a1,a", "B1,a,a1,b1", "B1,a,a1,b1"},
		{"shorter prefix first", "n10,nn1,n2", "n[2,10],nn1", "n[2,10],nn1"},
		{"unpadded by digit count", "n10,n9,n100", "n[9-10,100]", "n[9-10,100]"},
		{"padded between digit counts", "n10,n9,n08", "n[9,08,10]", "n[9,08,10]"},
		{"padded before same width", "n10,n07,n7", "n[7,07,10]", "n[7,07,10]"},
		{"widths sort apart", "n002,n01,n3", "n[3,01,002]", "n[3,01,002]"},
		{"range sorts by its start", "[5-15],07", "[5-15,07]", "[5-15,07]"},
		{"duplicate behind another class", "[0-20],07,12", "[0-20,07,12]", "[0-20,07,12]"},
		{"suffix hosts sort as names", "n[1-2]x3,n1x4", "n1x4,n1x3,n2x3", "n1x4,n1x3,n2x3"},
		{"largest numbers", "n18446744073709551615,n[18446744073709551614-18446744073709551615]", "n[18446744073709551614-18446744073709551615,18446744073709551615]", "n[18446744073709551614-18446744073709551615]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hl, err := Parse(tt.input)
			require.NoError(t, err)
			before := hl.Hosts()

			sorted := hl.Clone()
			sorted.Sort()
			require.Equal(t, tt.sorted, sorted.String(), "Sort(%s)", tt.input)
			require.Equal(t, hl.Count(), sorted.Count())
			require.ElementsMatch(t, before, sorted.Hosts())

			uniq := hl.Clone()
			uniq.Uniq()
			require.Equal(t, tt.uniq, uniq.String(), "Uniq(%s)", tt.input)
			require.Len(t, uniq.Hosts(), uniq.Count())

			require.Equal(t, before, hl.Hosts(), "Clone shares nothing")
		})
	}
}

func TestAppend(t *testing.T) {
	t.Run("flux-core hostlist_append", func(t *testing.T) {
		var hl Hostlist
		require.NoError(t, hl.Append(""))
		require.Equal(t, 0, hl.Count())
		require.NoError(t, hl.Append("foo12"))
		require.NoError(t, hl.Append("foo[4,1-2]"))
		require.Equal(t, 4, hl.Count())
		require.Equal(t, "foo[12,4,1-2]", hl.String())
		bar, err := Parse("bar[26-30]")
		require.NoError(t, err)
		hl.AppendList(bar)
		require.Equal(t, 9, hl.Count())
		require.Equal(t, "foo[12,4,1-2],bar[26-30]", hl.String())
	})
	t.Run("flux-core python append", func(t *testing.T) {
		var hl Hostlist
		require.NoError(t, hl.Append("foo[0-3]"))
		require.Equal(t, "foo[0-3]", hl.String())
		require.NoError(t, hl.Append("foo[7-9]"))
		require.Equal(t, "foo[0-3,7-9]", hl.String())
		other, err := Parse("foo1,bar")
		require.NoError(t, err)
		hl.AppendList(other)
		require.Equal(t, "foo[0-3,7-9,1],bar", hl.String())
		hl.AppendHosts("bar0", "bar1")
		require.Equal(t, "foo[0-3,7-9,1],bar,bar[0-1]", hl.String())
		require.Equal(t, 11, hl.Count())
	})
	t.Run("appended range continues the last", func(t *testing.T) {
		hl := New("foo1", "foo2")
		require.NoError(t, hl.Append("foo[3-5],foo9"))
		require.Equal(t, "foo[1-5,9]", hl.String())
	})
	t.Run("malformed input leaves the list alone", func(t *testing.T) {
		hl := New("a")
		err := hl.Append("b,c[")
		var se *SyntaxError
		require.ErrorAs(t, err, &se)
		require.Equal(t, 3, se.Pos)
		require.Equal(t, "a", hl.String())
		require.Equal(t, 1, hl.Count())
	})
	t.Run("append to itself", func(t *testing.T) {
		hl := New("n1", "n2")
		hl.AppendList(hl)
		require.Equal(t, "n[1-2,1-2]", hl.String())
		require.Equal(t, 4, hl.Count())
	})
	t.Run("append to itself joining the last range", func(t *testing.T) {
		hl := New("n2", "n1")
		hl.AppendList(hl)
		require.Equal(t, "n[2,1-2,1]", hl.String())
		require.Equal(t, []string{"n2", "n1", "n2", "n1"}, hl.Hosts())
	})
	t.Run("append nil", func(t *testing.T) {
		hl := New("n1")
		hl.AppendList(nil)
		require.Equal(t, "n1", hl.String())
	})
	t.Run("hosts are names, not hostlists", func(t *testing.T) {
		hl := New("a[1-2]")
		require.Equal(t, 1, hl.Count())
		got, ok := hl.Nth(0)
		require.True(t, ok)
		require.Equal(t, "a[1-2]", got)
	})
}

func TestNilAndZero(t *testing.T) {
	var nilList *Hostlist
	require.Equal(t, 0, nilList.Count())
	require.Equal(t, "", nilList.String())
	require.Equal(t, -1, nilList.Find("a"))
	_, ok := nilList.Nth(0)
	require.False(t, ok)
	require.Equal(t, []string{}, nilList.Hosts())
	require.Empty(t, slices.Collect(nilList.All()))
	nilList.Sort()
	nilList.Uniq()
	require.Equal(t, 0, nilList.Clone().Count())

	var zero Hostlist
	require.Equal(t, "", zero.String())
	require.Equal(t, []string{}, zero.Hosts())
	zero.AppendHosts("b", "a")
	zero.Sort()
	require.Equal(t, "a,b", zero.String())
}

func TestAll(t *testing.T) {
	hl, err := Parse("login,n[08-11],x[1-2]-ib,[0-2]")
	require.NoError(t, err)
	require.Equal(t, hl.Hosts(), slices.Collect(hl.All()))

	var first []string
	for h := range hl.All() {
		first = append(first, h)
		if len(first) == 3 {
			break
		}
	}
	require.Equal(t, []string{"login", "n08", "n09"}, first)
}

func TestLargeListStaysCompressed(t *testing.T) {
	hl, err := Parse("node[0-999999]")
	require.NoError(t, err)
	require.Len(t, hl.ranges, 1)
	require.Equal(t, 1000000, hl.Count())
	require.Equal(t, 999999, hl.Find("node999999"))
	got, ok := hl.Nth(500000)
	require.True(t, ok)
	require.Equal(t, "node500000", got)

	hosts := hl.Hosts()
	require.Len(t, hosts, 1000000)
	require.Equal(t, "node0", hosts[0])
	require.Equal(t, "node999999", hosts[999999])
	require.Equal(t, "node[0-999999]", Compress(hosts))
}

func TestBytesLen(t *testing.T) {
	for _, s := range []string{"n[0-0]", "n[0-9]", "n[9-10]", "n[5-12345]", "n[007-1234]", "[0-1048575]",
		"[18446744073709551610-18446744073709551615]", "x[09999999999999999990-10000000000000000010]"} {
		t.Run(s, func(t *testing.T) {
			hl, err := Parse(s)
			require.NoError(t, err)
			want := 0
			for h := range hl.All() {
				want += len(h)
			}
			got := 0
			for k := range hl.ranges {
				got += hl.ranges[k].bytesLen()
			}
			require.Equal(t, want, got)
		})
	}
}

func TestSyntaxErrorIsInspectable(t *testing.T) {
	_, err := Parse("node[1-3],gpu[5-2]")
	wrapped := fmt.Errorf("reading hosts: %w", err)
	var se *SyntaxError
	require.True(t, errors.As(wrapped, &se))
	require.Equal(t, 14, se.Pos)
	require.Equal(t, "node[1-3],gpu[5-2]", se.Input)
	require.Equal(t, `hostlist: invalid range "5-2" at position 14`, err.Error())
}
