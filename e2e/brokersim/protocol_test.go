package brokersim

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

var messages = []message{
	{kind: kindHello, id: 3, hostname: "burst-a-0", rank: 8},
	{kind: kindWelcome, id: 0},
	{kind: kindRefuse, reason: ReasonHostname, detail: "rejecting connection from burst-b-0 (rank 8)"},
	{kind: kindRefuse, reason: ReasonDuplicate, detail: ""},
	{kind: kindJoined, ranks: []int{9, 10, 11}},
	{kind: kindPing, seq: 4, rank: 12},
	{kind: kindPong, seq: 4, rank: 12, ok: true, detail: "burst-a-4"},
	{kind: kindPong, seq: 5, rank: 13, detail: "rank 13 never joined"},
}

func TestMessageRoundTrip(t *testing.T) {
	for _, m := range messages {
		got, err := parseMessage(m.frames())
		require.NoError(t, err)
		require.Equal(t, m, got)
	}
}

func TestParseMessageRefuses(t *testing.T) {
	tests := []struct {
		frames []string
		err    string
	}{
		{nil, "empty message"},
		{[]string{"hello", "1", "h"}, "hello message with 2 fields instead of 3"},
		{[]string{"hello", "1", "h", "2", "cert"}, "hello message with 4 fields instead of 3"},
		{[]string{"hello", "x", "h", "1"}, `hello message, field 1: "x" is not a number`},
		{[]string{"hello", "1", "h", "-1"}, `field 3: "-1" is not a number`},
		{[]string{"hello", "1", "h", "01"}, `field 3: "01" is not a number`},
		{[]string{"welcome", "99999999"}, `"99999999" is not a number in 0-16777216`},
		{[]string{"refuse", "bored", "x"}, `refuse message with the unknown reason "bored"`},
		{[]string{"refuse", "unresolved", "x"}, `unknown reason "unresolved"`},
		{[]string{"refuse", "certificate", "x"}, `unknown reason "certificate"`}, // the handshake refuses those
		{[]string{"joined"}, "joined message without ranks"},
		{[]string{"joined", "1", ""}, `field 2: "" is not a number`},
		{[]string{"pong", "1", "2", "maybe", "x"}, `pong message with the status "maybe"`},
		{[]string{"ping", "1"}, "ping message with 1 fields instead of 2"},
		{[]string{"bye"}, `unknown message kind "bye"`},
	}
	for _, tt := range tests {
		frames := make([][]byte, len(tt.frames))
		for i, f := range tt.frames {
			frames[i] = []byte(f)
		}
		_, err := parseMessage(frames)
		require.ErrorContains(t, err, tt.err, "%q", tt.frames)
	}
}

func FuzzParseMessage(f *testing.F) {
	for _, m := range messages {
		f.Add(bytes.Join(m.frames(), []byte{0}))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		frames := bytes.Split(data, []byte{0})
		m, err := parseMessage(frames)
		if err != nil {
			return
		}
		// Whatever is read is written back to the same frames.
		require.Equal(t, frames, m.frames())
	})
}
