package bursting

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
)

// Endpoint is where members reach the root's rank 0: an address of the root's cluster (a node
// address for a NodePort Service, a load balancer's ingress, or spec.flux.bursting.expose.address)
// and the port that leads to the lead broker there.
type Endpoint struct {
	// Address is an IPv4 address or a DNS name; Flux accepts no IPv6 address as a host.
	Address string
	// Port is the TCP port at Address, 1-65535.
	Port int32
}

// String returns "address:port".
func (e Endpoint) String() string { return fmt.Sprintf("%s:%d", e.Address, e.Port) }

// Child is one burst the hub pushes: where, and what.
type Child struct {
	// Burst is the name of the spec.flux.bursting.clusters entry, which is also the child
	// MiniCluster's name and the prefix of its pods' hostnames.
	Burst string
	// Cluster is the member cluster the child is applied to, as the entry names it.
	Cluster string
	// Namespace is the child's namespace there: the entry's namespace, else the root's.
	Namespace string
	// Size is how many of the burst's brokers run now: the entry's size, 0 to Reserved. A burst
	// of size 0 has nothing on its member: the hub pushes its child once it runs brokers.
	Size int32
	// Reserved is how many ranks the instance reserves for the burst: the entry's maxSize, or
	// its size without one.
	Reserved int32
	// MiniCluster is the child as the hub applies it: named Burst in Namespace, carrying the
	// origin labels and annotation, with the spec described at NewPlan. It is not defaulted:
	// the member's API server fills in the schema defaults. Its spec.size is Size; for a burst
	// of size 0 it is the child as it starts, with one broker (see WithSize).
	MiniCluster *fluxv1alpha2.MiniCluster
	// Layout is the child's own Layout (NewLayout(MiniCluster)): its pods hold the ranks
	// Layout.LocalStart .. LocalEnd-1, the same ranks as the burst's hosts on the root side.
	// It is the same whatever the child's size: every broker of the burst boots from the same
	// hosts, so resizing the child restarts none.
	Layout *Layout
}

// WithSize returns the child MiniCluster as it runs size brokers: a copy of MiniCluster whose
// spec.size is size. Only the number of pods differs; every broker boots from the same
// configuration at any size. size must be 1 to Reserved.
func (c Child) WithSize(size int32) (*fluxv1alpha2.MiniCluster, error) {
	if size < 1 || size > c.Reserved {
		return nil, fmt.Errorf("burst %s cannot run %d brokers: it has %d ranks reserved, and runs at least 1 once it has a child", c.Burst, size, c.Reserved)
	}
	mc := c.MiniCluster.DeepCopy()
	mc.Spec.Size = size
	return mc, nil
}

// Plan is the federation of a root MiniCluster: its layout, the child MiniCluster of every burst
// that names a member cluster, and the hostlist all of them share.
type Plan struct {
	// Root is the root MiniCluster's Layout; its Groups list every burst, reserved or not.
	Root *Layout
	// Children are the bursts that name a cluster, in the order of spec.flux.bursting.clusters.
	// Reserved bursts (no cluster) have no child: their hosts are in every hostlist, and someone
	// else brings them up.
	Children []Child
	// GlobalHostlist is the rank-ordered hostlist of the whole instance, the same on every side:
	// '<root>-[0-(maxSize-1)]', then the ranks reserved for each burst, '<burst>-[0-(maxSize-1)]'
	// (or size-1 without maxSize), in declared order.
	GlobalHostlist string
	// Lead is the endpoint the children's brokers dial for rank 0.
	Lead Endpoint
}

// Child returns the child of the burst named burst, and false when no burst of that name
// names a cluster.
func (p *Plan) Child(burst string) (Child, bool) {
	for _, c := range p.Children {
		if c.Burst == burst {
			return c, true
		}
	}
	return Child{}, false
}

