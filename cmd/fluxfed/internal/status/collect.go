package status

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/bursting"
	"github.com/fluxfed/fluxfed/hostlist"
)

// MemberReaders gives a reader of a member cluster, by the name of its MemberCluster.
type MemberReaders interface {
	Reader(ctx context.Context, member string) (client.Reader, error)
}

// Source is where Collect reads.
type Source struct {
	// Cluster names the cluster Client reads, in the report.
	Cluster string
	// Client reads the cluster of the MiniCluster: the hub, for a root.
	Client client.Reader
	// Members reaches the members a root bursts onto; nil leaves the bursts' pods out.
	Members MemberReaders
}

// Collect reads the MiniCluster key from src.Client, and for a root the broker pods of its
// bursts from their members. Only a failure to read the MiniCluster itself is an error: what
// cannot be read of a member is said in the report's Problems.
func Collect(ctx context.Context, src Source, key client.ObjectKey) (*Report, error) {
	mc := &fluxv1alpha2.MiniCluster{}
	if err := src.Client.Get(ctx, key, mc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("MiniCluster %s not found in cluster %s", key, src.Cluster)
		}
		return nil, fmt.Errorf("reading MiniCluster %s: %w", key, err)
	}
	r := FromMiniCluster(src.Cluster, mc)

	pods, err := brokerPods(ctx, src.Client, mc.Namespace, mc.Name)
	if err != nil {
		r.Problems = append(r.Problems, fmt.Sprintf("%s: listing the broker pods: %v", src.Cluster, err))
	}
	r.addPods(src.Cluster, pods)
	if !mc.IsBurstChild() {
		for _, b := range mc.Status.Bursts {
			if b.Cluster == "" || b.Phase == fluxv1alpha2.BurstReserved {
				continue // nothing of it is on a member
			}
			if src.Members == nil {
				r.Problems = append(r.Problems, fmt.Sprintf("burst %s: member %s not read", b.Name, b.Cluster))
				continue
			}
			pods, err := childPods(ctx, src.Members, mc, b)
			switch {
			case apierrors.IsForbidden(err):
				// The member's access predates the pods rule, or its owner narrowed it.
				r.Problems = append(r.Problems, fmt.Sprintf("burst %s on %s: %v (the hub's identity there needs get and list on pods "+
					"in %s: apply this version's deploy/member-access on the member, or pass --member-context %s=CONTEXT)",
					b.Name, b.Cluster, err, b.Namespace, b.Cluster))
			case err != nil:
				r.Problems = append(r.Problems, fmt.Sprintf("burst %s on %s: %v", b.Name, b.Cluster, err))
			}
			r.addPods(b.Cluster, pods)
		}
	}
	slices.SortStableFunc(r.Pods, func(a, b Pod) int {
		return cmp.Or(cmp.Compare(uint(a.Rank), uint(b.Rank)), cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Name, b.Name))
	})
	return r, nil
}

// childPods reads the broker pods of burst b of root on its member, once its child there is
// known to be this root's: an object of the child's name that another root or someone else
// made is not looked into.
func childPods(ctx context.Context, members MemberReaders, root *fluxv1alpha2.MiniCluster, b fluxv1alpha2.BurstStatus) ([]corev1.Pod, error) {
	c, err := members.Reader(ctx, b.Cluster)
	if err != nil {
		return nil, err
	}
	child := &fluxv1alpha2.MiniCluster{}
	key := client.ObjectKey{Namespace: b.Namespace, Name: b.Name}
	if err := c.Get(ctx, key, child); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("no child MiniCluster %s", key)
		}
		return nil, fmt.Errorf("reading the child MiniCluster %s: %w", key, err)
	}
	if origin, ok := fluxv1alpha2.OriginOf(child); !ok || origin.UID != root.UID {
		return nil, fmt.Errorf("MiniCluster %s is not a child of this root (its %s annotation is %q)",
			key, fluxv1alpha2.AnnotationOriginUID, origin.UID)
	}
	return brokerPods(ctx, c, b.Namespace, b.Name)
}

