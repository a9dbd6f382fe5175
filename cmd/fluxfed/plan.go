package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/bursting"
	"github.com/fluxfed/fluxfed/hostlist"
	"github.com/fluxfed/fluxfed/member/admit"
	"github.com/fluxfed/fluxfed/member/render"
	"github.com/fluxfed/fluxfed/member/render/curve"
)

// defaultLeadPort is --lead-port when it is not given: the broker port, as
// spec.flux.bursting.leadBroker.port defaults to, which is where a LoadBalancer exposes rank 0.
const defaultLeadPort = 8050

// runPlan renders a MiniCluster offline with the reconciler's own code: it admits the manifest
// as the API server would (defaults, schema and CEL validation), then writes what every broker
// of the MiniCluster would read, one folder per host, and prints a summary. For a root whose
// bursts name member clusters, --lead-address stands in for the endpoint the hub discovers: the
// children the hub would push are then planned, admitted as a member would admit them, and
// rendered too, one folder per host of every side.
func runPlan(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("f", "", "MiniCluster manifest to plan (- for standard input)")
	out := fs.String("out", "", "write DIR/<hostname>/{broker.toml,curve.cert,hostlist,hostname} and DIR/manifests.yaml;\n"+
		"with children also DIR/children.yaml (the child MiniClusters) and DIR/manifests-<burst>.yaml")
	leadAddress := fs.String("lead-address", "", "address at which the members reach the root's rank 0 (an IPv4 address or a DNS name),\n"+
		"standing in for the one the hub discovers; needed to render the children of bursts that name a cluster")
	leadPort := fs.Int("lead-port", defaultLeadPort, "port at --lead-address that leads to rank 0, for example the lead broker Service's NodePort")
	hub := fs.String("hub-name", "fluxfed", "hub identity in the children's "+fluxv1alpha2.LabelOriginHub+" label")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: fluxfed plan -f minicluster.yaml [--out DIR] [--lead-address ADDRESS [--lead-port PORT]]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Renders a MiniCluster offline, as the operator would, and prints its hosts, ranks,")
		fmt.Fprintln(stderr, "quorum and broker tree. An invalid MiniCluster is refused with the API server's messages.")
		fmt.Fprintln(stderr, "With --lead-address, a root's bursts that name a member cluster are planned as the hub")
		fmt.Fprintln(stderr, "would push them, and every host of the root and of every child gets a folder.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if *file == "" || fs.NArg() > 0 {
		fs.Usage()
		return errUsage
	}
	portSet := false
	fs.Visit(func(f *flag.Flag) { portSet = portSet || f.Name == "lead-port" })
	if portSet && *leadAddress == "" {
		fmt.Fprintln(stderr, "fluxfed plan: --lead-port needs --lead-address")
		return errUsage
	}
	if *leadPort < 1 || *leadPort > 65535 {
		fmt.Fprintf(stderr, "fluxfed plan: --lead-port %d is not a TCP port (1-65535)\n", *leadPort)
		return errUsage
	}
	manifest, err := readManifest(*file)
	if err != nil {
		return err
	}

	mc, err := admit.Admit(manifest)
	if err != nil {
		return admissionError(err)
	}
	if mc.IsBurstChild() && *leadAddress != "" {
		return fmt.Errorf("MiniCluster %s is a burst child (spec.flux.bursting.leadBroker is set): --lead-address plans the children of a root", mc.Name)
	}
	rendered, err := render.Render(mc)
	if err != nil {
		return fmt.Errorf("MiniCluster %s cannot be rendered: %w", mc.Name, err)
	}
	var children []renderedChild
	switch {
	case *leadAddress != "":
		plan, err := bursting.NewPlan(mc, bursting.Endpoint{Address: *leadAddress, Port: int32(*leadPort)}, *hub)
		if err != nil {
			return fmt.Errorf("MiniCluster %s cannot burst: %w", mc.Name, err)
		}
		if children, err = renderChildren(plan); err != nil {
			return err
		}
	case !mc.IsBurstChild():
		if err := bursting.ValidateFederation(mc); err != nil {
			return fmt.Errorf("MiniCluster %s cannot burst: %w", mc.Name, err)
		}
	}
	cert, err := certificate(mc)
	if err != nil {
		return err
	}
	if *out != "" {
		if err := writePlan(*out, rendered, children, cert); err != nil {
			return err
		}
	}
	printSummary(stdout, mc, rendered.Layout)
	printChildren(stdout, mc, rendered.Layout, children, *leadAddress != "")
	if *out != "" {
		hosts := rendered.Layout.LocalEnd - rendered.Layout.LocalStart
		if len(children) == 0 {
			fmt.Fprintf(stdout, "\nWrote %d host folders and manifests.yaml to %s\n", hosts, *out)
		} else {
			childHosts := 0
			for _, c := range children {
				childHosts += c.rendered.Layout.LocalEnd - c.rendered.Layout.LocalStart
			}
			fmt.Fprintf(stdout, "\nWrote %d host folders (%d of the root, %d of %d children), manifests.yaml, children.yaml and manifests-<burst>.yaml to %s\n",
				hosts+childHosts, hosts, childHosts, len(children), *out)
		}
	}
	return nil
}

