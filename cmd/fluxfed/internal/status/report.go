// Package status collects what `fluxfed status` shows of a MiniCluster, across the hub and its
// members, and renders it as text, JSON or YAML.
package status

import (
	"time"
)

// Report is what `fluxfed status` shows of one MiniCluster. Its JSON and YAML form is the output
// of `fluxfed status -o json|yaml`: fields are added, never renamed or removed.
type Report struct {
	// Cluster names the cluster the MiniCluster was read from: the kubeconfig context.
	Cluster   string `json:"cluster"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Role is "root" (a MiniCluster that may burst), or "burst child of NAME" for a child the
	// hub pushed to a member.
	Role string `json:"role"`
	// Size and MaxSize are the MiniCluster's own brokers: those that should run, and the ranks
	// it holds. Ready counts its ready broker pods.
	Size    int32 `json:"size"`
	MaxSize int32 `json:"maxSize"`
	Ready   int32 `json:"ready"`
	// LeadBroker is where the bursts reach rank 0: status.leadBroker on a root, the spec's
	// leadBroker on a child. Nil until the hub exposed it.
	LeadBroker *Endpoint `json:"leadBroker,omitempty"`
	// Hostlist is the instance's global hostlist, every reserved rank included.
	Hostlist string `json:"hostlist,omitempty"`
	// Ranks are the runs of ranks of the hostlist, whose brokers run together, with how many
	// of them run now.
	Ranks      []RankGroup `json:"ranks,omitempty"`
	Conditions []Condition `json:"conditions,omitempty"`
	// Flux is what the root's Flux instance says of itself, as the hub last asked it.
	Flux   *Flux   `json:"flux,omitempty"`
	Bursts []Burst `json:"bursts,omitempty"`
	// Pods are the broker pods of the MiniCluster and of its bursts' children, by rank.
	Pods []Pod `json:"pods,omitempty"`
	// Problems say what could not be read, such as a member that does not answer: the report
	// is then missing that member's pods.
	Problems []string `json:"problems,omitempty"`
}

// Endpoint is an address and a port.
type Endpoint struct {
	Address string `json:"address"`
	Port    int32  `json:"port"`
}

// RankGroup is a run of ranks of the hostlist held by one MiniCluster: the root's own pods, or
// a burst's.
type RankGroup struct {
	// Name is the MiniCluster (the root, or a burst's child) whose pods hold the ranks.
	Name string `json:"name"`
	// Cluster is the member cluster of a burst; empty for the MiniCluster's own ranks and for
	// bursts brought up by someone else.
	Cluster string `json:"cluster,omitempty"`
	// First and Last are the group's first and last rank.
	First int `json:"first"`
	Last  int `json:"last"`
	// Hosts are the group's hostnames, as a hostlist.
	Hosts string `json:"hosts"`
	// Running is how many of the group's ranks run a broker now (the first ones); the others are
	// reserved. Nil when it is not known (another burst, seen from a child).
	Running *int32 `json:"running,omitempty"`
}

// Condition is a condition of the MiniCluster.
type Condition struct {
	Type               string    `json:"type"`
	Status             string    `json:"status"`
	Reason             string    `json:"reason,omitempty"`
	Message            string    `json:"message,omitempty"`
	LastTransitionTime time.Time `json:"lastTransitionTime"`
}

// Flux is the root's Flux instance as rank 0 sees it.
type Flux struct {
	State        string `json:"state,omitempty"`
	Size         int32  `json:"size"`
	Online       int32  `json:"online"`
	PendingJobs  int32  `json:"pendingJobs"`
	PendingNodes int32  `json:"pendingNodes"`
	Message      string `json:"message,omitempty"`
}

// Burst is one burst of a root, as the hub reports it, with Flux's view of its ranks.
type Burst struct {
	Name      string `json:"name"`
	Cluster   string `json:"cluster,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Size      int32  `json:"size"`
	MaxSize   int32  `json:"maxSize"`
	Ready     int32  `json:"ready"`
	Phase     string `json:"phase,omitempty"`
	Online    int32  `json:"online"`
	Draining  int32  `json:"draining"`
	Drained   int32  `json:"drained"`
	Message   string `json:"message,omitempty"`
}

// Pod is a broker pod.
type Pod struct {
	// Rank is the pod's rank in the hostlist; -1 when its hostname is not in it.
	Rank      int    `json:"rank"`
	Cluster   string `json:"cluster"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Hostname  string `json:"hostname"`
	Node      string `json:"node,omitempty"`
	Phase     string `json:"phase"`
	Ready     bool   `json:"ready"`
}
