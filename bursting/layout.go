// Package bursting plans how the brokers of a MiniCluster bootstrap, alone or as part of a
// federation of MiniClusters in several clusters: the rank-ordered hosts every side lists in its
// [bootstrap] table, which ranks are whose, and a TBON tree in which every broker can reach its
// parent. Everything here is pure: a MiniCluster in, a Layout out.
package bursting

import (
	"fmt"
	"strconv"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/hostlist"
)

// MaxHosts is the largest number of hosts a Layout may list. The schema bounds names but not
// sizes; this keeps a typo such as maxSize: 100000000 from making the reconciler build a list of
// a hundred million names. It is far above what one Flux instance runs on.
const MaxHosts = 1 << 16

// defaultLeadPort is leadBroker.port when it is unset; the schema defaults it to the same value.
const defaultLeadPort = 8050

// Group is a run of ranks whose brokers run together: the root's own pods, or the pods of one
// burst. Brokers of one group can reach each other; across groups only rank 0 is reachable
// (through the exposed lead broker), so the TBON tree never links two groups except through
// rank 0.
type Group struct {
	// Name is the MiniCluster whose pods hold these ranks: the root's name for the root's own
	// ranks, else the burst's name (which is also its child MiniCluster's name).
	Name string
	// Cluster is the member cluster of a burst entry; "" for the root's ranks and for reserved
	// bursts (those without a cluster, brought up by someone else).
	Cluster string
	// Start and End bound the group's ranks: [Start, End).
	Start, End int
	// Hardware is what Flux is told each node of the group has: for the root's ranks, what
	// the container that runs Flux says (ContainerHardware); for a burst, its entry's
	// resources, or the same as the root's without them. Every side computes the same
	// Hardware for a group, since a child runs the root's containers and repeats its list.
	Hardware Hardware
}

// Layout is how the brokers of one MiniCluster bootstrap: the rank-ordered hosts as they see
// them, which of those are this MiniCluster's own pods, and the TBON tree.
//
// The root of a federation and each of its burst children compute their own Layout from their
// own spec. They agree on every rank and every parent as long as the child's
// spec.flux.bursting.leadBroker.name and .size are the root's name and MaxSize, and its
// spec.flux.bursting.clusters and spec.flux.topology repeat the root's (names and reserved ranks
// in the same order). Keeping them so is the hub's job; nothing on the child side can check it.
type Layout struct {
	// Hosts are the rank-ordered hostnames exactly as in this MiniCluster's [bootstrap] hosts.
	// On a burst child Hosts[0] is the lead broker's address instead of the root's first pod.
	Hosts []string
	// Hostlist is Hosts compressed as an RFC 29 hostlist; R is encoded from exactly these hosts.
	Hostlist string
	// GlobalHostlist is the root side's hostlist (Hosts[0] = "<root>-0"): the same on every side
	// of a federation, for status.
	GlobalHostlist string
	// LocalStart and LocalEnd bound the ranks of this MiniCluster's own pods: pod index i has
	// rank LocalStart+i, for i < LocalEnd-LocalStart.
	LocalStart, LocalEnd int
	// Parents maps a rank to its parent rank for the ranks whose parent is not rank 0, in the
	// custom topology (Topology == ""). They are rendered as `parent` keys of the hosts entries.
	// Empty when Topology is set: Flux ignores parent keys under any other scheme.
	Parents map[int]int
	// Topology is the value for [tbon] topo; "" leaves Flux's default for a [bootstrap]
	// instance, custom, which follows Parents.
	Topology string
	// Quorum is how many brokers rank 0 waits for before it starts its work (the broker.quorum
	// attribute); 0 on a burst child, which has no rank 0.
	Quorum int
	// LeadAddress and LeadPort say where a burst child's brokers reach rank 0; empty and 0 on
	// the root.
	LeadAddress string
	LeadPort    int
	// Groups are the runs of ranks known to run together, in rank order. With a custom
	// spec.flux.bursting.hostlist only this MiniCluster's own ranks form a known group.
	Groups []Group

	// index maps each host to its rank.
	index map[string]int
	// topo is Topology parsed.
	topo topology
}

