// Package members is the hub's member clusters: the MemberClusters of the hub, the kubeconfigs
// it may use to reach them, and what it knows of each.
//
// The Registry is the multicluster-runtime provider of the hub's manager. For every MemberCluster
// the Reconciler (the one writer of MemberCluster status) gives it the kubeconfig Secret's
// content; the Registry checks it, connects, and checks the member every few seconds in the
// background: the UID of its kube-system namespace (its cluster ID), its version and node count.
// A member is engaged with the manager's controllers only once it answers and is the first
// registration of its cluster; a member that stops answering turns NotReady after a few failed
// checks and stays engaged (nothing is deleted because a member was unreachable); a member that
// comes back starts a new epoch, so that what was pushed there is read again. Everything else in
// the hub asks the Registry for a member's State and never waits on a member that is not Ready.
//
// The hub runs other people's kubeconfigs: whoever can write a member Secret chooses what the hub
// executes, which of the hub's files it reads and sends, and how it talks to the member. A
// kubeconfig is therefore accepted only when everything the hub needs is inline in the Secret and
// the connection is verified TLS:
//
//   - exec and auth-provider plugins are refused: they run programs (or load cloud plugins) inside
//     the hub's pod with the hub's identity and environment.
//   - tokenFile, client-certificate, client-key and certificate-authority file paths are refused:
//     they name files on the hub's filesystem, so a Secret author could make the hub send the hub's
//     own service-account token, or present the hub's own certificates, to a server they pick. The
//     *-data fields and an inline token are accepted.
//   - username and password (basic auth) are refused: a static password sent on every request,
//     which Kubernetes has removed from the API server.
//   - insecure-skip-tls-verify is refused, and the server must be an https:// URL without user
//     information: the member's credentials must not travel where anyone on the path can read them.
//   - proxy-url is refused: the hub's egress (HTTPS_PROXY, NO_PROXY) is the hub operator's
//     decision, not the Secret author's, and a per-member proxy routes the hub's connections
//     through a host of the author's choosing.
//   - Impersonation (as, as-uid, as-groups, as-user-extra) is accepted: the member's API server
//     authorizes it against the member's RBAC for the given credentials, so it grants the hub
//     nothing the credentials could not already do, and it is a legitimate way to narrow a broad
//     credential to a dedicated identity.
//   - A kubeconfig without credentials (anonymous) is accepted: it is harmless to the hub, and the
//     member's API server refuses what anonymous may not do.
//
// Only the current context, its cluster and its user are checked, because they are all that
// clientcmd ever uses; other entries are never read. A kubeconfig without a current context is refused.
//
// # Which check the hub uses
//
// [Check] works on the Secret's bytes and gives users a reason: the Registry runs it on every
// kubeconfig before building anything from it, and a refusal becomes the MemberCluster's Ready
// condition (KubeconfigRefused) and the Failed state of every burst on it. Nothing is ever built
// from a kubeconfig Check refuses. [CheckRESTConfig] applies the same rules to what clientcmd
// built, as a second pass inside Check.
//
// [Limits] then gives every member client explicit client-side rate limits and a bounded connect
// time, and [AllowDial] restricts which networks the hub may dial at all.
//
// # Where things are
//
// registry.go is the Registry and the registering of members; options.go what it is built with and
// the limits every member client gets; health.go the background health check and what its result
// does to a member (its phase, its identity, which registration of a cluster is used); engage.go
// engaging a member's cluster with the manager's controllers, and disengaging it; state.go what
// the rest of the hub reads of a member (State, Snapshot). controller.go is the MemberCluster
// reconciler; lacks.go and conditions.go find and report what a member lacks; scope.go is where
// the hub watches on a member; check.go and dial.go are the kubeconfig checks and the networks
// the hub may dial.
package members