// NewPlan plans the federation of root, whose rank 0 the bursts reach at lead, for the hub
// identified by hub (the value of the origin-hub label). It assumes the schema defaults were
// applied to root.
//
// Each entry of spec.flux.bursting.clusters that names a cluster becomes a Child: a MiniCluster
// named after the entry, in the entry's namespace or the root's, labelled with
// fluxv1alpha2.LabelOriginHub (hub), LabelOriginNamespace and LabelOriginName (the root's) and
// annotated with AnnotationOriginUID (the root's UID); the root's own labels and annotations are
// not copied. Its spec is the root's, changed so that
// its pods run follower brokers only and join the root's instance:
//
//   - size is the entry's size (1 for a burst of size 0, which is not pushed until it runs
//     brokers) and maxSize the entry's maxSize; minSize and tasks are unset (the quorum and the
//     job's shape are the root's business).
//   - spec.flux.bursting holds only leadBroker {address, port: lead; name: the root's name;
//     size: the root's maxSize} and the root's clusters list, in the same order, each entry
//     with only its name, its reserved ranks as size and its resources (the hardware of its
//     nodes as Flux describes them), so that every side computes the same hostlist and the same
//     [resource] config, and no child changes when another burst is resized.
//   - The container that runs Flux loses what only the lead broker does: command, batch,
//     batchRaw, launcher and commands.brokerPre. Everything that shapes the environment a job
//     finds on a node stays: image, pull settings, workingDir, environment, secrets, volumes,
//     ports, resources, securityContext, lifeCycle, logs (FLUX_OUTPUT_DIR is set on every
//     broker), commands.init, pre, workerPre, post, prefix (it wraps every broker), and
//     commands.script (every broker writes it, because the job's tasks run it on every node).
//     The other containers are copied unchanged: the root runs them next to every broker, not
//     only next to rank 0.
//   - spec.services (a pod of the root's own), interactive, archive (rank 0's state),
//     flux.submitCommand and flux.optionFlags (the job's submission) are dropped; so is
//     flux.curveCert, which must not travel in a spec: the hub pushes the certificate as a
//     Secret.
//   - network.headlessName is the burst's name (prefixed with "b-" when the name starts with
//     a digit, since a Service name must start with a letter), not the root's: the headless
//     Service only resolves the child's own pods, and several children of one root may share a
//     namespace on a member, where each needs a Service of its own.
//   - Everything else is copied: the settings the sides must agree on (flux.topology,
//     flux.scheduler, flux.minimalService, flux.connectTimeout), the flux view, the broker's
//     options (logLevel, wrap, environment, disableSocket, completeWorkers, noWaitSocket,
//     mungeSecret, arch), logging, pod, resourceClaims, jobLabels, backoffLimit,
//     deadlineSeconds, cleanup, shareProcessNamespace, network.disableAffinity, and the
//     deprecated volumes and oversubscribe, which give the copied containers the meaning they
//     have on the root. Objects they name (Secrets, ConfigMaps, claims, a ServiceAccount, a
//     node's directories) must exist on the member.
//
// NewPlan lays out the root and every child with NewLayout and checks that every child puts
// every host at the root's rank (but rank 0, which a child names by lead.Address), gives
// every rank the root's parent and describes every group of ranks with the root's hardware.
//
// It returns a *SpecError, *HostError or *TopologyError for a root that cannot burst (as
// NewLayout, plus: a root that is itself a burst child, one without a namespace, one with
// spec.flux.brokerConfig or spec.flux.bursting.hostlist and bursts to push), an *EndpointError
// for a lead endpoint the bursts cannot dial, and a *FederationError if a child would disagree
// with the root; IsInvalid is true for all of them. The endpoint is only used, and checked,
// when some burst names a cluster. An invalid hub identity is the caller's mistake and gives a
// plain error.
func NewPlan(root *fluxv1alpha2.MiniCluster, lead Endpoint, hub string) (*Plan, error) {
	if err := checkHub(hub); err != nil {
		return nil, err
	}
	return newPlan(root, &lead, hub)
}

