// Package report is how every fluxfed controller tells what it observed: the MiniCluster
// reconciler of a member, the hub's root reconciler and the MemberCluster reconciler.
//
// A reconcile computes a status, and report writes it:
//
//   - Conditions says which conditions a controller owns, which of their moves are worth an
//     event and of what type; Changed tells whether a computed status differs from the stored
//     one, so that an unchanged object costs no write.
//   - Status writes the status with server-side apply under the controller's field owner, and
//     guards against a stale cache: an object whose status was written on the version the cache
//     still holds is not written again (the same status would be, with new transition times).
//   - Events holds the events of one reconcile until the status they describe is written, and
//     records them cut to what the events API accepts: a note or action that is too long would
//     lose the whole event.
//
// The reasons of the events sit beside the reasons of the conditions, in the API packages
// (api/v1alpha2 and api/fluxfed/v1alpha1).
package report
