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
// [Run] starts one stand-in per broker. A broker with children binds a ZeroMQ ROUTER socket on
// its bind URI; every rank but 0 connects a DEALER socket to its parent's connect URI and says
// hello with its hostname, its rank and the SHA-256 of its certificate's public key. The parent
// accepts the child only under the rules a flux-broker applies: the hostname is the one its own
// hosts array lists at that rank, that rank is its child in its own topology, and the
// certificate is its own. Each broker forwards the ranks of its subtree that joined it to its
// parent, so rank 0 learns every rank that joined ("online"). Since FLUX.md warns that online
// is no proof, rank 0 then sends a request to every online rank, routed down the tree by each
// broker's own topology, as the overlay routes requests; the ranks that answer are
// "reachable". Every broker that did not join is reported with a [Reason].
//
// Addresses are mapped to loopback by a [Network]: inside a cluster the headless Service names
// of that cluster's pods resolve, across clusters only the lead broker's exposed address and
// port do (to rank 0's listener), and anything else fails to resolve, as it would in reality.
//
// Differences from a real broker, on purpose:
//   - The sockets use ZeroMQ's NULL security (go-zeromq/zmq4), not CURVE: the certificate is
//     proven by the hash of its public key in the hello, not by encryption. A real broker with
//     another certificate fails the CURVE handshake silently and retries forever; the stand-in
//     is refused with [ReasonCertificate] instead, so that the failure shows.
//   - A refused or unresolvable broker gives up at once instead of retrying, and every broker
//     with children binds before any broker connects, so that a run settles as soon as every
//     broker has joined or failed.
//   - The version check of the hello is left out (every stand-in is the same version), and a
//     second hello for a rank already online is refused ([ReasonDuplicate]) where Flux would
//     drop the older connection.
//   - IPv6 and ipc:// URIs are not simulated.
package brokersim
