package brokersim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/fluxfed/fluxfed/e2e/brokersim/curvezmq"
	"github.com/fluxfed/fluxfed/e2e/clusters"
)

// Broker is one broker pod as a stand-in starts it.
type Broker struct {
	// Cluster is the cluster the pod runs in, as the Network names it.
	Cluster string
	// Hostname is the pod's hostname, which the broker looks up in its hosts.
	Hostname string
	// BrokerTOML is the broker's configuration file.
	BrokerTOML []byte
	// CurveCert is the certificate file (the curve.cert key of the curve Secret).
	CurveCert []byte
}

// Reason says why a broker did not join, or was not reachable from rank 0.
type Reason string

// The reasons of a Failure.
const (
	// ReasonConfig: the broker does not start; its broker.toml or certificate is refused.
	ReasonConfig Reason = "config"
	// ReasonRankZero: the broker finds itself at rank 0 although another broker of the run
	// does too; it leads an instance of its own.
	ReasonRankZero Reason = "rank-zero"
	// ReasonBind: the broker has children but cannot bind its bind URI.
	ReasonBind Reason = "bind"
	// ReasonUnresolved: the parent's connect address does not resolve from the broker's
	// cluster (a name of another cluster, a parent that is not rank 0 in another cluster).
	ReasonUnresolved Reason = "unresolved"
	// ReasonNotListening: the address resolves, but no broker listens there: the broker at
	// that address has no children in its own view, does not bind that port, or did not start.
	ReasonNotListening Reason = "not-listening"
	// ReasonConnect: the connect URI is not usable, or the connection failed.
	ReasonConnect Reason = "connect"
	// ReasonCertificate: the CURVE handshake with the parent failed: the broker's certificate
	// differs from its parent's.
	ReasonCertificate Reason = "certificate"
	// ReasonHostname: the parent refused the hello, its hosts list another host at the rank
	// the broker claims.
	ReasonHostname Reason = "hostname"
	// ReasonNotChild: the parent refused the hello, the rank is not its child in its own
	// topology.
	ReasonNotChild Reason = "not-a-child"
	// ReasonDuplicate: the parent refused the hello, another broker holds that rank already.
	ReasonDuplicate Reason = "duplicate"
	// ReasonOrphaned: the broker joined its parent, but the parent's chain to rank 0 is broken.
	ReasonOrphaned Reason = "orphaned"
	// ReasonUnreachable: rank 0 knows the rank is online, but a request from rank 0, routed
	// down the tree by each broker's own topology, does not reach it.
	ReasonUnreachable Reason = "unreachable"
	// ReasonProtocol: a stand-in received a message it cannot read, or could not send one.
	ReasonProtocol Reason = "protocol"
	// ReasonTimeout: the context ended before the broker joined or failed.
	ReasonTimeout Reason = "timeout"
)

// refusals are the reasons a parent answers a hello with.
var refusals = []Reason{ReasonHostname, ReasonNotChild, ReasonDuplicate}

// Failure is a broker that did not join rank 0's overlay, or a rank rank 0 cannot reach.
type Failure struct {
	Cluster string
	// Host is the broker's hostname.
	Host string
	// Rank is the rank the broker claims (for ReasonUnreachable, the rank rank 0 asked for);
	// -1 when it does not know its rank.
	Rank   int
	Reason Reason
	// Detail says what exactly happened, naming the peer.
	Detail string
}

// Error returns "<host> (rank <rank>, cluster <cluster>): <reason>: <detail>".
func (f Failure) Error() string {
	return fmt.Sprintf("%s (rank %d, cluster %s): %s: %s", f.Host, f.Rank, f.Cluster, f.Reason, f.Detail)
}

// Result is what a Run observed.
type Result struct {
	// Root is the hostname of the broker that leads the instance (rank 0); "" when no broker
	// finds itself at rank 0.
	Root string
	// Hosts are rank 0's hosts in rank order.
	Hosts []string
	// Online are the ranks rank 0 learned joined the overlay, ascending, 0 included.
	Online []int
	// Reachable are the ranks that answered a request from rank 0, ascending, 0 included.
	Reachable []int
	// Failures are the brokers that did not join, and the online ranks rank 0 cannot reach,
	// sorted by cluster and host.
	Failures []Failure
	// TimedOut is set when the context ended before every broker joined or failed; rank 0
	// then sends no requests and Reachable is empty.
	TimedOut bool
	// JoinTime is the time from the start of Run until every broker had joined or failed and
	// rank 0 had heard of every join.
	JoinTime time.Duration
	// Elapsed is the time from the start of Run until rank 0's requests were answered.
	Elapsed time.Duration
}