// NewLayout computes the Layout of mc. It assumes the schema defaults were applied.
//
// The root's hosts are its own MaxSize pods '<name>-<i>', then, for each entry of
// spec.flux.bursting.clusters in order, the ranks reserved for it, '<burst>-0' ..
// '<burst>-<maxSize-1>' (size-1 without maxSize), whether or not they run. A burst child
// (spec.flux.bursting.leadBroker set) lists the lead broker's address instead of the root's
// first pod, then '<leadName>-1' .. '<leadName>-<leadSize-1>' and the same bursts; its own pods
// hold the ranks of the entry named like the child. A spec.flux.bursting.hostlist replaces the
// computed hosts, as in the Flux Operator; this MiniCluster's pods must then appear in it, in
// order and next to each other.
//
// Unless spec.flux.topology says otherwise, the tree is flat under rank 0 for the root's own
// ranks and, for each burst, puts the burst's first broker under rank 0 and the rest of the
// burst under that first broker: one connection per burst crosses clusters.
//
// Every error it returns is a *SpecError, *HostError or *TopologyError (see IsInvalid): the
// spec must change before a layout exists.
func NewLayout(mc *fluxv1alpha2.MiniCluster) (*Layout, error) {
	if mc == nil {
		return nil, &SpecError{Field: "metadata", Reason: "no MiniCluster given"}
	}
	b := &builder{mc: mc, l: &Layout{}}
	if err := b.hosts(); err != nil {
		return nil, err
	}
	if err := b.index(); err != nil {
		return nil, err
	}
	if err := b.topology(); err != nil {
		return nil, err
	}
	return b.l, nil
}

// Rank returns the rank of host, or -1 when it is not in Hosts.
func (l *Layout) Rank(host string) int {
	if l.index != nil {
		if r, ok := l.index[host]; ok {
			return r
		}
		return -1
	}
	for r, h := range l.Hosts {
		if h == host {
			return r
		}
	}
	return -1
}

// Parent returns the TBON parent of rank under the layout's topology: Parents (or rank 0) in the
// custom topology, else the parent Flux computes for the Topology scheme. It returns -1 for
// rank 0 and for ranks outside Hosts.
func (l *Layout) Parent(rank int) int {
	if rank <= 0 || rank >= len(l.Hosts) {
		return -1
	}
	t := l.topo
	if l.index == nil { // a Layout not made by NewLayout
		var reason string
		if t, reason = parseTopology(l.Topology); reason != "" {
			return -1
		}
	}
	if t.scheme == topoCustom {
		if p, ok := l.Parents[rank]; ok {
			return p
		}
		return 0
	}
	return t.parent(rank, len(l.Hosts))
}

// GroupOf returns the group that holds rank, and false when no known group does (a host of a
// custom hostlist outside this MiniCluster).
func (l *Layout) GroupOf(rank int) (Group, bool) {
	if i := l.groupIndex(rank); i >= 0 {
		return l.Groups[i], true
	}
	return Group{}, false
}

func (l *Layout) groupIndex(rank int) int {
	for i, g := range l.Groups {
		if rank >= g.Start && rank < g.End {
			return i
		}
	}
	return -1
}

// builder computes a Layout step by step.
type builder struct {
	mc *fluxv1alpha2.MiniCluster
	l  *Layout
	// custom is set when the hosts come from spec.flux.bursting.hostlist.
	custom bool
}

// hosts fills Hosts, LocalStart/End, Groups, Quorum and the lead broker's endpoint.
func (b *builder) hosts() error {
	mc, l := b.mc, b.l
	if mc.Name == "" {
		return &SpecError{Field: "metadata.name", Reason: "is empty"}
	}
	if mc.Spec.Size < 1 {
		return &SpecError{Field: "spec.size", Reason: "must be at least 1"}
	}
	if mc.Spec.MinSize > mc.Spec.Size {
		return &SpecError{Field: "spec.minSize", Reason: fmt.Sprintf("%d is larger than spec.size %d", mc.Spec.MinSize, mc.Spec.Size)}
	}
	bursting := &mc.Spec.Flux.Bursting
	if lb := bursting.LeadBroker; lb != nil {
		if err := b.lead(lb); err != nil {
			return err
		}
	} else {
		// The root waits for its own minSize (or size) brokers only: not for the hosts it
		// reserves up to maxSize, nor for the bursts, which join whenever they come up.
		l.Quorum = int(mc.Spec.Size)
		if mc.Spec.MinSize > 0 {
			l.Quorum = int(mc.Spec.MinSize)
		}
	}
	if bursting.Hostlist != "" {
		b.custom = true
		return b.customHosts(bursting.Hostlist)
	}
	if lb := bursting.LeadBroker; lb != nil {
		return b.childHosts(lb)
	}
	return b.rootHosts()
}

