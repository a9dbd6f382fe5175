package hostlist

import "fmt"

// SyntaxError reports a hostlist that cannot be parsed.
type SyntaxError struct {
	// Input is the whole hostlist that was being parsed.
	Input string
	// Pos is the byte offset in Input at which the problem was found.
	Pos int
	// Msg says what is wrong, without the position.
	Msg string
}

// Error returns the message and the position, but not the input, which may be
// very long.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("hostlist: %s at position %d", e.Msg, e.Pos)
}