// Complete reports whether every host of rank 0 answered its request.
func (r *Result) Complete() bool {
	return r.Root != "" && len(r.Hosts) > 0 && len(r.Reachable) == len(r.Hosts)
}

// Missing returns the hosts of rank 0 that did not answer its request, in rank order.
func (r *Result) Missing() []string {
	var out []string
	for rank, h := range r.Hosts {
		if !slices.Contains(r.Reachable, rank) {
			out = append(out, h)
		}
	}
	return out
}

// FailureOf returns the first failure of host, and false when it has none.
func (r *Result) FailureOf(host string) (Failure, bool) {
	for _, f := range r.Failures {
		if f.Host == host {
			return f, true
		}
	}
	return Failure{}, false
}

// Err returns nil for a complete run, else an error listing what is missing and every failure.
func (r *Result) Err() error {
	if r.Complete() {
		return nil
	}
	var b strings.Builder
	if r.Root == "" {
		b.WriteString("no broker is rank 0")
	} else {
		fmt.Fprintf(&b, "%d of %d ranks reachable from rank 0 (%s); missing %s", len(r.Reachable), len(r.Hosts), r.Root, strings.Join(r.Missing(), ","))
	}
	if r.TimedOut {
		b.WriteString(" (timed out)")
	}
	for _, f := range r.Failures {
		b.WriteString("\n  " + f.Error())
	}
	return errors.New(b.String())
}

// Run starts a stand-in for every broker, in-process, on loopback sockets reached through
// network, and waits until every broker has joined or failed and rank 0 has heard of every
// join, or until ctx ends: give ctx a deadline. Then rank 0 sends a request to every online
// rank. Run returns what it observed, once every stand-in ended; its error is for invalid
// arguments only (no network, a broker without cluster or hostname, two brokers of one name in
// one cluster).
func Run(ctx context.Context, brokers []Broker, network *Network) (*Result, error) {
	sim, err := Start(ctx, brokers, network)
	if err != nil {
		return nil, err
	}
	sim.Close()
	return sim.Result(), nil
}

// Sim is a run whose stand-ins go on serving after Start observed them, until Close: rank 0
// and the lead broker's NodePort answer whoever greets them meanwhile, such as the hub's probe
// of the lead broker.
type Sim struct {
	run    *run
	result *Result
	// cancel ends the stand-ins' sockets.
	cancel context.CancelFunc
	once   sync.Once
}

// Start does what Run does, but returns with the stand-ins still serving: call Close. The
// stand-ins' sockets outlive ctx, which bounds only the wait for the brokers to join.
func Start(ctx context.Context, brokers []Broker, network *Network) (*Sim, error) {
	if network == nil {
		return nil, errors.New("brokersim: no network")
	}
	seen := map[[2]string]bool{}
	for _, b := range brokers {
		key := [2]string{b.Cluster, b.Hostname}
		switch {
		case b.Cluster == "" || b.Hostname == "":
			return nil, fmt.Errorf("brokersim: broker %q in cluster %q: a broker needs a cluster and a hostname", b.Hostname, b.Cluster)
		case seen[key]:
			return nil, fmt.Errorf("brokersim: two brokers are named %s in cluster %s", b.Hostname, b.Cluster)
		}
		seen[key] = true
	}
	start := time.Now()
	sockets, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := newRun(sockets, brokers, network)
	sim := &Sim{run: r, cancel: cancel, result: &Result{}}
	if ctx.Err() != nil {
		// Ended before it began: no broker started.
		sim.result.TimedOut = true
		r.fill(sim.result)
		return sim, nil
	}
	r.prepare(sockets)
	r.start(sockets)
	select {
	case <-r.settled:
	case <-ctx.Done():
		sim.result.TimedOut = true
	}
	sim.result.JoinTime = time.Since(start)
	if !sim.result.TimedOut {
		r.ping(ctx)
	}
	r.fill(sim.result)
	sim.result.Elapsed = time.Since(start)
	return sim, nil
}