// lead checks the lead broker's endpoint of a burst child.
func (b *builder) lead(lb *fluxv1alpha2.LeadBroker) error {
	const field = "spec.flux.bursting.leadBroker"
	if reason := checkHost(lb.Address); reason != "" {
		return &HostError{Field: field + ".address", Host: lb.Address, Reason: reason}
	}
	port := int(lb.Port)
	if port == 0 {
		port = defaultLeadPort
	}
	if port < 1 || port > 65535 {
		return &SpecError{Field: field + ".port", Reason: fmt.Sprintf("%d is not a TCP port (1-65535)", port)}
	}
	b.l.LeadAddress, b.l.LeadPort = lb.Address, port
	return nil
}

func (b *builder) rootHosts() error {
	mc, l := b.mc, b.l
	own := int(mc.MaxSize())
	if err := b.checkTotal(own); err != nil {
		return err
	}
	if err := b.addRange("metadata.name", mc.Name, 0, own); err != nil {
		return err
	}
	l.Groups = append(l.Groups, Group{Name: mc.Name, Start: 0, End: own, Hardware: ContainerHardware(mc.FluxContainer())})
	l.LocalStart, l.LocalEnd = 0, own
	return b.addBursts(mc.Name)
}

func (b *builder) childHosts(lb *fluxv1alpha2.LeadBroker) error {
	mc, l := b.mc, b.l
	const field = "spec.flux.bursting.leadBroker"
	rootSize := int(lb.Size)
	if rootSize < 1 {
		return &SpecError{Field: field + ".size", Reason: "must be at least 1 (the root's maxSize)"}
	}
	if lb.Name == "" {
		return &SpecError{Field: field + ".name", Reason: "is empty"}
	}
	if err := b.checkTotal(rootSize); err != nil {
		return err
	}
	// The root's first pod, as the global hostlist names it, must be a valid host too.
	if reason := checkHost(lb.Name + "-" + strconv.Itoa(rootSize-1)); reason != "" {
		return &HostError{Field: field + ".name", Host: lb.Name + "-" + strconv.Itoa(rootSize-1), Reason: reason}
	}
	l.Hosts = append(l.Hosts, lb.Address)
	if err := b.addRange(field+".name", lb.Name, 1, rootSize); err != nil {
		return err
	}
	// The child runs the root's containers, so the root's nodes are described from them too.
	l.Groups = append(l.Groups, Group{Name: lb.Name, Start: 0, End: rootSize, Hardware: ContainerHardware(mc.FluxContainer())})
	if err := b.addBursts(lb.Name); err != nil {
		return err
	}
	for _, g := range l.Groups[1:] {
		if g.Name != mc.Name {
			continue
		}
		if int(mc.MaxSize()) > g.End-g.Start {
			return &SpecError{Field: "spec.maxSize", Reason: fmt.Sprintf(
				"%d pods do not fit the %d ranks of the spec.flux.bursting.clusters entry %q", mc.MaxSize(), g.End-g.Start, g.Name)}
		}
		l.LocalStart, l.LocalEnd = g.Start, g.End
		return nil
	}
	return &SpecError{Field: "spec.flux.bursting.clusters", Reason: fmt.Sprintf(
		"no entry is named %q: a burst child must be named after its entry in the root's list, whose ranks its pods take", mc.Name)}
}

