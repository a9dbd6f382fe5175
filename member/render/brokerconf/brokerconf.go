// Package brokerconf renders broker.toml, the Flux configuration every broker of a MiniCluster
// starts with: the [bootstrap] table that gives each broker its rank and its TBON parent, the
// [resource] table (for a MiniCluster that bursts, each group of ranks with its own hardware and
// property, when known; otherwise the R file each pod encodes), and the few other tables the
// Flux Operator sets. It is pure: a MiniCluster and its bursting.Layout in, bytes out.
package brokerconf

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/bursting"
	"github.com/fluxfed/fluxfed/hostlist"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// CurveCertPath returns where the brokers read the CURVE certificate: the flux-view init
// container copies it from the curve Secret to <mountPath>/curve/curve.cert with mode 0400,
// since the broker refuses a certificate that group or others can read, and a Secret volume
// cannot be given an owner.
func CurveCertPath(mc *fluxv1alpha2.MiniCluster) string {
	return path.Join(mc.Spec.Flux.Container.MountPath, "curve", names.KeyCurveCert)
}

// ResourcePath returns where the brokers read R, the instance's resource set, which the
// entrypoint writes (flux R encode) from the layout's Hostlist before it starts the broker,
// unless broker.toml describes the resources itself (ResourcesFromConfig).
func ResourcePath(mc *fluxv1alpha2.MiniCluster) string {
	return path.Join(mc.Spec.Flux.Container.MountPath, "view", "etc", "flux", "system", "R")
}

// BrokerTOML returns broker.toml for the brokers of mc, laid out by l (bursting.NewLayout(mc)).
// A non-empty spec.flux.brokerConfig is returned as is instead, as the Flux Operator does; l
// may then be nil.
//
// The output depends only on its inputs, so it can be compared and applied on every reconcile.
// It assumes the schema defaults were applied (the namespace and spec.flux.container.mountPath
// are set).
func BrokerTOML(mc *fluxv1alpha2.MiniCluster, l *bursting.Layout) ([]byte, error) {
	if mc == nil {
		return nil, errors.New("rendering broker.toml: no MiniCluster")
	}
	if mc.Spec.Flux.BrokerConfig != "" {
		return []byte(mc.Spec.Flux.BrokerConfig), nil
	}
	switch {
	case l == nil || len(l.Hosts) == 0:
		return nil, errors.New("rendering broker.toml: no layout")
	case mc.Namespace == "":
		return nil, errors.New("rendering broker.toml: the MiniCluster has no namespace")
	case mc.Spec.Flux.Container.MountPath == "":
		return nil, errors.New("rendering broker.toml: spec.flux.container.mountPath is empty")
	}
	entries, err := hostEntries(l)
	if err != nil {
		return nil, fmt.Errorf("rendering broker.toml: %w", err)
	}

	w := &tomlWriter{}
	w.comment(fmt.Sprintf("broker.toml of MiniCluster %s/%s, rendered by fluxfed.", mc.Namespace, mc.Name))
	if l.LeadAddress != "" {
		w.comment("Its brokers join the Flux instance whose rank 0 is " + l.LeadAddress + ":" + strconv.Itoa(l.LeadPort) + ".")
	}
	w.comment("Every broker of the instance, here and in other clusters, must list the same hosts in\n" +
		"the same order and the same parents: change the MiniCluster, not this file.")

	// As in the Flux Operator: other users of the pod (a sidecar, a user container running
	// as non-root) may connect, and root acts as the instance owner.
	w.table("access")
	w.bool("allow-guest-user", true)
	w.bool("allow-root-owner", true)

	w.table("bootstrap")
	w.str("curve_cert", CurveCertPath(mc))
	w.int("default_port", names.DefaultBrokerPort)
	w.str("default_bind", "tcp://eth0:%p")
	w.str("default_connect", fmt.Sprintf("tcp://%%h.%s.%s.svc.cluster.local:%%p", mc.HeadlessName(), mc.Namespace))
	w.b.WriteString("hosts = [\n")
	for _, e := range entries {
		w.b.WriteString("  { host = " + w.quote(e.host))
		for _, kv := range [][2]string{{"bind", e.keys.bind}, {"connect", e.keys.connect}, {"parent", e.keys.parent}} {
			if kv[1] != "" {
				w.b.WriteString(", " + kv[0] + " = " + w.quote(kv[1]))
			}
		}
		w.b.WriteString(" }, # " + rankRange(e.first, e.last) + "\n")
	}
	w.b.WriteString("]\n")

	// Each broker checks its own node's hostname and cores against R and drains it on a
	// mismatch. That check is kept (no noverify). Without resource config entries R is encoded
	// on every pod from its own hostname and hardware, so it holds and a mismatch means ranks
	// are off; with them, it also catches a node with fewer cores than its group is said to have.
	w.table("resource")
	if groups, fallback := l.ResourceGroups(); groups != nil {
		w.comment("Every group of ranks with its own hardware and a property naming it, the same on every\n" +
			"side of the instance (flux run --requires=NAME picks a group).")
		w.b.WriteString("config = [\n")
		for _, g := range groups {
			if err := writeResourceGroup(w, g); err != nil {
				return nil, fmt.Errorf("rendering broker.toml: %w", err)
			}
		}
		w.b.WriteString("]\n")
	} else {
		if fallback != "" {
			w.comment("Every broker describes every host with its own node's hardware (flux R encode --local)\n" +
				"because " + fallback + ".")
		}
		w.str("path", ResourcePath(mc))
	}

	if t := l.Topology; t != "" || mc.Spec.Flux.ConnectTimeout != nil && *mc.Spec.Flux.ConnectTimeout != "" || mc.Spec.Logging.Zeromq {
		w.table("tbon")
		if t != "" {
			w.str("topo", t)
		}
		if ct := mc.Spec.Flux.ConnectTimeout; ct != nil && *ct != "" {
			w.str("connect_timeout", *ct)
		}
		if mc.Spec.Logging.Zeromq {
			w.int("zmqdebug", 1)
		}
	}

	if !mc.Spec.Flux.Scheduler.Simple && mc.Spec.Flux.Scheduler.QueuePolicy != "" {
		w.table("sched-fluxion-qmanager")
		w.str("queue-policy", string(mc.Spec.Flux.Scheduler.QueuePolicy))
	}
	if w.err != nil {
		return nil, fmt.Errorf("rendering broker.toml: %w", w.err)
	}
	return []byte(w.b.String()), nil
}

