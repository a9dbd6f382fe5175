package bursting

import (
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// GPUResources are the extended resources whose count is a node's GPUs for Flux.
var GPUResources = []corev1.ResourceName{"nvidia.com/gpu", "amd.com/gpu"}

// Hardware is what Flux is told each node of a group of ranks has: cores 0 .. Cores-1 and GPUs
// 0 .. GPUs-1.
type Hardware struct {
	// Cores is the number of cores per node; 0 means unknown.
	Cores int32
	// GPUs is the number of GPUs per node.
	GPUs int32
}

// Known reports whether the cores are known; GPUs default to none.
func (h Hardware) Known() bool { return h.Cores > 0 }

// ContainerHardware returns the hardware of a node that runs c as the container that runs
// Flux: c.cores when set, else the container's cpu limit (its request without a limit) rounded
// up to whole cores, and the GPUs of its limits (requests without limits) of GPUResources. The
// cores are unknown (0) when c is nil or none of those is set.
func ContainerHardware(c *fluxv1alpha2.Container) Hardware {
	if c == nil {
		return Hardware{}
	}
	var h Hardware
	if c.Cores > 0 {
		h.Cores = c.Cores
	} else if q, ok := quantity(c.Resources, corev1.ResourceCPU); ok && q.Sign() > 0 {
		h.Cores = clamp(ceilDiv(q.MilliValue(), 1000))
	}
	var gpus int64
	for _, name := range GPUResources {
		if q, ok := quantity(c.Resources, name); ok && q.Sign() > 0 {
			gpus += q.Value()
		}
	}
	h.GPUs = clamp(gpus)
	return h
}

// burstHardware returns the hardware of the nodes of burst b of a MiniCluster whose container
// that runs Flux is flux: b's resources when set, else the container's.
func burstHardware(b fluxv1alpha2.Burst, flux *fluxv1alpha2.Container) Hardware {
	if r := b.Resources; r != nil {
		return Hardware{Cores: r.Cores, GPUs: r.GPUs}
	}
	return ContainerHardware(flux)
}

// quantity returns the limit of name in r, or its request when it has no limit.
func quantity(r corev1.ResourceRequirements, name corev1.ResourceName) (resource.Quantity, bool) {
	if q, ok := r.Limits[name]; ok {
		return q, true
	}
	q, ok := r.Requests[name]
	return q, ok
}

func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return (a-1)/b + 1
}

// clamp bounds n to an int32. No node has 2^31 cores; a quantity that says so is passed on as
// the largest count, for Flux to refuse, rather than wrapped around.
func clamp(n int64) int32 {
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(n)
}

// ResourceGroup is one group of ranks as broker.toml describes it in [resource] config: its
// hosts, the hardware of each of them and the property that names the group.
type ResourceGroup struct {
	// Hosts are the group's hosts exactly as this side's Layout.Hosts names them, in rank
	// order: on a burst child the root's group starts with the lead broker's address.
	Hosts []string
	// Start and End bound the group's ranks: [Start, End).
	Start, End int
	// Hardware is what each host of the group has.
	Hardware Hardware
	// Property is the Flux property every host of the group gets: the group's name (the root's
	// name for the root's ranks, the burst's name for a burst).
	Property string
}

// ResourceGroups returns how this side describes the instance's resources in broker.toml.
//
// When the MiniCluster bursts (its Layout has more than one group), every rank belongs to a
// group and the cores of every group are known, it returns one ResourceGroup per group, in
// rank order: every side of a federation returns the same groups, with only its own name for
// rank 0. Otherwise groups is nil, and each broker describes every host with its own node's
// hardware (flux R encode --local); fallback then says why, unless the MiniCluster simply does
// not burst, when it is "".
func (l *Layout) ResourceGroups() (groups []ResourceGroup, fallback string) {
	if len(l.Groups) == 0 {
		return nil, "" // not a Layout of NewLayout's: nothing is known to burst
	}
	next := 0
	for _, g := range l.Groups {
		if g.Start != next && len(l.Groups) > 1 || g.End <= g.Start || g.End > len(l.Hosts) {
			return nil, fmt.Sprintf("the groups of ranks do not follow each other (%s holds ranks %d-%d after rank %d)", describe(g), g.Start, g.End-1, next-1)
		}
		next = g.End
	}
	if len(l.Groups) == 1 {
		g := l.Groups[0]
		if outside := len(l.Hosts) - (g.End - g.Start); outside > 0 {
			// A custom hostlist: only this MiniCluster's own ranks are known.
			return nil, fmt.Sprintf("the hardware of the %d hosts that spec.flux.bursting.hostlist lists outside this MiniCluster is unknown", outside)
		}
		return nil, "" // the MiniCluster does not burst
	}
	if next != len(l.Hosts) {
		return nil, fmt.Sprintf("ranks %d-%d belong to no group", next, len(l.Hosts)-1)
	}
	for _, g := range l.Groups {
		if !g.Hardware.Known() {
			return nil, fmt.Sprintf("the cores of %s are unknown: give the container that runs Flux resources.limits.cpu (or requests, or cores), or the burst resources.cores", describe(g))
		}
	}
	groups = make([]ResourceGroup, 0, len(l.Groups))
	for _, g := range l.Groups {
		groups = append(groups, ResourceGroup{
			Hosts:    l.Hosts[g.Start:g.End:g.End],
			Start:    g.Start,
			End:      g.End,
			Hardware: g.Hardware,
			Property: g.Name,
		})
	}
	return groups, ""
}
