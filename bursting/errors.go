package bursting

import (
	"errors"
	"fmt"
)

// SpecError reports a MiniCluster spec that cannot be turned into a rank layout. Only a change of
// the spec fixes it, so the reconciler shows it as a condition instead of retrying.
type SpecError struct {
	// Field is the path of the offending field, for example "spec.flux.bursting.leadBroker.size".
	Field string
	// Reason says what is wrong, without the field.
	Reason string
}

// Error returns the field and the reason.
func (e *SpecError) Error() string { return e.Field + ": " + e.Reason }

// HostError reports a hostname that Flux would refuse in the hosts array of [bootstrap], or that
// would make two sides of a federation disagree on ranks.
type HostError struct {
	// Field is the spec field the host comes from, for example "metadata.name".
	Field string
	// Host is the offending hostname.
	Host string
	// Reason says what is wrong with it.
	Reason string
}

// Error names the field, the host and the reason.
func (e *HostError) Error() string {
	return fmt.Sprintf("%s: host %q %s", e.Field, e.Host, e.Reason)
}

// TopologyError reports a spec.flux.topology that Flux does not accept, or that would give some
// broker a TBON parent it cannot reach: a broker in another cluster than its own (other than
// rank 0, which is exposed to the bursts), or, with spec.flux.minimalService, a pod that has no
// DNS name.
type TopologyError struct {
	// Topology is spec.flux.topology as given.
	Topology string
	// Rank and Host are the first broker found whose parent is unreachable; Rank is -1 when
	// the topology itself is not valid.
	Rank int
	Host string
	// Parent and ParentHost are that broker's parent in the topology (-1 and "" when Rank is -1).
	Parent     int
	ParentHost string
	// Reason says why the topology cannot be used.
	Reason string
}

// Error names spec.flux.topology, the broker and its parent, and why.
func (e *TopologyError) Error() string {
	if e.Rank < 0 {
		return fmt.Sprintf("spec.flux.topology %q: %s", e.Topology, e.Reason)
	}
	return fmt.Sprintf("spec.flux.topology %q: rank %d (%s) would have parent rank %d (%s), %s",
		e.Topology, e.Rank, e.Host, e.Parent, e.ParentHost, e.Reason)
}

// EndpointError reports a lead broker endpoint that the brokers of a burst cannot be told to
// dial: an address Flux refuses as a host (an IPv6 address, a name with '_'), one that is also
// the hostname of another rank, or a port outside 1-65535. The endpoint comes from the Service
// that exposes rank 0 or from spec.flux.bursting.expose.address; a new endpoint fixes it, not a
// retry with the same one.
type EndpointError struct {
	// Address and Port are the endpoint as given.
	Address string
	Port    int32
	// Reason says what is wrong with it.
	Reason string
}

// Error names the endpoint and the reason.
func (e *EndpointError) Error() string {
	return fmt.Sprintf("lead broker endpoint %s:%d: %s", e.Address, e.Port, e.Reason)
}

// FederationError reports a burst whose child MiniCluster would not agree with the root on the
// ranks or the TBON tree of the instance. NewPlan checks every child's Layout against the
// root's before it returns a plan, so that a disagreement (a bug in the planning, since both
// come from one spec) stops the hub instead of producing brokers that never join.
type FederationError struct {
	// Burst names the spec.flux.bursting.clusters entry of the child.
	Burst string
	// Reason says where the child and the root disagree.
	Reason string
}

// Error names the burst and the disagreement.
func (e *FederationError) Error() string {
	return fmt.Sprintf("burst %s: %s", e.Burst, e.Reason)
}

// IsInvalid reports whether err (or an error it wraps) is one of the errors NewLayout and
// NewPlan return for a spec or lead endpoint they cannot plan: a *SpecError, *HostError,
// *TopologyError, *EndpointError or *FederationError. The same input always gives the same
// error, so retrying does not fix any of them and a reconciler can treat them as terminal.
func IsInvalid(err error) bool {
	var (
		specErr     *SpecError
		hostErr     *HostError
		topoErr     *TopologyError
		endpointErr *EndpointError
		fedErr      *FederationError
	)
	return errors.As(err, &specErr) || errors.As(err, &hostErr) || errors.As(err, &topoErr) ||
		errors.As(err, &endpointErr) || errors.As(err, &fedErr)
}