// checkHub checks that hub can be the value of the origin-hub label.
func checkHub(hub string) error {
	errs := validation.IsValidLabelValue(hub)
	if hub == "" {
		errs = append(errs, "must not be empty")
	}
	if len(errs) > 0 {
		return fmt.Errorf("hub identity %q cannot be the value of label %s: %s", hub, fluxv1alpha2.LabelOriginHub, strings.Join(errs, "; "))
	}
	return nil
}

// ValidateFederation checks that root can burst, before its lead endpoint is known: it returns
// the errors NewPlan would return for root with a valid endpoint, so that a hub can refuse a
// spec before it exposes the lead broker.
func ValidateFederation(root *fluxv1alpha2.MiniCluster) error {
	_, err := newPlan(root, nil, "validation")
	return err
}

// placeholderLead stands in for the lead endpoint when only the spec is validated; nothing dials
// it. It is a loopback address; pod hostnames have no dots, so it collides with none.
var placeholderLead = Endpoint{Address: "127.0.2.1", Port: defaultLeadPort}

// newPlan plans root; a nil lead validates the spec with a placeholder endpoint.
func newPlan(root *fluxv1alpha2.MiniCluster, lead *Endpoint, hub string) (*Plan, error) {
	if root == nil {
		return nil, &SpecError{Field: "metadata", Reason: "no MiniCluster given"}
	}
	if root.IsBurstChild() {
		return nil, &SpecError{Field: "spec.flux.bursting.leadBroker", Reason: "is set: a burst child joins another MiniCluster's instance and cannot lead a federation of its own"}
	}
	layout, err := NewLayout(root)
	if err != nil {
		return nil, err
	}
	p := &Plan{Root: layout, GlobalHostlist: layout.GlobalHostlist}
	pushed := slices.ContainsFunc(root.Spec.Flux.Bursting.Clusters, func(b fluxv1alpha2.Burst) bool { return b.Cluster != "" })
	if !pushed {
		if lead != nil {
			p.Lead = *lead
		}
		return p, nil
	}
	if err := checkPushable(root); err != nil {
		return nil, err
	}
	if lead == nil {
		lead = &placeholderLead
	} else if err := checkEndpoint(*lead, layout); err != nil {
		return nil, err
	}
	p.Lead = *lead
	for _, g := range layout.Groups[1:] {
		if g.Cluster == "" {
			continue
		}
		c, err := newChild(root, g, *lead, hub)
		if err != nil {
			return nil, err
		}
		if reason := agree(layout, c.Layout, g, *lead); reason != "" {
			return nil, &FederationError{Burst: g.Name, Reason: reason}
		}
		p.Children = append(p.Children, c)
	}
	return p, nil
}

// checkPushable refuses what a root with bursts to push cannot have.
func checkPushable(root *fluxv1alpha2.MiniCluster) error {
	switch {
	case root.Namespace == "":
		return &SpecError{Field: "metadata.namespace", Reason: "is empty: the children default to the root's namespace and carry it in their origin labels"}
	case root.Spec.Flux.BrokerConfig != "":
		return &SpecError{Field: "spec.flux.brokerConfig", Reason: "cannot be combined with bursts that name a cluster: " +
			"a burst child's broker.toml must list the lead broker's address as rank 0 and the parents of fluxfed's tree, so fluxfed renders it for every side"}
	case root.Spec.Flux.Bursting.Hostlist != "":
		return &SpecError{Field: "spec.flux.bursting.hostlist", Reason: "cannot be combined with spec.flux.bursting.clusters; set one of them"}
	}
	return nil
}

