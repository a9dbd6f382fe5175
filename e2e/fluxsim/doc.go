// Package fluxsim is a stand-in for the flux command of a Flux instance's rank 0, for the e2e
// clusters, where pods are simulated (kwok) and no Flux can run. The hub runs flux in the lead
// broker's container through the exec API; kwok runs that command on this machine instead
// (e2e/clusters), with e2e/cmd/flux, the stand-in built from this package, first on PATH.
//
// The instance is a file: an [Instance] in a directory named by $FLUXFED_FLUXSIM, read and
// written under a lock by every invocation. Which ranks are online is not decided here: the
// e2e harness writes the ranks that joined rank 0 in the stand-in overlay (e2e/brokersim) with
// [SetOnline]. The queue is simulated: jobs submitted with `flux submit -N<n> [-n<n>] CMD...`
// wait (SCHED) until the online, undrained, unallocated ranks can run them, first come first
// served as sched-simple does, then run (RUN) for as many seconds as a `sleep N` command asks
// (a job of any other command ends at once), and end. Time is the wall clock: the state is
// advanced to now, event by event, whenever the instance is read or written, so that a job's
// times are what they would have been without anyone looking. A running job whose rank goes
// offline is killed, as real Flux kills it, and counted ([Instance.Killed]).
//
// What it prints is what flux-core 0.88.0 prints for the same state (shared/flux-fixtures):
//
//	flux uptime
//	flux resource status -n -o '{state} {up} {nnodes} {ranks} {nodelist}'
//	flux resource drain -n -o '{timestamp} {state} {ranks} {nodelist} {reason}'
//	flux jobs [-A] --json -f pending,running
//
// and it acts on `flux resource drain TARGETS REASON...`, `flux resource undrain TARGETS` and
// `flux submit`. It also runs the hub's follower (`flux python -c` with flux.FollowCommand's
// script, and no other python): [Follow] looks at the instance every [FollowPoll] and prints
// the lines real Flux's follower prints for what changed ([Changes]). The tests check the outputs against the fixtures byte for byte, and against
// real flux-core brokers driven through the same steps (e2e/realflux), refusals included:
// draining a drained rank without -f, undraining one that is not drained. Differences from
// Flux, on purpose: the ranks have cores but no GPUs; a job that asks for more nodes than the
// instance has is refused at submission; the scheduler cannot be stopped, and housekeeping
// and the broker states while an instance starts or stops are not simulated.
package fluxsim