// Result returns what Start observed.
func (s *Sim) Result() *Result { return s.result }

// Addr returns the loopback address where the stand-in of l listens, and whether one does:
// the backend for a NodePort that leads to it.
func (s *Sim) Addr(l Listener) (string, bool) {
	addr, ok := s.run.listeners[l]
	return addr, ok
}

// Close ends every stand-in and closes the lead broker's NodePort, and returns once they
// ended. It may be called more than once.
func (s *Sim) Close() {
	s.once.Do(func() {
		s.cancel()
		s.run.shutdown()
	})
}

type status int

const (
	pending status = iota
	joined
	failed
)

// run is the state of one Run: the stand-ins, and what the runner knows of all of them to
// tell when the overlay has settled and to report.
type run struct {
	network *Network
	specs   []Broker
	// standIns holds the started stand-ins; nil for a broker that did not start.
	standIns []*standIn
	// listeners maps every bound listener to its loopback address; written by prepare only.
	listeners map[Listener]string
	// leads are the lead addresses on loopback whose NodePort the run serves, and how; written
	// by prepare only.
	leads map[hostPort]servedLead
	// ctx is the context of the stand-ins' sockets, canceled when the run ends.
	ctx context.Context
	// logger takes what zmq4 logs.
	logger *log.Logger
	wg     sync.WaitGroup

	mu       sync.Mutex
	status   []status
	parentOf []int // the index of the broker that accepted each broker, -1
	rank     []int // the rank each broker claims, -1 unknown
	root     *standIn
	online   map[int]bool
	failures []Failure
	settled  chan struct{}
	done     bool
	// reachable and pongs are rank 0's requests: the answered ranks, and the waiter of every
	// request in flight, by sequence number.
	reachable map[int]bool
	pongs     map[int]chan message
}

func newRun(ctx context.Context, specs []Broker, network *Network) *run {
	n := len(specs)
	r := &run{
		ctx:       ctx,
		network:   network,
		specs:     specs,
		standIns:  make([]*standIn, n),
		listeners: map[Listener]string{},
		leads:     map[hostPort]servedLead{},
		logger:    log.New(io.Discard, "", 0),
		status:    make([]status, n),
		parentOf:  make([]int, n),
		rank:      make([]int, n),
		online:    map[int]bool{},
		settled:   make(chan struct{}),
		reachable: map[int]bool{},
		pongs:     map[int]chan message{},
	}
	for i := range n {
		r.parentOf[i], r.rank[i] = -1, -1
	}
	return r
}

// prepare reads every configuration and binds the listener of every broker with children, so
// that no broker connects before its parent listens.
func (r *run) prepare(ctx context.Context) {
	for i, spec := range r.specs {
		place, boot, err := locate(spec.BrokerTOML, spec.Hostname)
		if err != nil {
			r.fail(i, ReasonConfig, "%v", err)
			continue
		}
		r.rank[i] = place.Rank
		s := &standIn{run: r, idx: i, spec: spec, place: place, boot: boot, children: map[int]string{}, ids: map[string]int{}}
		if place.Size > 1 {
			if s.keys, err = CertificateKeys(spec.CurveCert); err != nil {
				r.fail(i, ReasonConfig, "the broker refuses its certificate: %v", err)
				continue
			}
		}
		if place.Rank == 0 {
			if r.root != nil {
				r.fail(i, ReasonRankZero, "%s finds itself at rank 0 of its own instance, and %s is rank 0 already", spec.Hostname, r.root.spec.Hostname)
			} else {
				r.root = s
				r.status[i] = joined
				r.online[0] = true
				r.reachable[0] = true
			}
		}
		if len(place.Children) > 0 {
			if err := s.bind(ctx); err != nil {
				r.fail(i, ReasonBind, "%v", err)
				continue
			}
		}
		if place.Rank > 0 {
			s.dealer = zmq4.NewDealer(ctx, zmq4.WithLogger(r.logger), zmq4.WithID(zmq4.SocketIdentity(s.id())),
				zmq4.WithSecurity(curvezmq.Flux(s.keys)), zmq4.WithDialerRetry(10*time.Millisecond), zmq4.WithDialerMaxRetries(2))
		}
		r.standIns[i] = s
	}
	r.serveLeads()
	r.mu.Lock()
	r.check()
	r.mu.Unlock()
}