// checkEndpoint returns an *EndpointError when the brokers of a burst could not be told to dial
// lead: Flux must accept its address as a host, and the address must not be the hostname of a
// rank other than 0.
func checkEndpoint(lead Endpoint, root *Layout) error {
	bad := func(reason string) error {
		return &EndpointError{Address: lead.Address, Port: lead.Port, Reason: reason}
	}
	if lead.Port < 1 || lead.Port > 65535 {
		return bad("the port must be 1-65535")
	}
	if reason := checkHost(lead.Address); reason != "" {
		return bad("the address " + reason + "; it must be an IPv4 address or a DNS name")
	}
	// A name of digits and dots only is meant as an IPv4 address; a malformed one would be
	// taken for a DNS name and fail to resolve at connect time, silently.
	if strings.Trim(lead.Address, "0123456789.") == "" {
		if a, err := netip.ParseAddr(lead.Address); err != nil || !a.Is4() {
			return bad("the address is not a valid IPv4 address")
		}
	}
	if r := root.Rank(lead.Address); r > 0 {
		return bad(fmt.Sprintf("the address is also the hostname of rank %d; a burst child lists the address as rank 0, so it would appear twice in its hosts", r))
	}
	return nil
}

// newChild builds the child of the burst of group g and lays it out.
func newChild(root *fluxv1alpha2.MiniCluster, g Group, lead Endpoint, hub string) (Child, error) {
	var burst fluxv1alpha2.Burst
	for _, b := range root.Spec.Flux.Bursting.Clusters {
		if b.Name == g.Name {
			burst = b
			break
		}
	}
	namespace := ChildNamespace(root, burst)
	mc := &fluxv1alpha2.MiniCluster{
		TypeMeta: metav1.TypeMeta{APIVersion: fluxv1alpha2.GroupVersion.String(), Kind: "MiniCluster"},
		Spec:     childSpec(root, burst, lead),
	}
	mc.Name, mc.Namespace = burst.Name, namespace
	fluxv1alpha2.RootOrigin(hub, root).Mark(mc)
	layout, err := NewLayout(mc)
	if err != nil {
		// The child's spec repeats the root's, so its errors are about the root's fields too.
		return Child{}, fmt.Errorf("the child MiniCluster of burst %s: %w", burst.Name, err)
	}
	return Child{Burst: burst.Name, Cluster: burst.Cluster, Namespace: namespace, Size: burst.Size, Reserved: burst.Reserved(),
		MiniCluster: mc, Layout: layout}, nil
}

// ChildNamespace returns the namespace of a burst's child on its member: the burst's namespace,
// or the root's when it names none.
func ChildNamespace(root *fluxv1alpha2.MiniCluster, burst fluxv1alpha2.Burst) string {
	if burst.Namespace != "" {
		return burst.Namespace
	}
	return root.Namespace
}

// childSpec derives the spec of a burst's child from the root's, as NewPlan describes.
func childSpec(root *fluxv1alpha2.MiniCluster, burst fluxv1alpha2.Burst, lead Endpoint) fluxv1alpha2.MiniClusterSpec {
	spec := *root.Spec.DeepCopy()
	spec.Size = max(burst.Size, 1)
	spec.MaxSize, spec.MinSize, spec.Tasks = burst.MaxSize, 0, nil
	spec.Interactive = false
	spec.Services = nil
	spec.Archive = fluxv1alpha2.Archive{}
	spec.Network.HeadlessName = ChildHeadlessName(burst.Name)

	if flux := fluxContainer(spec.Containers); flux != nil {
		flux.Command = ""
		flux.Batch, flux.BatchRaw, flux.Launcher = false, false, false
		flux.Commands.BrokerPre = ""
	}

	f := &spec.Flux
	f.SubmitCommand, f.OptionFlags = "", ""
	f.CurveCert = ""
	clusters := make([]fluxv1alpha2.Burst, len(root.Spec.Flux.Bursting.Clusters))
	for i, b := range root.Spec.Flux.Bursting.Clusters {
		clusters[i] = fluxv1alpha2.Burst{Name: b.Name, Size: b.Reserved(), Resources: b.Resources.DeepCopy()}
	}
	f.Bursting = fluxv1alpha2.Bursting{
		LeadBroker: &fluxv1alpha2.LeadBroker{
			Address: lead.Address,
			Port:    lead.Port,
			Name:    root.Name,
			Size:    root.MaxSize(),
		},
		Clusters: clusters,
	}
	return spec
}