// renderedChild is a child of the plan as its member would store and render it.
type renderedChild struct {
	bursting.Child
	// stored is the child as the member's API server stores it: admitted, defaults applied.
	stored   *fluxv1alpha2.MiniCluster
	rendered *render.Rendered
}

// renderChildren admits every child of plan as its member's API server would, and renders it
// with the member's code.
func renderChildren(plan *bursting.Plan) ([]renderedChild, error) {
	var children []renderedChild
	for _, c := range plan.Children {
		data, err := yaml.Marshal(c.MiniCluster)
		if err != nil {
			return nil, fmt.Errorf("encoding the child MiniCluster %s: %w", c.Burst, err)
		}
		stored, err := admit.Admit(data)
		if err != nil {
			return nil, fmt.Errorf("member %s would refuse the child MiniCluster %s: %w", c.Cluster, c.Burst, admissionError(err))
		}
		rendered, err := render.Render(stored)
		if err != nil {
			return nil, fmt.Errorf("the child MiniCluster %s cannot be rendered: %w", c.Burst, err)
		}
		children = append(children, renderedChild{Child: c, stored: stored, rendered: rendered})
	}
	return children, nil
}

func readManifest(file string) ([]byte, error) {
	if file == "-" {
		return io.ReadAll(os.Stdin)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading the manifest: %w", err)
	}
	return data, nil
}

// admissionError words a refusal as kubectl would, one cause per line.
func admissionError(err error) error {
	var invalid *admit.InvalidError
	if errors.As(err, &invalid) {
		var b strings.Builder
		fmt.Fprintf(&b, "MiniCluster %q is invalid:", invalid.Name)
		for _, e := range invalid.Errs {
			fmt.Fprintf(&b, "\n  * %s", e.Error())
		}
		return errors.New(b.String())
	}
	return err
}

// certificate returns spec.flux.curveCert when set, else a new keypair, as the reconciler would
// store in the MiniCluster's curve Secret.
func certificate(mc *fluxv1alpha2.MiniCluster) (*curve.Certificate, error) {
	if mc.Spec.Flux.CurveCert != "" {
		cert, err := curve.Parse([]byte(mc.Spec.Flux.CurveCert))
		if err != nil {
			return nil, fmt.Errorf("spec.flux.curveCert: %w", err)
		}
		return cert, nil
	}
	return curve.Generate(rand.Reader, curve.KeygenMetadata(mc.Name, "", time.Now())...)
}

// writePlan writes one folder per host of the MiniCluster and of every child with the files
// its broker reads, the Kubernetes objects the reconciler would apply for the MiniCluster
// (manifests.yaml) and for each child on its member (manifests-<burst>.yaml), and the child
// MiniClusters as the hub would apply them (children.yaml). The curve Secret is left out: its
// content is in every host folder.
func writePlan(dir string, rendered *render.Rendered, children []renderedChild, cert *curve.Certificate) error {
	if err := writeHosts(dir, rendered, cert); err != nil {
		return err
	}
	if err := writeObjects(filepath.Join(dir, "manifests.yaml"), rendered.Objects); err != nil {
		return err
	}
	if len(children) == 0 {
		return nil
	}
	var pushed strings.Builder
	for _, c := range children {
		if err := writeHosts(dir, c.rendered, cert); err != nil {
			return err
		}
		if err := writeObjects(filepath.Join(dir, "manifests-"+c.Burst+".yaml"), c.rendered.Objects); err != nil {
			return err
		}
		data, err := yaml.Marshal(c.MiniCluster)
		if err != nil {
			return fmt.Errorf("encoding the child MiniCluster %s: %w", c.Burst, err)
		}
		note := ""
		if c.Size == 0 {
			note = "\n# size 0: the hub pushes nothing until the burst runs brokers; this is the child as it starts"
		}
		fmt.Fprintf(&pushed, "---\n# member cluster: %s%s\n%s", c.Cluster, note, data)
	}
	return os.WriteFile(filepath.Join(dir, "children.yaml"), []byte(pushed.String()), 0o644)
}

// writeHosts writes DIR/<hostname>/ for every host of the rendered MiniCluster's own pods.
func writeHosts(dir string, rendered *render.Rendered, cert *curve.Certificate) error {
	l := rendered.Layout
	for rank := l.LocalStart; rank < l.LocalEnd; rank++ {
		host := l.Hosts[rank]
		hostDir := filepath.Join(dir, host)
		if err := os.MkdirAll(hostDir, 0o755); err != nil {
			return err
		}
		files := []struct {
			name string
			data []byte
			mode os.FileMode
		}{
			{"broker.toml", rendered.BrokerTOML, 0o644},
			// The broker refuses a certificate that others can read.
			{"curve.cert", curve.File(cert), 0o400},
			{"hostlist", []byte(l.Hostlist + "\n"), 0o644},
			{"hostname", []byte(host + "\n"), 0o644},
		}
		for _, f := range files {
			path := filepath.Join(hostDir, f.name)
			// A read-only certificate from an earlier plan cannot be opened for writing.
			_ = os.Remove(path)
			if err := os.WriteFile(path, f.data, f.mode); err != nil {
				return fmt.Errorf("writing %s: %w", path, err)
			}
		}
	}
	return nil
}

