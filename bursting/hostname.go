package bursting

import (
	"strconv"
	"strings"
)

// checkHost returns why Flux would refuse host in the hosts array of [bootstrap], or "" when it
// accepts it. flux-core (conf_bootstrap.c) wants a domain name of 1-253 characters whose labels
// are 1-63 characters of [A-Za-z0-9-], neither starting nor ending with '-'. An IPv4 address
// passes as such a name; an IPv6 address or a name with '_' does not. flux-core silently skips
// empty labels ("a..b"); they are refused here, since no pod or address is named that way.
func checkHost(host string) string {
	if host == "" {
		return "is empty"
	}
	if len(host) > 253 {
		return "is longer than 253 characters"
	}
	for label := range strings.SplitSeq(host, ".") {
		switch {
		case label == "":
			return "has an empty label (a leading, trailing or doubled '.')"
		case len(label) > 63:
			return "has a label longer than 63 characters: " + strconv.Quote(label)
		case label[0] == '-' || label[len(label)-1] == '-':
			return "has a label that starts or ends with '-': " + strconv.Quote(label)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '-' {
				what := "a non-ASCII byte"
				if c < 0x80 {
					what = strconv.QuoteRune(rune(c))
				}
				return "contains " + what + ", which Flux does not accept in a hostname (only letters, digits, '-' and '.')"
			}
		}
	}
	return ""
}
