// Package hub is the bursting federation, `fluxfed manager --hub`, on multicluster-runtime: on a
// hub cluster it exposes a root MiniCluster's lead broker, pushes a child MiniCluster and the
// root's CURVE certificate to the member cluster of every burst, reports each burst's state on
// the root, and removes the children when the root goes. User documentation: docs/bursting.md.
//
// The members are the hub's MemberClusters (package members: connection, health, identity and
// their status, owned by one reconciler); the hub asks it what each member's state is and never
// dials a member that is not Ready.
//
// A root flows through one reconcile in phases, one file each:
//
//   - controller.go: what wakes a root (the root, its lead broker Service, pod and CURVE Secret,
//     its MemberClusters, its children and their Secrets on the members), Reconcile, and the
//     helper that runs a step on every member at once with a per-member timeout.
//   - observe.go: the lead broker's endpoint and greeting, the plan, each burst's member state;
//     leadprobe.go greets the endpoints again between reconciles and wakes a root only when its
//     greeting changed.
//   - fluxview.go: what the root's Flux instance sees, asked with flux commands in the lead
//     broker's container (pods/exec), one ask at a time per root, backing off while nothing
//     changes; which bursts joined, and which do not. fluxstream.go follows an on-demand root's
//     instance through one long-lived exec session and wakes the root when a job or the
//     resources change, so that it is asked at once.
//   - scale.go: on-demand scaling: the sizes flux.Decide chooses, and the drains and undrains
//     it asks for, run before the children are pushed at those sizes.
//   - push.go: the lead broker Service, then each child and its Secret, through internal/apply:
//     each object named in the root's status before its first create, created with the hub's
//     proof, never written over what does not carry that proof for the root, not at all when
//     the member already holds it.
//   - delete.go: children of bursts that left a member, the finalizer on deletion, the orphan
//     sweep: only what carries the hub's proof, read first and deleted by UID.
//   - status.go: the root's status, computed from scratch by a pure function and written by
//     server-side apply (internal/report); events queued until the status they describe is
//     written.
//
// What every phase shares has a file of its own, so that a root's walk goes down the phases:
// federation.go (what one reconcile observed: the lead broker, the plan, each burst),
// memory.go (what the hub keeps of a root from one reconcile to the next, dropped at once by
// forget), fanout.go (a step on every member at once), writes.go (the exact deletes and apply
// helpers), errors.go (the hub's error types and reasonOf, which reads the condition reason of
// any of them), exec.go (running a command in a pod of the hub, as kubectl exec does) and
// wakes.go (the source through which the Flux followers and the lead prober wake a root). The
// status write, its stale-cache guard and the event queue are internal/report, which the
// member and MemberCluster reconcilers use too.
//
// proof.go is how the hub proves what it created on members (a keyed hash on every object, under
// a key kept in a Secret of the members namespace); ledger.go is the root's index of those
// objects, persisted in its status.pushed, which says where to look and proves nothing.
// leadbroker.go holds the lead broker: its Service (exposed first in a reconcile), advertised
// endpoint and greeting.
package hub
