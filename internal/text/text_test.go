package text

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestTruncate(t *testing.T) {
	tests := []struct {
		name string
		s    string
		n    int
		want string
	}{
		{name: "short", s: "short", n: 10, want: "short"},
		{name: "exactly the limit", s: "0123456789", n: 10, want: "0123456789"},
		{name: "one byte over", s: "0123456789a", n: 10, want: "0123456..."},
		{name: "ascii", s: "abcdefghijklmnop", n: 10, want: "abcdefg..."},
		{name: "two-byte runes: the cut backs off to a boundary", s: "ééééééé", n: 8, want: "éé..."},
		{name: "two-byte runes: the cut falls on a boundary", s: "ééééééé", n: 9, want: "ééé..."},
		{name: "three-byte runes", s: "€€€€€", n: 10, want: "€€..."},
		{name: "four-byte runes", s: "😀😀😀", n: 10, want: "😀..."},
		{name: "four-byte runes, no room for one", s: "😀😀😀", n: 6, want: "..."},
		{name: "cut on runes, not on characters: a combining mark may go", s: "e\u0301e\u0301e\u0301", n: 7, want: "e\u0301e..."},
		{name: "invalid UTF-8 is replaced", s: "a\xffb", n: 10, want: "a\uFFFDb"},
		{name: "a run of invalid bytes is one replacement", s: "\xff\xff\xff\xff", n: 10, want: "\uFFFD"},
		{name: "invalid UTF-8 counted after replacement", s: "\xffa\xffb\xffc\xff", n: 10, want: "\uFFFDa\uFFFD..."},
		{name: "limit below the mark", s: "abcdef", n: 2, want: "ab"},
		{name: "zero limit", s: "abc", n: 0, want: ""},
		{name: "empty", s: "", n: 0, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Truncate(tt.s, tt.n)
			require.Equal(t, tt.want, got)
			require.LessOrEqual(t, len(got), tt.n)
			require.True(t, utf8.ValidString(got))
		})
	}
}

func FuzzTruncate(f *testing.F) {
	for _, s := range []string{"", "abc", "ééé", "😀😀", "a\xffb\xc3", strings.Repeat("é", 600)} {
		f.Add(s, 5)
		f.Add(s, MaxEventNote)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1<<16 {
			return
		}
		got := Truncate(s, n)
		if len(got) > n || !utf8.ValidString(got) {
			t.Fatalf("Truncate(%q, %d) = %q", s, n, got)
		}
		if valid := strings.ToValidUTF8(s, "\uFFFD"); len(valid) <= n && got != valid {
			t.Fatalf("Truncate(%q, %d) = %q, want it whole", s, n, got)
		} else if len(valid) > n && n >= len(ellipsis) && !strings.HasPrefix(valid, strings.TrimSuffix(got, ellipsis)) {
			t.Fatalf("Truncate(%q, %d) = %q is not a prefix", s, n, got)
		}
	})
}

func TestCount(t *testing.T) {
	tests := []struct {
		n    int
		want string
	}{
		{0, "0 jobs"},
		{1, "1 job"},
		{2, "2 jobs"},
		{-1, "-1 jobs"},
		{1000, "1000 jobs"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, Count(tt.n, "job", "jobs"))
	}
}
