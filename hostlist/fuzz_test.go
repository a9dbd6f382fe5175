package hostlist

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

var (
	fuzzPrefixes = []string{"", "n", "node", "rack1-node", "gpu-", "x-1a-", "10.0.0.", "a.b.", "n0", "n9", "login", "N"}
	fuzzSuffixes = []string{"-ib", "x", ".local", "-eth0", "b2"}
)

const fuzzLabelChars = "abcdefghijklmnopqrstuvwxyzAB0123456789-."

// hostsFromBytes builds a list of valid host names from fuzz input. Most
// bytes choose prefixes, numbers and paddings, and runs of consecutive or
// repeated hosts, so the list has the structure hostlists compress.
func hostsFromBytes(data []byte) []string {
	take := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	var hosts []string
	prefix, num, width := "n", uint64(0), 0
	number := func() string { return fmt.Sprintf("%0*d", width, num) }
	for len(data) > 0 {
		op := take()
		var host string
		switch op % 8 {
		case 0, 1: // a new prefix and number
			prefix = fuzzPrefixes[int(take())%len(fuzzPrefixes)]
			num, width = uint64(take()), int(op>>3)%5
			host = prefix + number()
		case 2, 3: // the next number
			num++
			host = prefix + number()
		case 4: // an earlier host again
			if len(hosts) > 0 {
				host = hosts[int(take())%len(hosts)]
			}
		case 5: // a number anywhere in 64 bits
			num = 0
			for range 8 {
				num = num<<8 | uint64(take())
			}
			host = prefix + number()
		case 6: // a name with a suffix after the number
			num = uint64(take())
			host = prefix + number() + fuzzSuffixes[int(op>>3)%len(fuzzSuffixes)]
		case 7: // free-form
			b := make([]byte, int(take())%12+1)
			for i := range b {
				b[i] = fuzzLabelChars[int(take())%len(fuzzLabelChars)]
			}
			host = string(b)
		}
		if validHostname(host) {
			hosts = append(hosts, host)
		}
	}
	return hosts
}

// validHostname accepts what a Flux bootstrap accepts as a host (a sequence
// of DNS labels) and libhostlist can read back (a trailing number within 64
// bits).
func validHostname(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			if !isLabelChar(label[i]) {
				return false
			}
		}
	}
	i := len(h)
	for i > 0 && '0' <= h[i-1] && h[i-1] <= '9' {
		i--
	}
	if i < len(h) {
		if _, err := strconv.ParseUint(h[i:], 10, 64); err != nil {
			return false
		}
	}
	return true
}

func isLabelChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-':
		return true
	}
	return false
}

// checkList checks every accessor of hl against the plain list hosts.
func checkList(t *testing.T, hl *Hostlist, hosts []string) {
	t.Helper()
	require.Equal(t, len(hosts), hl.Count())
	if diff := cmp.Diff(hosts, hl.Hosts(), cmpEmpty); diff != "" {
		t.Fatalf("Hosts mismatch (-want +got):\n%s", diff)
	}
	require.True(t, slices.Equal(hl.Hosts(), slices.Collect(hl.All())), "All and Hosts differ")
	first := make(map[string]int, len(hosts))
	for i, h := range hosts {
		if _, ok := first[h]; !ok {
			first[h] = i
		}
	}
	for i, h := range hosts {
		got, ok := hl.Nth(i)
		require.True(t, ok)
		require.Equal(t, h, got, "Nth(%d)", i)
		require.Equal(t, first[h], hl.Find(h), "Find(%q)", h)
		for _, other := range []string{h + "0", "0" + h, h[:len(h)-1]} {
			want, ok := first[other]
			if !ok {
				want = -1
			}
			require.Equal(t, want, hl.Find(other), "Find(%q)", other)
		}
	}
	_, ok := hl.Nth(len(hosts))
	require.False(t, ok)
}

// cmpEmpty makes nil and empty slices equal.
var cmpEmpty = cmp.Comparer(slices.Equal[[]string])

func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 1, 1, 2, 2, 2, 3})                          // n1..n4
	f.Add([]byte{16, 2, 8, 2, 2, 2, 0, 2, 9, 2})                // padded run crossing a digit
	f.Add([]byte{0, 0, 5, 4, 0, 4, 0, 2})                       // repeats
	f.Add([]byte{5, 255, 255, 255, 255, 255, 255, 255, 254, 2}) // largest numbers
	f.Add([]byte{6, 3, 6, 4, 0, 6, 1, 7, 5, 1, 2, 3, 4, 5})     // suffixes and free-form names
	f.Add([]byte{0, 6, 1, 2, 0, 3, 9, 2, 0, 7, 0})              // ipv4 and numbers only
	f.Fuzz(func(t *testing.T, data []byte) {
		hosts := hostsFromBytes(data)
		s := Compress(hosts)
		got, err := Expand(s)
		require.NoError(t, err, "Expand(Compress(%q)) = Expand(%q)", hosts, s)
		if diff := cmp.Diff(hosts, got, cmpEmpty); diff != "" {
			t.Fatalf("Expand(%q) mismatch (-want +got):\n%s", s, diff)
		}
		require.Equal(t, s, New(hosts...).String(), "Compress and New agree")
		checkList(t, New(hosts...), hosts)

		parsed, err := Parse(s)
		require.NoError(t, err)
		require.Equal(t, s, parsed.String(), "the encoding reads back to itself")
		checkList(t, parsed, hosts)
	})
}

func FuzzExpand(f *testing.F) {
	for _, s := range []string{
		"", "foo[1-5]", "foo[0-4]-eth2", "[00-2]", "foo[1,1,2,1]", "node[1-3,5,07-08,010],a,b,c",
		" a ,\tb ", "n[3-1]", "n[1-", "n[a-b]", "n[]", "foo]", "n[1]x[2]", "n[1, 2]",
		"n[18446744073709551614-18446744073709551615]", "n18446744073709551616", "n1[8-9]0",
		"rack1-node[1-2]", "[0-20],45,12,015", "a\nb", "foo[0-1048576]",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		hl, err := parse(s, maxBracketRanges)
		if err != nil {
			var se *SyntaxError
			require.ErrorAs(t, err, &se)
			require.Equal(t, s, se.Input)
			require.True(t, 0 <= se.Pos && se.Pos <= len(s), "position %d outside %q", se.Pos, s)
			if se.Msg != fmt.Sprintf("more than %d hosts", maxBracketRanges) {
				_, err2 := Parse(s)
				require.Equal(t, err, err2)
			}
			return
		}
		hosts := hl.Hosts()
		for _, h := range hosts {
			require.NotEmpty(t, h)
			require.LessOrEqual(t, len(h), maxHostLen)
			for i := 0; i < len(h); i++ {
				require.True(t, isNameChar(h[i]), "Expand(%q) gave %q", s, h)
			}
		}
		if len(hosts) <= 2000 {
			checkList(t, hl, hosts)
		}

		again, err := Expand(Compress(hosts))
		require.NoError(t, err)
		if diff := cmp.Diff(hosts, again, cmpEmpty); diff != "" {
			t.Fatalf("Expand(Compress(Expand(%q))) mismatch (-want +got):\n%s", s, diff)
		}
		again, err = Expand(hl.String())
		require.NoError(t, err)
		if diff := cmp.Diff(hosts, again, cmpEmpty); diff != "" {
			t.Fatalf("Expand(Parse(%q).String()) mismatch (-want +got):\n%s", s, diff)
		}
	})
}