// addBursts appends the hosts of every spec.flux.bursting.clusters entry.
func (b *builder) addBursts(rootName string) error {
	clusters := b.mc.Spec.Flux.Bursting.Clusters
	total := len(b.l.Hosts)
	seen := make(map[string]int, len(clusters))
	for i, c := range clusters {
		field := fmt.Sprintf("spec.flux.bursting.clusters[%d]", i)
		switch j, dup := seen[c.Name]; {
		case c.Name == "":
			return &SpecError{Field: field + ".name", Reason: "is empty"}
		case dup:
			return &SpecError{Field: field + ".name", Reason: fmt.Sprintf("%q is also the name of clusters[%d]", c.Name, j)}
		case c.Name == rootName:
			return &SpecError{Field: field + ".name", Reason: fmt.Sprintf("%q is the root MiniCluster's name: their hostnames would collide", c.Name)}
		case c.Size < 0:
			return &SpecError{Field: field + ".size", Reason: "must be at least 0"}
		case c.MaxSize < 0:
			return &SpecError{Field: field + ".maxSize", Reason: "must be at least 1"}
		case c.MaxSize > 0 && c.Size > c.MaxSize:
			return &SpecError{Field: field + ".size", Reason: fmt.Sprintf("%d exceeds maxSize %d, the ranks reserved for the burst", c.Size, c.MaxSize)}
		case c.Reserved() < 1:
			return &SpecError{Field: field + ".size", Reason: "0 reserves no rank: set maxSize to reserve ranks for a burst that runs no broker yet"}
		}
		seen[c.Name] = i
		reserved := int(c.Reserved())
		total += reserved
		if err := b.checkTotal(total); err != nil {
			return err
		}
		start := len(b.l.Hosts)
		if err := b.addRange(field+".name", c.Name, 0, reserved); err != nil {
			return err
		}
		b.l.Groups = append(b.l.Groups, Group{
			Name: c.Name, Cluster: c.Cluster, Start: start, End: len(b.l.Hosts),
			Hardware: burstHardware(c, b.mc.FluxContainer()),
		})
	}
	return nil
}

// addRange appends name-from .. name-(to-1).
func (b *builder) addRange(field, name string, from, to int) error {
	if to <= from {
		return nil
	}
	// Every name of the range has the same characters; the last is the longest.
	if last := name + "-" + strconv.Itoa(to-1); checkHost(last) != "" {
		return &HostError{Field: field, Host: last, Reason: checkHost(last)}
	}
	for i := from; i < to; i++ {
		b.l.Hosts = append(b.l.Hosts, name+"-"+strconv.Itoa(i))
	}
	return nil
}

func (b *builder) checkTotal(n int) error {
	if n > MaxHosts {
		return &SpecError{Field: "spec", Reason: fmt.Sprintf("the instance would have %d hosts, more than the %d fluxfed supports", n, MaxHosts)}
	}
	return nil
}

// customHosts takes the hosts from spec.flux.bursting.hostlist.
func (b *builder) customHosts(s string) error {
	mc, l := b.mc, b.l
	const field = "spec.flux.bursting.hostlist"
	hl, err := hostlist.Parse(s)
	if err != nil {
		return &SpecError{Field: field, Reason: err.Error()}
	}
	if err := b.checkTotal(hl.Count()); err != nil {
		return err
	}
	l.Hosts = hl.Hosts()
	for _, h := range l.Hosts {
		if reason := checkHost(h); reason != "" {
			return &HostError{Field: field, Host: h, Reason: reason}
		}
	}
	own := int(mc.MaxSize())
	first := mc.Name + "-0"
	start := -1
	for r, h := range l.Hosts {
		if h == first {
			start = r
			break
		}
	}
	if start < 0 {
		return &SpecError{Field: field, Reason: fmt.Sprintf("does not list %s, the first pod of this MiniCluster", first)}
	}
	for i := range own {
		want := mc.Name + "-" + strconv.Itoa(i)
		if start+i >= len(l.Hosts) || l.Hosts[start+i] != want {
			return &SpecError{Field: field, Reason: fmt.Sprintf(
				"must list this MiniCluster's %d pods %s-0 .. %s-%d next to each other and in order, but %s is not at rank %d",
				own, mc.Name, mc.Name, own-1, want, start+i)}
		}
	}
	switch {
	case mc.IsBurstChild() && start == 0:
		return &SpecError{Field: field, Reason: fmt.Sprintf("lists %s first, but rank 0 of a burst child is the lead broker", first)}
	case !mc.IsBurstChild() && start != 0:
		return &SpecError{Field: field, Reason: fmt.Sprintf("must list %s first: pod 0 is the lead broker (rank 0)", first)}
	}
	l.LocalStart, l.LocalEnd = start, start+own
	l.Groups = []Group{{Name: mc.Name, Start: start, End: start + own, Hardware: ContainerHardware(mc.FluxContainer())}}
	return nil
}

