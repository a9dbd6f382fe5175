// Package text writes the messages of statuses and events: it cuts them to what the Kubernetes
// API accepts, so that a long message (a spec error that lists many fields, say) is shortened
// instead of making the whole write fail, and counts things in words that agree with the count.
package text

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits of the Kubernetes API, in bytes.
const (
	// MaxEventNote is the longest note an event (events.k8s.io/v1) may have.
	MaxEventNote = 1024
	// MaxEventAction is the longest action (and reason) an event may have.
	MaxEventAction = 128
	// MaxConditionMessage is the longest message a metav1.Condition may have.
	MaxConditionMessage = 32768
)

// ellipsis marks a cut.
const ellipsis = "..."

// Truncate returns s as valid UTF-8 of at most n bytes: invalid bytes become U+FFFD (as JSON
// would write them anyway, maybe past the limit), and a string still longer than n is cut on a
// rune boundary and ends with "...". n is at least len("...") for the mark to fit; below that
// the cut has no mark.
func Truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, string(utf8.RuneError))
	if len(s) <= n {
		return s
	}
	mark := ellipsis
	if n < len(mark) {
		mark = ""
	}
	cut := max(n-len(mark), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// Count returns n and the noun for that many things: "1 job", "3 jobs", "0 jobs".
func Count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
