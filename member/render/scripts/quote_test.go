package scripts

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// hostileStrings are inputs that break naive quoting.
var hostileStrings = []string{
	"",
	" ",
	"plain",
	"two words",
	"it's",
	`"double"`,
	`back\slash`,
	`trailing\`,
	"$HOME",
	"${HOME}",
	"$(touch /tmp/fluxfed-pwned)",
	"`touch /tmp/fluxfed-pwned`",
	"a;b",
	"a && b || c",
	"a | b",
	"> /etc/passwd",
	"*",
	"~",
	"~/x",
	"#comment",
	"!event",
	"{a,b}",
	"[abc]",
	"NAME=value",
	"--flag=value",
	"-",
	"'",
	"''",
	`'\''`,
	"line1\nline2",
	"tab\there",
	"\r\n",
	"EOF\nFLUXFED_SCRIPT_EOF\n",
	"ünïcödé ✓",
	"\x01\x02\x7f",
}

func TestQuote(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{in: "", want: "''"},
		{in: "flux", want: "flux"},
		{in: "-N", want: "-N"},
		{in: "/mnt/flux/view", want: "/mnt/flux/view"},
		{in: "--error=/tmp/out/job-0.err", want: "--error=/tmp/out/job-0.err"},
		{in: "-Stbon.topo=kary:2", want: "-Stbon.topo=kary:2"},
		{in: "LABEL=a", want: "'LABEL=a'"},
		{in: "hosts-[0-3]", want: "'hosts-[0-3]'"},
		{in: "it's", want: `'it'\''s'`},
		{in: "$HOME", want: "'$HOME'"},
		{in: "a b", want: "'a b'"},
		{in: "~", want: "'~'"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			require.Equal(t, tt.want, Quote(tt.in))
		})
	}
}

// shellEcho returns what bash (or sh) reads back from words, one NUL-terminated word each.
func shellEcho(t *testing.T, shell string, words string) []string {
	t.Helper()
	cmd := exec.Command(shell, "-c", "for w in "+words+"; do printf '%s\\0' \"$w\"; done")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=/nonexistent"}
	cmd.Dir = t.TempDir() // globs must not match anything by accident
	out, err := cmd.Output()
	require.NoError(t, err, "%s -c with %q", shell, words)
	got := strings.Split(string(out), "\x00")
	return got[:len(got)-1]
}

func TestQuoteRoundTrip(t *testing.T) {
	for _, shell := range []string{"bash", "dash"} {
		if _, err := exec.LookPath(shell); err != nil {
			continue
		}
		for _, s := range hostileStrings {
			t.Run(shell+"/"+s, func(t *testing.T) {
				require.Equal(t, []string{s}, shellEcho(t, shell, Quote(s)))
			})
		}
		t.Run(shell+"/all words", func(t *testing.T) {
			require.Equal(t, hostileStrings, shellEcho(t, shell, quoteWords(hostileStrings)))
		})
	}
}

// FuzzQuote checks that any string survives Quote through bash unchanged and runs nothing.
func FuzzQuote(f *testing.F) {
	requireBash(f)
	for _, s := range hostileStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.ContainsRune(s, 0) || !utf8.ValidString(s) {
			return // NUL cannot be in a shell word; invalid UTF-8 is not a spec string
		}
		require.Equal(t, []string{s}, shellEcho(t, "bash", Quote(s)))
	})
}

func TestSplitWords(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr bool
	}{
		{name: "empty", in: "", want: nil},
		{name: "blanks only", in: " \t\n", want: nil},
		{name: "one word", in: "fusion", want: []string{"fusion"}},
		{name: "words", in: "flux  mini\tsubmit", want: []string{"flux", "mini", "submit"}},
		{name: "option flags", in: "-ompi=openmpi@5 -o cpu-affinity=per-task", want: []string{"-ompi=openmpi@5", "-o", "cpu-affinity=per-task"}},
		{name: "double quotes", in: `env "A=b c"`, want: []string{"env", "A=b c"}},
		{name: "single quotes", in: `env 'A=$b "c"'`, want: []string{"env", `A=$b "c"`}},
		{name: "escapes in double quotes", in: `"a\"b\\c\$d\x"`, want: []string{`a"b\c$d\x`}},
		{name: "backslash outside quotes", in: `a\ b c\'d`, want: []string{"a b", "c'd"}},
		{name: "line continuation", in: "a\\\nb", want: []string{"ab"}},
		{name: "empty quoted word", in: `'' ""`, want: []string{"", ""}},
		{name: "adjacent quoted parts", in: `a'b'"c"d`, want: []string{"abcd"}},
		{name: "no expansion", in: "$HOME `x` $(y)", want: []string{"$HOME", "`x`", "$(y)"}},
		{name: "unterminated single", in: "a 'b", wantErr: true},
		{name: "unterminated double", in: `a "b`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := splitWords(tt.in)
			if tt.wantErr {
				require.ErrorIs(t, err, errUnterminatedQuote)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// FuzzSplitWords checks splitWords against bash for inputs without expansions: where bash
// would expand nothing, both must find the same words.
func FuzzSplitWords(f *testing.F) {
	requireBash(f)
	for _, s := range []string{"a b", `"a b" c`, `'x y'z`, `a\ b`, `"\"" '\'`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.ContainsAny(s, "$`!*?[]{}~#;&|<>()\x00\r\n=%") || strings.HasSuffix(s, `\`) || !utf8.ValidString(s) {
			return // only compare where bash performs no expansion, control operator or line break
		}
		words, err := splitWords(s)
		if err != nil {
			return
		}
		if len(words) == 0 {
			return
		}
		require.Equal(t, words, shellEcho(t, "bash", s))
	})
}

func TestHeredocDelimiter(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{
		{name: "free", body: "echo hi\n", want: "EOF"},
		{name: "taken", body: "EOF\n", want: "EOF_1"},
		{name: "taken twice", body: "EOF\nEOF_1\n", want: "EOF_2"},
		{name: "taken with CR", body: "EOF\r\n", want: "EOF_1"},
		{name: "not a whole line", body: "EOF2\n EOF\n", want: "EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, heredocDelimiter("EOF", tt.body))
		})
	}
}
