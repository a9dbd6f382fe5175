// Package member is the MiniCluster reconciler: it runs on every cluster, in single-cluster mode
// and on each member of a federation, and turns a MiniCluster into its CURVE Secret, ConfigMaps,
// headless Service and indexed Job, rendered by render.Render and applied through internal/apply
// under one field owner. It reports the MiniCluster's Ready, Complete and Failed conditions, and
// records events only after the status write they describe.
//
// Drift correction needs no polling: the owned objects are watched, so an object that someone
// else edits or deletes brings its MiniCluster back, and the applier sends what the observed
// object no longer holds. An unchanged MiniCluster costs no request. The CURVE Secret is the
// exception to "put back": its data is never rewritten; a deleted one is generated anew (with a
// Warning event) for a root, and awaited from the hub for a child.
//
// MiniClusters created in bulk (BulkCount or more within a window) are queued once the creations
// slow down (bulk.go): rendering each while the client that creates them is still at it would
// slow that client down, since each MiniCluster costs the API server more than its create did.
//
// A reconcile ends in one typed error: a *apply.Refusal or an invalid spec is terminal
// (reconcile.TerminalError, Failed=True) until the spec changes, except a Conflict, which is
// retried with backoff since the other object may go; waiting is reported, not failed.
package member
