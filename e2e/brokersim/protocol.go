package brokersim

import (
	"fmt"
	"slices"
	"strconv"
)

// The stand-ins' messages, one ZeroMQ multipart message each: the kind, then its fields as
// text frames. A ROUTER socket adds the peer's routing id in front of what it receives and
// takes it off what it sends; the encoding below is what remains.
const (
	// kindHello: child to parent, after the CURVE handshake: id, hostname, rank.
	kindHello = "hello"
	// kindWelcome: parent to child, the parent's id; the child has joined.
	kindWelcome = "welcome"
	// kindRefuse: parent to child, a Reason and its detail.
	kindRefuse = "refuse"
	// kindJoined: child to parent, ranks of the child's subtree that joined it.
	kindJoined = "joined"
	// kindPing: parent to child, a sequence number and the target rank of a request from
	// rank 0, routed down the tree.
	kindPing = "ping"
	// kindPong: child to parent, the answer to a ping: sequence number, target rank, "ok" and
	// the answering host, or "fail" and why.
	kindPong = "pong"
)

// maxNumber bounds the ranks, ids and sequence numbers a message may carry.
const maxNumber = 1 << 24

// message is one stand-in message; which fields are set depends on kind.
type message struct {
	kind     string
	id       int    // hello, welcome: the sender's index among the brokers of the run
	hostname string // hello
	rank     int    // hello: the sender's rank; ping, pong: the target rank
	reason   Reason // refuse
	detail   string // refuse; pong: the answering host, or why it failed
	ranks    []int  // joined
	seq      int    // ping, pong
	ok       bool   // pong
}

// frames encodes m.
func (m message) frames() [][]byte {
	f := []string{m.kind}
	switch m.kind {
	case kindHello:
		f = append(f, strconv.Itoa(m.id), m.hostname, strconv.Itoa(m.rank))
	case kindWelcome:
		f = append(f, strconv.Itoa(m.id))
	case kindRefuse:
		f = append(f, string(m.reason), m.detail)
	case kindJoined:
		for _, r := range m.ranks {
			f = append(f, strconv.Itoa(r))
		}
	case kindPing:
		f = append(f, strconv.Itoa(m.seq), strconv.Itoa(m.rank))
	case kindPong:
		status := "fail"
		if m.ok {
			status = "ok"
		}
		f = append(f, strconv.Itoa(m.seq), strconv.Itoa(m.rank), status, m.detail)
	}
	out := make([][]byte, len(f))
	for i, s := range f {
		out[i] = []byte(s)
	}
	return out
}

// parseMessage decodes the frames of one message, refusing anything frames would not write.
func parseMessage(frames [][]byte) (message, error) {
	if len(frames) == 0 {
		return message{}, fmt.Errorf("empty message")
	}
	m := message{kind: string(frames[0])}
	args := frames[1:]
	want := map[string]int{kindHello: 3, kindWelcome: 1, kindRefuse: 2, kindPing: 2, kindPong: 4}
	if n, fixed := want[m.kind]; fixed && len(args) != n {
		return message{}, fmt.Errorf("%s message with %d fields instead of %d", m.kind, len(args), n)
	}
	var err error
	num := func(i int) int {
		n, e := parseNumber(args[i])
		if e != nil && err == nil {
			err = fmt.Errorf("%s message, field %d: %w", m.kind, i+1, e)
		}
		return n
	}
	switch m.kind {
	case kindHello:
		m.id, m.hostname, m.rank = num(0), string(args[1]), num(2)
	case kindWelcome:
		m.id = num(0)
	case kindRefuse:
		m.reason, m.detail = Reason(args[0]), string(args[1])
		if !slices.Contains(refusals, m.reason) {
			return message{}, fmt.Errorf("refuse message with the unknown reason %q", args[0])
		}
	case kindJoined:
		if len(args) == 0 {
			return message{}, fmt.Errorf("joined message without ranks")
		}
		for i := range args {
			m.ranks = append(m.ranks, num(i))
		}
	case kindPing:
		m.seq, m.rank = num(0), num(1)
	case kindPong:
		m.seq, m.rank, m.detail = num(0), num(1), string(args[3])
		switch string(args[2]) {
		case "ok":
			m.ok = true
		case "fail":
		default:
			return message{}, fmt.Errorf("pong message with the status %q", args[2])
		}
	default:
		return message{}, fmt.Errorf("unknown message kind %q", frames[0])
	}
	if err != nil {
		return message{}, err
	}
	return m, nil
}

// parseNumber reads a decimal number in 0..maxNumber, digits only.
func parseNumber(b []byte) (int, error) {
	if len(b) == 0 || len(b) > 8 {
		return 0, fmt.Errorf("%q is not a number in 0-%d", b, maxNumber)
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q is not a number in 0-%d", b, maxNumber)
		}
		n = n*10 + int(c-'0')
	}
	if n > maxNumber || len(b) > 1 && b[0] == '0' {
		return 0, fmt.Errorf("%q is not a number in 0-%d", b, maxNumber)
	}
	return n, nil
}
