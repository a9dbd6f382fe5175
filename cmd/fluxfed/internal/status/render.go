package status

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"
)

// Output formats of Write.
const (
	FormatText = "text"
	FormatJSON = "json"
	FormatYAML = "yaml"
)

// Formats are the formats Write knows.
var Formats = []string{FormatText, FormatJSON, FormatYAML}

// Write writes r to w in format.
func Write(w io.Writer, r *Report, format string) error {
	switch format {
	case FormatText:
		return Text(w, r)
	case FormatJSON:
		data, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", data)
		return err
	case FormatYAML:
		data, err := yaml.Marshal(r)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	return fmt.Errorf("unknown format %q: one of %s", format, strings.Join(Formats, ", "))
}

// Text writes r for a person: a summary, then one table per part, each left out when empty.
func Text(w io.Writer, r *Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "MiniCluster %s/%s on %s: %s\n", r.Namespace, r.Name, r.Cluster, r.Role)
	fmt.Fprintf(&b, "Brokers:      %d of %d ready", r.Ready, r.Size)
	if r.MaxSize > r.Size {
		fmt.Fprintf(&b, " (room for %d)", r.MaxSize)
	}
	b.WriteString("\n")
	lead := "none reported"
	if r.LeadBroker != nil {
		lead = fmt.Sprintf("%s:%d", r.LeadBroker.Address, r.LeadBroker.Port)
	}
	fmt.Fprintf(&b, "Lead broker:  %s\n", lead)
	hosts := r.Hostlist
	if hosts == "" {
		hosts = "(not reported yet)"
	}
	fmt.Fprintf(&b, "Hostlist:     %s\n", hosts)
	if f := r.Flux; f != nil {
		fmt.Fprintf(&b, "Flux:         %s\n", describeFlux(f))
	}

	if len(r.Ranks) > 0 {
		b.WriteString("\nRanks:\n")
		table(&b, []string{"RANKS", "HOSTS", "GROUP", "CLUSTER", "RUNNING", "RESERVED"}, len(r.Ranks), func(i int) []string {
			g := r.Ranks[i]
			running, reserved := "?", "?"
			if g.Running != nil {
				n := min(int(*g.Running), g.Last-g.First+1)
				running, reserved = "-", "-"
				if n > 0 {
					running = rankRange(g.First, g.First+n-1)
				}
				if g.First+n <= g.Last {
					reserved = rankRange(g.First+n, g.Last)
				}
			}
			cluster := g.Cluster
			switch {
			case g.Name == r.Name:
				cluster = "(this MiniCluster)"
			case cluster == "":
				cluster = "-"
			}
			return []string{rankRange(g.First, g.Last), g.Hosts, g.Name, cluster, running, reserved}
		})
	}
	if len(r.Conditions) > 0 {
		b.WriteString("\nConditions:\n")
		table(&b, []string{"TYPE", "STATUS", "REASON", "MESSAGE"}, len(r.Conditions), func(i int) []string {
			c := r.Conditions[i]
			return []string{c.Type, c.Status, c.Reason, oneLine(c.Message)}
		})
	}
	if len(r.Bursts) > 0 {
		b.WriteString("\nBursts:\n")
		table(&b, []string{"NAME", "CLUSTER", "NAMESPACE", "SIZE", "MAX", "READY", "PHASE", "ONLINE", "DRAINING", "DRAINED", "MESSAGE"},
			len(r.Bursts), func(i int) []string {
				s := r.Bursts[i]
				return []string{s.Name, s.Cluster, s.Namespace, fmt.Sprint(s.Size), fmt.Sprint(s.MaxSize), fmt.Sprint(s.Ready),
					s.Phase, fmt.Sprint(s.Online), fmt.Sprint(s.Draining), fmt.Sprint(s.Drained), oneLine(s.Message)}
			})
	}
	b.WriteString("\nPods:\n")
	if len(r.Pods) == 0 {
		b.WriteString("  none\n")
	} else {
		table(&b, []string{"RANK", "CLUSTER", "POD", "HOSTNAME", "NODE", "PHASE", "READY"}, len(r.Pods), func(i int) []string {
			p := r.Pods[i]
			rank := fmt.Sprint(p.Rank)
			if p.Rank < 0 {
				rank = "?"
			}
			node := p.Node
			if node == "" {
				node = "-"
			}
			return []string{rank, p.Cluster, p.Namespace + "/" + p.Name, p.Hostname, node, p.Phase, fmt.Sprint(p.Ready)}
		})
	}
	if ranks := totalRanks(r); r.Role == "root" && ranks > 0 && len(r.Pods) < ranks {
		fmt.Fprintf(&b, "  (%d of %d ranks have a pod: the others are reserved, not started yet, or on a member not read)\n", len(r.Pods), ranks)
	}
	if len(r.Problems) > 0 {
		b.WriteString("\nProblems:\n")
		for _, p := range r.Problems {
			fmt.Fprintf(&b, "  %s\n", oneLine(p))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// describeFlux sums up what Flux says in one line, as the demo does. When the hub could not
// ask the instance, the line says so, and that the figures, if any, are from the last answer.
func describeFlux(f *Flux) string {
	if f.State == "" {
		if f.Message != "" {
			return "not answering: " + oneLine(f.Message)
		}
		return "not asked yet"
	}
	var b strings.Builder
	b.WriteString(f.State)
	if f.Size > 0 {
		fmt.Fprintf(&b, ", %d/%d ranks online", f.Online, f.Size)
	}
	if f.PendingJobs > 0 {
		fmt.Fprintf(&b, ", pending jobs: %d (the largest asks for %d nodes)", f.PendingJobs, f.PendingNodes)
	}
	if f.Message != "" {
		fmt.Fprintf(&b, " when last asked; not answering now: %s", oneLine(f.Message))
	}
	return b.String()
}

func totalRanks(r *Report) int {
	if len(r.Ranks) == 0 {
		return 0
	}
	return r.Ranks[len(r.Ranks)-1].Last + 1
}

// table writes a table indented by two spaces, its columns aligned, no line ending in spaces.
func table(b *strings.Builder, header []string, rows int, row func(int) []string) {
	var t strings.Builder
	tw := tabwriter.NewWriter(&t, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  %s\n", strings.Join(header, "\t"))
	for i := range rows {
		fmt.Fprintf(tw, "  %s\n", strings.Join(row(i), "\t"))
	}
	_ = tw.Flush()
	for _, line := range strings.SplitAfter(t.String(), "\n") {
		if line != "" {
			b.WriteString(strings.TrimRight(line, " \n") + "\n")
		}
	}
}

// oneLine keeps a message on its table row.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func rankRange(first, last int) string {
	if first == last {
		return fmt.Sprint(first)
	}
	return fmt.Sprintf("%d-%d", first, last)
}
