package brokersim

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/go-zeromq/zmq4"

	"github.com/fluxfed/fluxfed/e2e/brokersim/curvezmq"
	"github.com/fluxfed/fluxfed/e2e/fluxcheck"
)

// standIn is one stand-in broker.
type standIn struct {
	run   *run
	idx   int
	spec  Broker
	place *Place
	boot  *fluxcheck.Bootstrap
	// keys are the keypair of the broker's certificate, which its sockets' CURVE handshakes use.
	keys curvezmq.KeyPair
	// router is the bind socket, nil without children; dealer the socket to the parent, nil
	// on rank 0. Both are set before the stand-in starts.
	router zmq4.Socket
	dealer zmq4.Socket

	mu sync.Mutex
	// children maps every accepted child's rank to its routing id, ids the reverse.
	children map[int]string
	ids      map[string]int
	// accepted is set once the parent welcomed this broker; until then the ranks to forward
	// wait in queue.
	accepted bool
	queue    []int
}

// id is the broker's routing id, and what its hello and welcome carry to name it (Flux's
// overlay uses a UUID): its index among the brokers of the run.
func (s *standIn) id() string { return strconv.Itoa(s.idx) }

// bind maps the broker's bind URI to its listener, and listens for it on loopback.
func (s *standIn) bind(ctx context.Context) error {
	l, err := BindListener(s.spec.Cluster, s.spec.Hostname, s.place.Bind)
	if err != nil {
		return fmt.Errorf("binding %s: %w", s.place.Bind, err)
	}
	if _, inUse := s.run.listeners[l]; inUse {
		return fmt.Errorf("binding %s: %s is in use", s.place.Bind, l)
	}
	router := zmq4.NewRouter(ctx, zmq4.WithLogger(s.run.logger), zmq4.WithSecurity(curvezmq.Flux(s.keys)))
	if err := router.Listen("tcp://" + loopback()); err != nil {
		return errors.Join(fmt.Errorf("binding %s on loopback: %w", s.place.Bind, err), router.Close())
	}
	s.router = router
	s.run.listeners[l] = router.Addr().String()
	return nil
}

