// Package members decides whether the hub may use a member cluster's kubeconfig, and limits the
// client the hub builds from it.
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
// clientcmd (and so the multicluster-runtime kubeconfig provider) ever uses; other entries are
// never read. A kubeconfig without a current context is refused.
//
// # Which check the hub uses
//
// [Check] works on the Secret's bytes and is the one that gives users a reason: the hub's member
// reconciler calls it on every kubeconfig Secret, records a refusal as an event on the Secret and
// as a condition on every MiniCluster that targets the member, and treats the member as absent.
//
// [CheckRESTConfig] is the backstop inside the multicluster-runtime kubeconfig provider, which
// builds the member cluster on its own from the same Secret. It runs as the first entry of
// kubeconfig.Options.RESTOptions, after clientcmd.RESTConfigFromKubeConfig and before the provider
// builds any client. By then clientcmd has already opened the named certificate files to validate
// them and read a tokenFile into the config; the backstop still stops the hub from ever sending
// them or running a plugin, because no transport exists yet. That is why the hub must not rely on
// it alone: the provider's log line for a file that does not exist tells whoever reads the hub's
// logs whether that path exists on the hub.
//
// Whatever Check refuses, the provider refuses too (clientcmd fails, or the backstop refuses),
// except two settings that clientcmd ignores: a context naming a user that is not defined
// (clientcmd connects anonymously) and a client-key path without a client certificate (clientcmd
// never reads it). Check is the gate: the hub pushes nothing to a member whose kubeconfig Check
// refuses, whatever the provider did with it.
//
// [Limits] goes after the backstop in RESTOptions, so that every member client has explicit
// client-side rate limits and a bounded connect time.
package members