// ResourcesFromConfig reports whether the broker.toml that BrokerTOML renders for mc and l
// describes the instance's resources itself ([resource] config), so that the entrypoint must
// not encode R: mc bursts, does not bring its own spec.flux.brokerConfig, and the cores of
// every group of ranks are known (bursting.Layout.ResourceGroups).
func ResourcesFromConfig(mc *fluxv1alpha2.MiniCluster, l *bursting.Layout) bool {
	if mc == nil || l == nil || mc.Spec.Flux.BrokerConfig != "" {
		return false
	}
	groups, _ := l.ResourceGroups()
	return groups != nil
}

// writeResourceGroup writes one entry of the [resource] config array, on one line.
func writeResourceGroup(w *tomlWriter, g bursting.ResourceGroup) error {
	hosts := hostlist.Compress(g.Hosts)
	// As for the bootstrap hosts: a host that did not survive compression would leave R
	// without it, and the broker that re-ranks R by its hostlist would shut down.
	if back, err := hostlist.Expand(hosts); err != nil || !slices.Equal(back, g.Hosts) {
		return fmt.Errorf("resource config hosts of %s do not survive hostlist compression", rankRange(g.Start, g.End-1))
	}
	w.b.WriteString("  { hosts = " + w.quote(hosts))
	w.b.WriteString(", cores = " + w.quote(idRange(g.Hardware.Cores)))
	if g.Hardware.GPUs > 0 {
		w.b.WriteString(", gpus = " + w.quote(idRange(g.Hardware.GPUs)))
	}
	w.b.WriteString(", properties = [" + w.quote(g.Property) + "] }, # " + rankRange(g.Start, g.End-1) + "\n")
	return nil
}

// idRange returns the RFC 22 idset of the ids 0 .. n-1; n is at least 1.
func idRange(n int32) string {
	if n == 1 {
		return "0"
	}
	return "0-" + strconv.Itoa(int(n)-1)
}

// hostKeys are the keys of a hosts entry besides host.
type hostKeys struct {
	bind, connect, parent string
}

// hostEntry is one entry of the hosts array: a run of consecutive ranks with the same keys,
// their hosts compressed into one hostlist.
type hostEntry struct {
	host        string
	keys        hostKeys
	first, last int
}

// hostEntries groups the ranks of l into hosts entries.
func hostEntries(l *bursting.Layout) ([]hostEntry, error) {
	var (
		entries []hostEntry
		run     []string
	)
	flush := func() error {
		e := &entries[len(entries)-1]
		e.host = hostlist.Compress(run)
		// The names are valid DNS names, which the hostlist encoding always reads back; check
		// anyway, since a mistake here would shift ranks without a word.
		if back, err := hostlist.Expand(e.host); err != nil || !slices.Equal(back, run) {
			return fmt.Errorf("hosts of %s do not survive hostlist compression", rankRange(e.first, e.last))
		}
		return nil
	}
	for r, h := range l.Hosts {
		k := hostKeys{}
		if r == 0 && l.LeadAddress != "" {
			// A burst child reaches rank 0 through the address and port the root exposes;
			// bind is there for completeness, since no broker here is rank 0.
			port := strconv.Itoa(l.LeadPort)
			k.bind = "tcp://eth0:" + port
			k.connect = "tcp://" + l.LeadAddress + ":" + port
		}
		if p, ok := l.Parents[r]; ok && l.Topology == "" {
			if p < 0 || p >= len(l.Hosts) || p == r {
				return nil, fmt.Errorf("rank %d has parent %d, outside the hosts", r, p)
			}
			k.parent = l.Hosts[p]
		}
		if len(entries) > 0 && entries[len(entries)-1].keys == k {
			run = append(run, h)
			entries[len(entries)-1].last = r
			continue
		}
		if len(entries) > 0 {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		entries = append(entries, hostEntry{keys: k, first: r, last: r})
		run = append(run[:0], h)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return entries, nil
}

func rankRange(first, last int) string {
	if first == last {
		return "rank " + strconv.Itoa(first)
	}
	return "ranks " + strconv.Itoa(first) + "-" + strconv.Itoa(last)
}
