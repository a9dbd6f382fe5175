package brokerconf

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// tomlWriter writes the small subset of TOML broker.toml needs: comments, tables, and string,
// integer and boolean keys, with bare key names. Values are quoted here, so nothing from the
// spec can break the file's structure.
type tomlWriter struct {
	b strings.Builder
	// err is the first value that cannot be written; later writes are skipped.
	err error
}

// comment writes each line of text as a comment line. TOML allows no control character but tab
// in a comment, so any other (a carriage return, say, from a value of the spec) is written as
// U+FFFD: the comment stays one line and the file stays TOML.
func (w *tomlWriter) comment(text string) {
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.Map(func(r rune) rune {
			if r != '\t' && (r < 0x20 || r == 0x7f) || r == utf8.RuneError {
				return utf8.RuneError
			}
			return r
		}, line)
		w.b.WriteString(strings.TrimRight("# "+line, " "))
		w.b.WriteByte('\n')
	}
}

// table starts [name], after a blank line unless it is the first thing written.
func (w *tomlWriter) table(name string) {
	if w.b.Len() > 0 {
		w.b.WriteByte('\n')
	}
	w.b.WriteString("[" + name + "]\n")
}

func (w *tomlWriter) str(key, value string) {
	w.b.WriteString(key + " = " + w.quote(value) + "\n")
}

func (w *tomlWriter) int(key string, value int) {
	w.b.WriteString(key + " = " + strconv.Itoa(value) + "\n")
}

func (w *tomlWriter) bool(key string, value bool) {
	w.b.WriteString(key + " = " + strconv.FormatBool(value) + "\n")
}

// quote returns value as a TOML basic string. TOML strings must be valid UTF-8; a value that is
// not sets w.err, since any replacement would silently change a path or a name.
func (w *tomlWriter) quote(value string) string {
	if !utf8.ValidString(value) {
		if w.err == nil {
			w.err = fmt.Errorf("%q is not valid UTF-8", value)
		}
		return `""`
	}
	return tomlQuote(value)
}

// tomlQuote quotes s as a TOML basic string: '"' and '\' escaped, control characters written as
// escapes. s must be valid UTF-8.
func tomlQuote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