// writeObjects writes objects to path as a multi-document YAML file.
func writeObjects(path string, objects []render.Object) error {
	var manifests strings.Builder
	for _, o := range objects {
		data, err := yaml.Marshal(o.Apply)
		if err != nil {
			return fmt.Errorf("encoding %s: %w", o.Kind.Kind, err)
		}
		fmt.Fprintf(&manifests, "---\n%s", data)
	}
	return os.WriteFile(path, []byte(manifests.String()), 0o644)
}

func printSummary(w io.Writer, mc *fluxv1alpha2.MiniCluster, l *bursting.Layout) {
	role := "root"
	if mc.IsBurstChild() {
		role = fmt.Sprintf("burst child of %s (lead broker %s:%d)", mc.Spec.Flux.Bursting.LeadBroker.Name, l.LeadAddress, l.LeadPort)
	}
	fmt.Fprintf(w, "MiniCluster %s/%s: %s\n", mc.Namespace, mc.Name, role)
	fmt.Fprintf(w, "Hosts:     %d, this MiniCluster's pods hold ranks %s\n", len(l.Hosts), rankRange(l.LocalStart, l.LocalEnd))
	fmt.Fprintf(w, "Hostlist:  %s\n", l.Hostlist)
	if l.Quorum > 0 {
		fmt.Fprintf(w, "Quorum:    %d (rank 0 starts once this many brokers are online)\n", l.Quorum)
	} else {
		fmt.Fprintf(w, "Quorum:    set by the root\n")
	}
	topology := l.Topology
	if topology == "" {
		topology = "custom: flat under rank 0, one subtree per burst"
	}
	fmt.Fprintf(w, "Topology:  %s\n\n", topology)

	// How many of each group's ranks run brokers now: this MiniCluster's size, and on a root
	// each burst's size; a child does not know the other groups'.
	size := map[string]int{mc.Name: int(mc.Spec.Size)}
	if !mc.IsBurstChild() {
		for _, b := range mc.Spec.Flux.Bursting.Clusters {
			size[b.Name] = int(b.Size)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RANKS\tHOSTS\tGROUP\tCLUSTER\tRUNNING\tPARENTS")
	for _, g := range l.Groups {
		cluster := g.Cluster
		switch {
		case g.Name == mc.Name:
			cluster = "(this MiniCluster)"
		case cluster == "":
			cluster = "(reserved)"
		}
		running := "?"
		if n, ok := size[g.Name]; ok {
			running = "none: all reserved"
			if n > 0 {
				running = rankRange(g.Start, g.Start+n)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", rankRange(g.Start, g.End),
			hostlist.Compress(l.Hosts[g.Start:g.End]), g.Name, cluster, running, parents(l, g.Start, g.End))
	}
	_ = tw.Flush()
}

// printChildren lists the children the hub would push for the root's bursts that name a
// cluster, or says why they were not planned.
func printChildren(w io.Writer, mc *fluxv1alpha2.MiniCluster, l *bursting.Layout, children []renderedChild, planned bool) {
	if mc.IsBurstChild() {
		return
	}
	var pushed []string
	for _, g := range l.Groups[1:] {
		if g.Cluster != "" {
			pushed = append(pushed, fmt.Sprintf("%s (%s)", g.Name, g.Cluster))
		}
	}
	switch {
	case len(pushed) == 0:
		return
	case !planned:
		fmt.Fprintf(w, "\nChildren:  %s are not rendered: they need the endpoint at which their members reach rank 0,\n"+
			"           which the hub discovers; pass --lead-address (and --lead-port) to render them too.\n", strings.Join(pushed, ", "))
		return
	}
	lead := children[0].MiniCluster.Spec.Flux.Bursting.LeadBroker
	fmt.Fprintf(w, "\nChildren the hub pushes (their brokers reach rank 0 at %s:%d):\n", lead.Address, lead.Port)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BURST\tCLUSTER\tNAMESPACE\tSIZE\tRANKS\tHOSTLIST")
	for _, c := range children {
		cl := c.rendered.Layout
		size := fmt.Sprint(c.Size)
		if c.Size == 0 {
			size = "0 (not pushed)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.Burst, c.Cluster, c.Namespace, size,
			rankRange(cl.LocalStart, cl.LocalEnd), cl.Hostlist)
	}
	_ = tw.Flush()
}

// parents describes the parents of ranks [start, end) as runs: "0: -, 1-3: 0".
func parents(l *bursting.Layout, start, end int) string {
	var runs []string
	for r := start; r < end; {
		p := l.Parent(r)
		e := r + 1
		for e < end && l.Parent(e) == p {
			e++
		}
		parent := "-"
		if p >= 0 {
			parent = fmt.Sprint(p)
		}
		runs = append(runs, rankRange(r, e)+"→"+parent)
		r = e
	}
	return strings.Join(runs, ", ")
}

func rankRange(start, end int) string {
	if end-start == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d-%d", start, end-1)
}