// index builds the host index, refuses duplicates and writes the hostlists.
func (b *builder) index() error {
	l := b.l
	l.index = make(map[string]int, len(l.Hosts))
	for r, h := range l.Hosts {
		if first, dup := l.index[h]; dup {
			// Flux would merge the second appearance into the first, leaving one rank fewer
			// than the other sides count.
			field := "spec.flux.bursting"
			if b.custom {
				field += ".hostlist"
			}
			return &HostError{Field: field, Host: h, Reason: fmt.Sprintf("appears twice in the hosts (ranks %d and %d); Flux would merge them and shift every later rank", first, r)}
		}
		l.index[h] = r
	}
	l.Hostlist = hostlist.Compress(l.Hosts)
	l.GlobalHostlist = l.Hostlist
	if lb := b.mc.Spec.Flux.Bursting.LeadBroker; lb != nil && len(l.Hosts) > 0 {
		global := make([]string, len(l.Hosts))
		copy(global, l.Hosts)
		global[0] = lb.Name + "-0"
		l.GlobalHostlist = hostlist.Compress(global)
	}
	return nil
}

// topology fills Topology and Parents and checks that every broker can reach its parent.
func (b *builder) topology() error {
	mc, l := b.mc, b.l
	spec := mc.Spec.Flux.Topology
	t, reason := parseTopology(spec)
	if reason != "" {
		return &TopologyError{Topology: spec, Rank: -1, Parent: -1, Reason: reason}
	}
	l.topo = t
	l.Parents = map[int]int{}
	if t.scheme == topoCustom {
		// fluxfed's own tree: flat for the root's ranks, one subtree per burst hanging from the
		// burst's first broker. With a custom hostlist the places of other hosts are unknown,
		// so it stays flat, as in the Flux Operator.
		if !b.custom {
			for _, g := range l.Groups[1:] {
				for r := g.Start + 1; r < g.End; r++ {
					l.Parents[r] = g.Start
				}
			}
		}
		return nil
	}
	l.Topology = spec
	n := len(l.Hosts)
	local := l.groupIndex(l.LocalStart)
	for r := 1; r < n; r++ {
		p := t.parent(r, n)
		if p == 0 {
			continue
		}
		gr, gp := l.groupIndex(r), l.groupIndex(p)
		topoErr := &TopologyError{Topology: spec, Rank: r, Host: l.Hosts[r], Parent: p, ParentHost: l.Hosts[p]}
		switch {
		case gr < 0 || gp < 0:
			topoErr.Reason = "and fluxfed cannot tell whether they run in the same cluster (spec.flux.bursting.hostlist lists hosts of other clusters); " +
				"a broker outside this MiniCluster can only be given rank 0 as parent, so use a flat topology (kary:0) or leave spec.flux.topology empty"
		case gr != gp:
			topoErr.Reason = fmt.Sprintf("which runs in %s while the broker runs in %s; a broker can only reach rank 0 or brokers of its own MiniCluster, "+
				"so use a topology that keeps every burst under rank 0 or under itself, or leave spec.flux.topology empty for fluxfed's cluster-aware tree",
				describe(l.Groups[gp]), describe(l.Groups[gr]))
		case gr == local && mc.Spec.Flux.MinimalService && p != l.LocalStart:
			topoErr.Reason = "which has no DNS name because spec.flux.minimalService is set (only pod 0 has one); " +
				"unset spec.flux.minimalService or use a flat topology (kary:0)"
		default:
			continue
		}
		return topoErr
	}
	return nil
}

// describe names where a group runs, for error messages.
func describe(g Group) string {
	if g.Cluster != "" {
		return fmt.Sprintf("burst %s (cluster %s)", g.Name, g.Cluster)
	}
	if g.Start == 0 {
		return "the root MiniCluster " + g.Name
	}
	return "burst " + g.Name
}
