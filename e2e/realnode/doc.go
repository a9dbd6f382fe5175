// Package realnode runs real Kubernetes nodes on this machine for fluxfed's end-to-end tests:
// per node one containerd (Debian's, with runc) and one kubelet, with the pods on bridges, and
// what they all share per cluster, a Sandbox.
//
// # The network
//
// A Sandbox has a network namespace of its own, made by the harness (CreateNetns) and checked
// before anything starts in it (CheckIsolated): nothing but lo, no default route. Each node adds
// a bridge there with its pod range (Debian's bridge and host-local CNI plugins), the pods hang
// off the bridges, and forwarding is on inside the namespace (and only there), so that a pod on
// one node reaches a pod on another. The pods' addresses are outside 127.0.0.0/8 (the endpoint
// controllers refuse loopback pod addresses), but a packet to them, or from them to anywhere,
// has no way out of the namespace: there is no interface to leave by and no route to one.
//
// The daemons (containerd, kubelet, CoreDNS) run inside the namespace too: entered with
// `nsenter --net` only, since `ip netns exec` remounts /sys and hides the cgroups. The control
// plane stays where it was, on loopback of the test binary's namespace (which e2e/cmd/loopback
// makes with only lo). The two meet through the harness itself, which can open sockets in either
// namespace (a thread that enters one and ends, see Listen and Dialer): it listens inside the
// sandbox on 127.0.0.1 at the API server's port and passes each connection to the API server, so
// that the kubelets and CoreDNS use the cluster's kubeconfig unchanged; and it listens on each
// node's address in its own namespace at the kubelet's port and passes connections into the
// sandbox, where the kubelet serves, so that the API server reaches the kubelet for exec and
// logs. No veth pair, no route and no address outside 127.0.0.0/8 joins the namespaces: every
// byte between them goes through a process of this machine, and the sandbox keeps having no
// interface besides lo and its own bridges. The price is that the clusters' kubelets lose their
// API server when the program serving these connections ends.
//
// A node's address is on loopback (127.x.y.z) and is also its name: the kubelet refuses a
// loopback --node-ip but takes an IP given as --hostname-override as the node's InternalIP.
//
// # Cleaning up
//
// Everything a node starts runs in the Sandbox's cgroup, in every cgroup hierarchy: the daemons
// (placed there before they exec), the containers' shims (started by containerd, in its group)
// and the pods (the kubelet's cgroupRoot is under it). containerd and the kubelet run in a mount
// namespace of their own, so the overlay and shm mounts of the containers and the pods' volumes
// vanish with the last process in it. Removing a Sandbox kills its group and removes the
// namespace; a run killed before it could do so leaves a Sandbox whose owners no longer run,
// which the next NewSandbox, or RemoveStale, removes.
package realnode