func brokerPods(ctx context.Context, c client.Reader, namespace, name string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{fluxv1alpha2.LabelMiniCluster: name}); err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// FromMiniCluster is the report of mc alone, read from cluster, without pods.
func FromMiniCluster(cluster string, mc *fluxv1alpha2.MiniCluster) *Report {
	st := mc.Status
	r := &Report{
		Cluster:   cluster,
		Namespace: mc.Namespace,
		Name:      mc.Name,
		Role:      "root",
		Size:      mc.Spec.Size,
		MaxSize:   mc.MaxSize(),
		Ready:     st.Ready,
		Hostlist:  st.Hostlist,
	}
	switch {
	case mc.IsBurstChild():
		lb := mc.Spec.Flux.Bursting.LeadBroker
		r.Role = "burst child of " + lb.Name
		r.LeadBroker = &Endpoint{Address: lb.Address, Port: lb.Port}
	case st.LeadBroker != nil && st.LeadBroker.Address != "":
		r.LeadBroker = &Endpoint{Address: st.LeadBroker.Address, Port: st.LeadBroker.Port}
	}
	for _, c := range st.Conditions {
		r.Conditions = append(r.Conditions, Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason,
			Message: c.Message, LastTransitionTime: c.LastTransitionTime.UTC()})
	}
	if f := st.Flux; f != nil {
		r.Flux = &Flux{State: f.State, Size: f.Size, Online: f.Online, PendingJobs: f.PendingJobs,
			PendingNodes: f.PendingNodes, Message: f.Message}
	}
	for _, b := range st.Bursts {
		r.Bursts = append(r.Bursts, Burst{Name: b.Name, Cluster: b.Cluster, Namespace: b.Namespace, Size: b.Size,
			MaxSize: b.MaxSize, Ready: b.Ready, Phase: string(b.Phase), Online: b.Online, Draining: b.Draining,
			Drained: b.Drained, Message: b.Message})
	}
	r.Ranks = rankGroups(mc)
	return r
}

// rankGroups are the runs of ranks of mc's hostlist, as its reconciler lays them out, with how
// many run: the MiniCluster's own size, and on a root each burst's size as the hub reports it.
func rankGroups(mc *fluxv1alpha2.MiniCluster) []RankGroup {
	l, err := bursting.NewLayout(mc)
	if err != nil {
		return nil
	}
	hosts := l.Hosts
	// On a child, Hosts[0] is the lead broker's address; the status hostlist names rank 0.
	if global, err := hostlist.Expand(mc.Status.Hostlist); err == nil && len(global) == len(hosts) {
		hosts = global
	}
	running := map[string]int32{mc.Name: mc.Spec.Size}
	if !mc.IsBurstChild() {
		for _, b := range mc.Spec.Flux.Bursting.Clusters {
			running[b.Name] = b.Size
		}
		for _, b := range mc.Status.Bursts {
			running[b.Name] = b.Size
		}
	}
	var groups []RankGroup
	for _, g := range l.Groups {
		rg := RankGroup{Name: g.Name, Cluster: g.Cluster, First: g.Start, Last: g.End - 1, Hosts: hostlist.Compress(hosts[g.Start:g.End])}
		if g.Name == mc.Name {
			rg.Cluster = ""
		}
		if n, ok := running[g.Name]; ok {
			rg.Running = &n
		}
		groups = append(groups, rg)
	}
	return groups
}

// addPods adds the pods of cluster with their rank in the hostlist.
func (r *Report) addPods(cluster string, pods []corev1.Pod) {
	hosts, _ := hostlist.Expand(r.Hostlist)
	for _, p := range pods {
		ready := false
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				ready = c.Status == corev1.ConditionTrue
			}
		}
		hostname := p.Spec.Hostname
		if hostname == "" {
			hostname = p.Name
		}
		r.Pods = append(r.Pods, Pod{Rank: slices.Index(hosts, hostname), Cluster: cluster, Namespace: p.Namespace,
			Name: p.Name, Hostname: hostname, Node: p.Spec.NodeName, Phase: string(p.Status.Phase), Ready: ready})
	}
}