// start runs every stand-in.
func (r *run) start(ctx context.Context) {
	for _, s := range r.standIns {
		if s == nil {
			continue
		}
		if s.router != nil {
			r.wg.Go(s.serveChildren)
		}
		if s.dealer != nil {
			r.wg.Go(func() { s.join(ctx) })
		}
	}
}

// servedLead is a lead broker address whose NodePort a run serves: the forwarder to rank 0's
// listener, or why there is none.
type servedLead struct {
	forwarder *clusters.Forwarder
	err       error
}

// serveLeads serves the NodePort of every lead on loopback whose target listens, as kube-proxy
// would on the lead's node, so that the brokers that connect to it, and whatever else greets it
// while the run lasts, really go through the node's address and port.
func (r *run) serveLeads() {
	for key, target := range r.network.leads {
		backend, listening := r.listeners[target]
		if !key.onLoopback() || !listening {
			continue
		}
		f, err := clusters.ForwardNodePort([]string{key.host}, key.port, backend)
		r.leads[key] = servedLead{forwarder: f, err: err}
	}
}

// shutdown closes every socket, which ends every stand-in, and the lead brokers' NodePorts; the
// context of the sockets must be canceled already.
func (r *run) shutdown() {
	for _, l := range r.leads {
		if l.forwarder != nil {
			// Closing ends the connections it carries, which is what is asked of it here.
			_ = l.forwarder.Close()
		}
	}
	for _, s := range r.standIns {
		if s == nil {
			continue
		}
		for _, sock := range []zmq4.Socket{s.router, s.dealer} {
			if sock != nil {
				// Closing a socket whose context is canceled reports the closed connections,
				// which is what is asked of it here.
				_ = sock.Close()
			}
		}
	}
	r.wg.Wait()
}

// over reports whether the run has ended: a socket then fails to send because it is closing,
// which is no failure of the broker.
func (r *run) over() bool { return r.ctx.Err() != nil }

// fail records a broker that did not join.
func (r *run) fail(i int, reason Reason, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status[i] = failed
	r.failures = append(r.failures, Failure{Cluster: r.specs[i].Cluster, Host: r.specs[i].Hostname, Rank: r.rank[i], Reason: reason, Detail: fmt.Sprintf(format, args...)})
	r.check()
}

// protocolError records a message a broker could not read or send; the broker's state does
// not change.
func (r *run) protocolError(i int, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, Failure{Cluster: r.specs[i].Cluster, Host: r.specs[i].Hostname, Rank: r.rank[i], Reason: ReasonProtocol, Detail: fmt.Sprintf(format, args...)})
}

// joined records that the broker of index i was accepted by the broker of index parent.
func (r *run) joined(i, parent int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status[i] = joined
	if parent >= 0 && parent < len(r.specs) {
		r.parentOf[i] = parent
	}
	r.check()
}

// addOnline records ranks rank 0 learned joined.
func (r *run) addOnline(ranks []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rank := range ranks {
		r.online[rank] = true
	}
	r.check()
}

// check closes settled once every broker has joined or failed and rank 0 has heard of every
// broker whose chain of parents reaches it. r.mu is held.
func (r *run) check() {
	if r.done || slices.Contains(r.status, pending) {
		return
	}
	if r.root != nil {
		want := r.connected()
		if len(want) != len(r.online) {
			return
		}
		for rank := range want {
			if !r.online[rank] {
				return
			}
		}
	}
	r.done = true
	close(r.settled)
}

// connected returns the ranks of rank 0 and of every broker whose chain of parents reaches it.
// r.mu is held.
func (r *run) connected() map[int]bool {
	want := map[int]bool{0: true}
	for i := range r.specs {
		if r.chainEnd(i) == r.root.idx {
			want[r.rank[i]] = true
		}
	}
	return want
}