// fluxContainer returns the container that runs Flux, as fluxv1alpha2.MiniCluster.FluxContainer
// picks it.
func fluxContainer(containers []fluxv1alpha2.Container) *fluxv1alpha2.Container {
	mc := fluxv1alpha2.MiniCluster{Spec: fluxv1alpha2.MiniClusterSpec{Containers: containers}}
	return mc.FluxContainer()
}

// ChildHeadlessName returns spec.network.headlessName of the child of the burst named burst:
// the burst's name, or "b-<burst>" when it starts with a digit (a Service name must start with
// a letter). Burst names are unique within a root, so every child of a root gets its own
// headless Service even when several share a namespace on a member.
func ChildHeadlessName(burst string) string {
	if burst != "" && burst[0] >= '0' && burst[0] <= '9' {
		return "b-" + burst
	}
	return burst
}

// agree returns where the child's layout disagrees with the root's for the burst of group g,
// or "".
func agree(root, child *Layout, g Group, lead Endpoint) string {
	switch {
	case len(child.Hosts) != len(root.Hosts):
		return fmt.Sprintf("the child lists %d hosts, the root %d", len(child.Hosts), len(root.Hosts))
	case child.Hosts[0] != lead.Address || child.LeadAddress != lead.Address || child.LeadPort != int(lead.Port):
		return fmt.Sprintf("the child reaches rank 0 at %s:%d (host %s), not at the lead endpoint %s", child.LeadAddress, child.LeadPort, child.Hosts[0], lead)
	case child.GlobalHostlist != root.GlobalHostlist:
		return fmt.Sprintf("the child's hostlist %s differs from the root's %s", child.GlobalHostlist, root.GlobalHostlist)
	case child.Topology != root.Topology:
		return fmt.Sprintf("the child's topology %q differs from the root's %q", child.Topology, root.Topology)
	case child.LocalStart != g.Start || child.LocalEnd != g.End:
		return fmt.Sprintf("the child's pods hold ranks %d-%d, the burst's hosts are ranks %d-%d on the root", child.LocalStart, child.LocalEnd-1, g.Start, g.End-1)
	}
	for r := 1; r < len(root.Hosts); r++ {
		if child.Hosts[r] != root.Hosts[r] {
			return fmt.Sprintf("rank %d is %s on the child, %s on the root", r, child.Hosts[r], root.Hosts[r])
		}
		if cp, rp := child.Parent(r), root.Parent(r); cp != rp {
			return fmt.Sprintf("rank %d (%s) has parent %d on the child, %d on the root", r, root.Hosts[r], cp, rp)
		}
	}
	if len(child.Groups) != len(root.Groups) {
		return fmt.Sprintf("the child knows %d groups of ranks, the root %d", len(child.Groups), len(root.Groups))
	}
	for i, rg := range root.Groups {
		cg := child.Groups[i]
		if cg.Name != rg.Name || cg.Start != rg.Start || cg.End != rg.End || cg.Hardware != rg.Hardware {
			return fmt.Sprintf("the child describes ranks %d-%d as %s with %d cores and %d GPUs per node, the root as %s with %d cores and %d GPUs",
				cg.Start, cg.End-1, cg.Name, cg.Hardware.Cores, cg.Hardware.GPUs, rg.Name, rg.Hardware.Cores, rg.Hardware.GPUs)
		}
	}
	for r := g.Start; r < g.End; r++ {
		if p := root.Parent(r); p != 0 && (p < g.Start || p >= g.End) {
			return fmt.Sprintf("rank %d (%s) would have parent %d (%s), which runs in another cluster", r, root.Hosts[r], p, root.Hosts[p])
		}
	}
	return ""
}
