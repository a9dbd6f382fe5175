// Package brokersim runs stand-in Flux brokers in-process to prove that the rendered broker
// configurations of a federation really join one TBON overlay, across clusters, where pods do
// not run (the e2e clusters simulate them with kwok). It is imported by tests only.
//
// A stand-in reads its pod's broker.toml and CURVE certificate file and finds its place as a
// flux-broker does (see shared/FLUX.md and [Locate]): its rank is the index of its hostname in
// the expanded hosts array, its parent comes from the parent keys or [tbon] topo, and its bind
// and connect URIs from the hosts entries and the [bootstrap] defaults with %h and %p
// substituted. The parsing is e2e/fluxcheck's (fluxcheck.ParseBootstrap).
//
// [Run] starts one stand-in per broker ([Start] too, and leaves them serving until Close). A
// broker with children binds a ZeroMQ ROUTER socket on its bind URI; every rank but 0 connects
// a DEALER socket to its parent's connect URI. Both sockets speak CURVE (e2e/brokersim/curvezmq)
// with the keypair of the certificate file the broker's pod mounts: as in Flux, the parent's
// long-term key is that public key, every child presents the same keypair, and a parent
// accepts only children that hold it, so a broker with another certificate fails the handshake.
// After the handshake the child says hello with its hostname and rank, and the parent accepts
// it only under the rules a flux-broker applies: the hostname is the one its own hosts array
// lists at that rank, and that rank is its child in its own topology. Each broker forwards the
// ranks of its subtree that joined it to its parent, so rank 0 learns every rank that joined
// ("online"). Since FLUX.md warns that online is no proof, rank 0 then sends a request to every
// online rank, routed down the tree by each broker's own topology, as the overlay routes
// requests; the ranks that answer are "reachable". Every broker that did not join is reported
// with a [Reason].
//
// Addresses are mapped to loopback by a [Network]: inside a cluster the headless Service names
// of that cluster's pods resolve, across clusters only the lead broker's exposed address and
// port do (to rank 0's listener), and anything else fails to resolve, as it would in reality.
// The lead broker's address is a node address of the local clusters, on loopback: there the
// run serves its NodePort for real, with the clusters' stand-in for kube-proxy
// (clusters.Forwarder) in front of rank 0's listener, and the brokers of the other clusters dial
// it. So does anything else that greets it while the stand-ins run, such as the hub's probe of
// the lead broker, which meets rank 0's CURVE socket. Every dial goes through e2e/netguard.
//
// e2e/realflux checks the stand-ins against real flux-core brokers of the same configs: the
// place every broker finds (rank, size, parent URI, whether it listens), the ranks that join,
// and the broker that does not, with its reason, for another certificate, a hosts array in
// another order and a hostname not in it.
//
// Differences from a real broker, on purpose:
//   - Only the CURVE handshake is real. zmq4 frames messages before its security mechanism
//     sees them, so the messages after the handshake are not boxed as CURVE MESSAGE commands:
//     a stand-in talks to stand-ins, not to libzmq, once the handshake is done.
//   - A broker whose handshake fails, or whose parent cannot be resolved, gives up at once
//     where a real broker retries forever, logging nothing; it is reported
//     ([ReasonCertificate] for a failed handshake) so that the failure shows. A broker whose
//     parent refuses its hello ends, as a real one does, and the reason is the line the real
//     parent logs. Every broker with children binds before any broker connects, so that a run settles as soon as
//     every broker has joined or failed.
//   - Names are routed in-process, not resolved: there is no DNS, and a stand-in listens on a
//     free port of 127.0.0.1, not on its pod's address and port. Only the lead broker's
//     NodePort is a real address.
//   - The version check of the hello is left out (every stand-in is the same version), and a
//     second hello for a rank already online is refused ([ReasonDuplicate]) where Flux would
//     drop the older connection.
//   - IPv6 and ipc:// URIs are not simulated.
package brokersim
