package scripts

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Quote returns s as one shell word that bash and POSIX sh read back as exactly s. Words made
// only of characters that no shell treats specially are returned as they are, so rendered
// scripts stay readable; everything else is single-quoted, and a quote character inside
// closes the quoted part, adds an escaped quote and opens a new part. Nothing is special inside
// single quotes, which is why this is safe for any input: commands, environment values and
// paths from the spec alike.
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	if isPlainWord(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// isPlainWord reports whether s needs no quoting: letters, digits and a few punctuation
// characters that are never special in a word ('-' only matters to the command that receives
// it). An '=' is plain too, unless what precedes it is a variable name: NAME=value as the first
// word of a command would be an assignment.
func isPlainWord(s string) bool {
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("_@%+:,./=-", r):
		default:
			return false
		}
	}
	if name, _, found := strings.Cut(s, "="); found && envName.MatchString(name) {
		return false
	}
	return true
}

// quoteWords returns words as a list of quoted shell words separated by spaces, the body of
// a bash array literal.
func quoteWords(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = Quote(w)
	}
	return strings.Join(quoted, " ")
}

// errUnterminatedQuote is returned by splitWords for a quote that is never closed.
var errUnterminatedQuote = errors.New("unterminated quote")

// splitWords splits s into words the way a shell splits a simple command line, without any
// expansion: blanks and newlines separate words, single quotes keep everything literally,
// double quotes keep everything except that a backslash escapes $, `, ", \ and a newline, and
// a backslash outside quotes escapes the next character. It is used for the spec fields that
// are lists of words written as one string (commands.prefix, flux.submitCommand,
// flux.optionFlags). The Flux Operator pasted these unquoted into its scripts, so they were
// split on blanks; quotes are honoured here as an extension, and the words are then quoted
// again, so nothing in them is ever interpreted by the shell ($VAR stays literal).
func splitWords(s string) ([]string, error) {
	var (
		words   []string
		cur     strings.Builder
		inWord  bool
		runes   = []rune(s)
		closing rune
	)
	for i := 0; i < len(runes); i++ {
		r := runes[i]
		switch {
		case closing == '\'':
			if r == '\'' {
				closing = 0
				continue
			}
			cur.WriteRune(r)
		case closing == '"':
			switch r {
			case '"':
				closing = 0
			case '\\':
				if i+1 < len(runes) && strings.ContainsRune("$`\"\\\n", runes[i+1]) {
					i++
					if runes[i] != '\n' {
						cur.WriteRune(runes[i])
					}
					continue
				}
				cur.WriteRune(r)
			default:
				cur.WriteRune(r)
			}
		case r == ' ' || r == '\t' || r == '\n' || r == '\r':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case r == '\\':
			if i+1 < len(runes) {
				i++
				if runes[i] == '\n' {
					continue // a line continuation joins the lines
				}
				cur.WriteRune(runes[i])
			}
			inWord = true
		case r == '\'' || r == '"':
			closing = r
			inWord = true
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if closing != 0 {
		return nil, fmt.Errorf("%w (%c) in %q", errUnterminatedQuote, closing, s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// heredocDelimiter returns a here-document delimiter, starting from base, that is not a line of
// body, so that body cannot end the here-document early whatever it contains.
func heredocDelimiter(base, body string) string {
	lines := make(map[string]bool)
	for _, l := range strings.Split(body, "\n") {
		lines[strings.TrimRight(l, "\r")] = true
		lines[l] = true
	}
	delim := base
	for i := 1; lines[delim]; i++ {
		delim = fmt.Sprintf("%s_%d", base, i)
	}
	return delim
}

// envName is what a shell accepts as a variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