// join connects to the parent, says hello, and serves what comes from the parent: the
// answer to the hello, then the requests from rank 0.
func (s *standIn) join(ctx context.Context) {
	r, p := s.run, s.place
	parent := fmt.Sprintf("%s (rank %d)", p.ParentHost, p.Parent)
	l, lead, err := r.network.resolve(s.spec.Cluster, p.Connect)
	if err != nil {
		reason := ReasonConnect
		if errors.Is(err, ErrUnresolved) {
			reason = ReasonUnresolved
		}
		r.fail(s.idx, reason, "connecting to its parent %s at %s: %v", parent, p.Connect, err)
		return
	}
	addr, listening := r.listeners[l]
	if !listening {
		r.fail(s.idx, ReasonNotListening, "connecting to its parent %s at %s: it leads to %s, where no broker listens", parent, p.Connect, l)
		return
	}
	if lead != nil {
		// Across clusters through the lead broker's NodePort, for real, where the run serves it
		// (a lead on loopback); any other lead address is routed in-process, as names are.
		if served, ok := r.leads[*lead]; ok {
			if served.err != nil {
				r.fail(s.idx, ReasonConnect, "connecting to its parent %s at %s: the lead broker's NodePort cannot be served there: %v", parent, p.Connect, served.err)
				return
			}
			addr = lead.String()
		}
	}
	if err := s.dealer.Dial(guardedScheme + "://" + addr); err != nil {
		if hsErr := (*curvezmq.HandshakeError)(nil); errors.As(err, &hsErr) {
			r.fail(s.idx, ReasonCertificate, "the CURVE handshake with its parent %s at %s failed, so the two hold different certificates (a real broker retries forever and logs nothing): %v",
				parent, p.Connect, hsErr.Err)
			return
		}
		r.fail(s.idx, ReasonConnect, "connecting to its parent %s at %s (%s): %v", parent, p.Connect, l, err)
		return
	}
	hello := message{kind: kindHello, id: s.idx, hostname: s.spec.Hostname, rank: p.Rank}
	if err := s.dealer.Send(zmq4.NewMsgFrom(hello.frames()...)); err != nil {
		r.fail(s.idx, ReasonConnect, "saying hello to its parent %s: %v", parent, err)
		return
	}
	for {
		msg, err := s.dealer.Recv()
		if err != nil {
			return // the run is over, or the parent closed the connection
		}
		m, err := parseMessage(msg.Frames)
		if err != nil {
			r.protocolError(s.idx, "from its parent %s: %v", parent, err)
			continue
		}
		switch m.kind {
		case kindWelcome:
			if m.id < 0 || m.id >= len(r.specs) {
				r.fail(s.idx, ReasonProtocol, "its parent %s welcomed it with the unknown id %d", parent, m.id)
				return
			}
			s.welcomed()
			r.joined(s.idx, m.id)
		case kindRefuse:
			// A refused broker exits.
			r.fail(s.idx, m.reason, "%s refused it: %s", parent, m.detail)
			return
		case kindPing:
			s.route(m)
		default:
			r.protocolError(s.idx, "from its parent %s: unexpected %s message", parent, m.kind)
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// welcomed marks the broker accepted and forwards the ranks that joined it meanwhile.
func (s *standIn) welcomed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accepted = true
	if len(s.queue) > 0 {
		s.sendParent(message{kind: kindJoined, ranks: s.queue})
		s.queue = nil
	}
}

// serveChildren serves what comes from the children: hellos, the ranks that joined them, and
// the answers to rank 0's requests.
func (s *standIn) serveChildren() {
	for {
		msg, err := s.router.Recv()
		if err != nil {
			return // the run is over
		}
		if len(msg.Frames) < 2 {
			s.run.protocolError(s.idx, "a message from a child without routing id or content")
			continue
		}
		id := string(msg.Frames[0])
		m, err := parseMessage(msg.Frames[1:])
		if err != nil {
			s.run.protocolError(s.idx, "from child %q: %v", id, err)
			continue
		}
		if m.kind == kindHello {
			s.hello(id, m)
			continue
		}
		s.mu.Lock()
		_, known := s.ids[id]
		s.mu.Unlock()
		if !known {
			// Flux drops what a peer sends before its hello succeeded.
			continue
		}
		switch m.kind {
		case kindJoined:
			s.forward(m.ranks)
		case kindPong:
			s.answer(m)
		default:
			s.run.protocolError(s.idx, "from child %q: unexpected %s message", id, m.kind)
		}
	}
}

// hello accepts or refuses a child.
func (s *standIn) hello(id string, m message) {
	reason, detail := s.admit(m)
	if reason != "" {
		s.sendChild(id, message{kind: kindRefuse, reason: reason, detail: detail})
		return
	}
	s.mu.Lock()
	s.children[m.rank] = id
	s.ids[id] = m.rank
	s.mu.Unlock()
	s.sendChild(id, message{kind: kindWelcome, id: s.idx})
	s.forward([]int{m.rank})
}

// admit applies the rules a flux-broker applies to a hello, which comes after the CURVE
// handshake proved the certificate: the hostname at the claimed rank in this broker's own
// hosts, and that rank being its child in its own topology. It returns "" to accept; a refusal
// says what flux-core's overlay logs when it refuses the same hello.
func (s *standIn) admit(m message) (Reason, string) {
	hosts := s.boot.Hosts
	hostAt := func(rank int) string {
		if rank < 0 || rank >= len(hosts) {
			return "(null)" // what flux_get_hostbyrank gives a rank it does not know
		}
		return hosts[rank].Name
	}
	switch {
	case hostAt(m.rank) != m.hostname:
		return ReasonHostname, fmt.Sprintf("rejecting connection from %s (rank %d): %s is configured as rank %d: mismatched config?",
			m.hostname, m.rank, hostAt(m.rank), m.rank)
	case s.boot.Parent(m.rank) != s.place.Rank:
		return ReasonNotChild, fmt.Sprintf("rejecting connection from %s (rank %d): rank %d is not a child of rank %d: mismatched config? (in its topology %s, rank %d's parent is %d)",
			hostAt(m.rank), m.rank, m.rank, s.place.Rank, topologyName(s.place.Topology), m.rank, s.boot.Parent(m.rank))
	}
	s.mu.Lock()
	_, online := s.children[m.rank]
	s.mu.Unlock()
	if online {
		return ReasonDuplicate, fmt.Sprintf("rank %d (%s) is online at %s already, through another connection", m.rank, m.hostname, fmt.Sprintf("%s (rank %d)", s.spec.Hostname, s.place.Rank))
	}
	return "", ""
}

func topologyName(t string) string {
	if t == "" {
		return "custom (the default)"
	}
	return t
}

// forward passes ranks that joined this broker's subtree on toward rank 0, once this broker
// is accepted itself.
func (s *standIn) forward(ranks []int) {
	r := s.run
	if s.place.Rank == 0 {
		if r.root == s {
			r.addOnline(ranks)
		}
		return // a second rank 0 leads an instance of its own
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.accepted {
		s.queue = append(s.queue, ranks...)
		return
	}
	s.sendParent(message{kind: kindJoined, ranks: ranks})
}

// route passes a request from rank 0 on toward its target through the child this broker's
// own topology names, or answers it.
func (s *standIn) route(m message) {
	me := fmt.Sprintf("%s (rank %d)", s.spec.Hostname, s.place.Rank)
	reply := func(ok bool, detail string) {
		s.answer(message{kind: kindPong, seq: m.seq, rank: m.rank, ok: ok, detail: detail})
	}
	if m.rank == s.place.Rank {
		reply(true, s.spec.Hostname)
		return
	}
	child := s.boot.ChildRoute(s.place.Rank, m.rank)
	if child < 0 {
		reply(false, fmt.Sprintf("rank %d is not below %s in its topology %s", m.rank, me, topologyName(s.place.Topology)))
		return
	}
	s.mu.Lock()
	id, online := s.children[child]
	s.mu.Unlock()
	if !online {
		reply(false, fmt.Sprintf("%s routes rank %d through its child rank %d (%s) in its topology %s, and rank %d never joined it",
			me, m.rank, child, s.boot.Hosts[child].Name, topologyName(s.place.Topology), child))
		return
	}
	if !s.sendChild(id, m) {
		reply(false, fmt.Sprintf("%s could not pass the request on to rank %d", me, child))
	}
}

// answer passes an answer to a request from rank 0 back up, or on rank 0 delivers it.
func (s *standIn) answer(m message) {
	if s.place.Rank == 0 {
		if s.run.root == s {
			s.run.deliver(m)
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sendParent(m)
}

// sendParent sends m to the parent; s.mu is held, which keeps the messages in order.
func (s *standIn) sendParent(m message) {
	if err := s.dealer.Send(zmq4.NewMsgFrom(m.frames()...)); err != nil && !s.run.over() {
		s.run.protocolError(s.idx, "sending a %s message to its parent: %v", m.kind, err)
	}
}

// sendChild sends m to the child of routing id, and reports whether it could.
func (s *standIn) sendChild(id string, m message) bool {
	frames := append([][]byte{[]byte(id)}, m.frames()...)
	if err := s.router.Send(zmq4.NewMsgFrom(frames...)); err != nil {
		if s.run.over() {
			return false
		}
		s.run.protocolError(s.idx, "sending a %s message to child %q: %v", m.kind, id, err)
		return false
	}
	return true
}