// chainEnd follows the parents of broker i from broker to broker, and returns the last one:
// rank 0's index when the chain reaches it, else the broker where it breaks. r.mu is held.
func (r *run) chainEnd(i int) int {
	for steps := 0; steps <= len(r.specs) && r.status[i] == joined && r.parentOf[i] >= 0; steps++ {
		i = r.parentOf[i]
	}
	return i
}

// ping sends a request from rank 0 to every online rank, and records which answer.
func (r *run) ping(ctx context.Context) {
	root := r.root
	if root == nil {
		return
	}
	r.mu.Lock()
	var targets []int
	for rank := range r.online {
		if rank > 0 {
			targets = append(targets, rank)
		}
	}
	r.mu.Unlock()
	sort.Ints(targets)
	waits := map[int]chan message{}
	for seq, target := range targets {
		ch := make(chan message, 1)
		r.mu.Lock()
		r.pongs[seq] = ch
		r.mu.Unlock()
		waits[target] = ch
		root.route(message{kind: kindPing, seq: seq, rank: target})
	}
	// Every hop answers at once, so a missing answer is lost, not late.
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	for _, target := range targets {
		select {
		case m := <-waits[target]:
			r.answer(target, m)
		case <-ctx.Done():
			r.answer(target, message{detail: "no answer to the request from rank 0"})
		}
	}
}

// requestTimeout bounds the wait for the answers to rank 0's requests.
const requestTimeout = 5 * time.Second

// deliver hands an answer that reached rank 0 to its waiter.
func (r *run) deliver(m message) {
	r.mu.Lock()
	ch, ok := r.pongs[m.seq]
	delete(r.pongs, m.seq)
	r.mu.Unlock()
	if ok {
		ch <- m
	}
}

// answer records the answer to rank 0's request to target.
func (r *run) answer(target int, m message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	hosts := r.root.boot.Hosts
	if m.ok && m.detail == hosts[target].Name {
		r.reachable[target] = true
		return
	}
	detail := m.detail
	if m.ok {
		detail = fmt.Sprintf("the request to rank %d was answered by %s", target, m.detail)
	}
	f := Failure{Host: hosts[target].Name, Rank: target, Reason: ReasonUnreachable, Detail: detail}
	for i := range r.specs {
		if r.rank[i] == target && r.chainEnd(i) == r.root.idx {
			f.Cluster = r.specs[i].Cluster
		}
	}
	r.failures = append(r.failures, f)
}

// fill writes what the run observed into res, after every stand-in ended.
func (r *run) fill(res *Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.root != nil {
		res.Root = r.root.spec.Hostname
		for _, h := range r.root.boot.Hosts {
			res.Hosts = append(res.Hosts, h.Name)
		}
		res.Online = sortedKeys(r.online)
		if !res.TimedOut {
			res.Reachable = sortedKeys(r.reachable)
		}
	}
	failures := r.failures
	for i, st := range r.status {
		spec := r.specs[i]
		f := Failure{Cluster: spec.Cluster, Host: spec.Hostname, Rank: r.rank[i]}
		switch {
		case st == pending:
			f.Reason = ReasonTimeout
			f.Detail = "neither joined nor failed before the deadline"
			if s := r.standIns[i]; s != nil && s.place.Parent >= 0 {
				f.Detail = fmt.Sprintf("no answer from its parent %s (rank %d) at %s before the deadline", s.place.ParentHost, s.place.Parent, s.place.Connect)
			}
		case st == joined && (r.root == nil || i != r.root.idx && r.chainEnd(i) != r.root.idx):
			end := r.chainEnd(i)
			f.Reason = ReasonOrphaned
			f.Detail = fmt.Sprintf("joined %s, but %s (cluster %s) is not connected to rank 0", r.specs[r.parentOf[i]].Hostname, r.specs[end].Hostname, r.specs[end].Cluster)
		default:
			continue
		}
		failures = append(failures, f)
	}
	sort.SliceStable(failures, func(a, b int) bool {
		if failures[a].Cluster != failures[b].Cluster {
			return failures[a].Cluster < failures[b].Cluster
		}
		return failures[a].Host < failures[b].Host
	})
	res.Failures = failures
}

func sortedKeys(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}
