package curve

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ParseError reports a certificate file that a Flux broker would refuse, or that fluxfed does
// not take because it is ambiguous. It never quotes the secret key.
type ParseError struct {
	// Line is the 1-based line number of the problem, 0 for a problem with the whole file.
	Line int
	// Reason says what is wrong.
	Reason string
}

// Error returns the line and the reason.
func (e *ParseError) Error() string {
	if e.Line == 0 {
		return "curve certificate: " + e.Reason
	}
	return fmt.Sprintf("curve certificate: line %d: %s", e.Line, e.Reason)
}

// Parse reads a certificate in the format `flux keygen` writes, as given inline in
// spec.flux.curveCert, and accepts what flux-core's cert.c accepts: blank and comment lines
// anywhere; the unindented section names metadata and curve; indented key = "value" entries
// below them, with keys of [A-Za-z0-9.-] and values without '_' or quotes; lines of at most
// 255 bytes. The curve section must hold a public-key and a secret-key of 40 Z85 characters
// each, and the public key must be the secret key's. Where Flux would quietly let the last
// entry win (a curve key given twice), Parse refuses. CRLF line ends are accepted.
func Parse(data []byte) (*Certificate, error) {
	if bytes.IndexByte(data, 0) >= 0 {
		return nil, &ParseError{Reason: "contains a NUL byte"}
	}
	if !utf8.Valid(data) {
		return nil, &ParseError{Reason: "is not valid UTF-8"}
	}
	var (
		section           string
		metadata          []Metadata
		seen              = map[string]bool{}
		public, secret    []byte
		havePub, haveSecr bool
	)
	lines := strings.Split(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for i, line := range lines {
		n := i + 1
		if len(line) > maxLine {
			return nil, &ParseError{Line: n, Reason: fmt.Sprintf("is %d bytes long; Flux reads at most %d", len(line), maxLine)}
		}
		indented := line != "" && (line[0] == ' ' || line[0] == '\t')
		stripped := strings.TrimSpace(line)
		switch {
		case stripped == "" || stripped[0] == '#':
			continue
		case !indented && (stripped == "metadata" || stripped == "curve"):
			section = stripped
			continue
		case !indented:
			return nil, &ParseError{Line: n, Reason: "is neither a comment, a section name (metadata, curve) nor an indented entry"}
		case section == "":
			return nil, &ParseError{Line: n, Reason: "is an entry before any section"}
		}
		key, value, reason := parseEntry(stripped)
		if reason != "" {
			return nil, &ParseError{Line: n, Reason: reason}
		}
		if section == "metadata" {
			if seen[key] {
				return nil, &ParseError{Line: n, Reason: fmt.Sprintf("metadata %s is given twice", key)}
			}
			seen[key] = true
			metadata = append(metadata, Metadata{Key: key, Value: value})
			continue
		}
		var err error
		switch key {
		case "public-key":
			if havePub {
				return nil, &ParseError{Line: n, Reason: "public-key is given twice"}
			}
			havePub = true
			if public, err = decodeKey(value); err != nil {
				return nil, &ParseError{Line: n, Reason: "public-key " + err.Error()}
			}
		case "secret-key":
			if haveSecr {
				return nil, &ParseError{Line: n, Reason: "secret-key is given twice"}
			}
			haveSecr = true
			if secret, err = decodeKey(value); err != nil {
				return nil, &ParseError{Line: n, Reason: "secret-key " + err.Error()}
			}
		default:
			return nil, &ParseError{Line: n, Reason: fmt.Sprintf("the curve section holds only public-key and secret-key, not %s", key)}
		}
	}
	switch {
	case !havePub:
		return nil, &ParseError{Reason: "has no public-key in a curve section"}
	case !haveSecr:
		return nil, &ParseError{Reason: "has no secret-key in a curve section"}
	}
	key := [KeySize]byte(secret)
	c := &Certificate{public: publicKey(key), secret: holdSecret(key), metadata: metadata}
	if !bytes.Equal(c.public[:], public) {
		return nil, &ParseError{Reason: "the public-key is not the public key of the secret-key"}
	}
	return c, nil
}

// parseEntry splits key = "value" as cert.c does: at the first '=', both sides stripped, the
// value in double quotes.
func parseEntry(s string) (key, value, reason string) {
	key, value, ok := strings.Cut(s, "=")
	if !ok {
		return "", "", `is not a key = "value" entry`
	}
	key, value = strings.TrimSpace(key), strings.TrimSpace(value)
	if !validKey(key) {
		return "", "", "has a key that is not made of letters, digits, '.' and '-'"
	}
	if len(value) < 2 || value[0] != '"' || value[len(value)-1] != '"' {
		return "", "", key + ": the value is not in double quotes"
	}
	value = value[1 : len(value)-1]
	if !validValue(value) {
		return "", "", key + ": the value holds a character Flux does not accept (such as '_' or '\"')"
	}
	return key, value, ""
}

// decodeKey decodes a 40-character Z85 key. Its errors never quote the text.
func decodeKey(s string) ([]byte, error) {
	if len(s) != z85KeyLen {
		return nil, fmt.Errorf("is %d characters long, not %d characters of Z85", len(s), z85KeyLen)
	}
	k, err := DecodeZ85(s)
	if err != nil {
		return nil, fmt.Errorf("is not Z85: %w", err)
	}
	return k, nil
}

// validKey is cert.c's valid_key: one or more of [A-Za-z0-9.-].
func validKey(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) && s[i] != '.' && s[i] != '-' {
			return false
		}
	}
	return true
}

// valueExtra are the characters besides letters and digits that cert.c's valid_value accepts.
const valueExtra = ".-:+=^!/*?&<>()[]{}@%$# \t"

// validValue is cert.c's valid_value; the empty value is valid.
func validValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) && strings.IndexByte(valueExtra, s[i]) < 0 {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}
