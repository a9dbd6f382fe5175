package main

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/bursting"
	"github.com/fluxfed/fluxfed/hostlist"
	"github.com/fluxfed/fluxfed/member/admit"
	"github.com/fluxfed/fluxfed/member/render"
	"github.com/fluxfed/fluxfed/member/render/curve"
	"github.com/fluxfed/fluxfed/member/render/names"
)

// defaultLeadPort is --lead-port when it is not given: the broker port, as
// spec.flux.bursting.leadBroker.port defaults to, which is where a LoadBalancer exposes rank 0.
const defaultLeadPort = 8050

// planOptions are the flags of `fluxfed plan`.
type planOptions struct {
	file        string
	out         string
	output      string
	leadAddress string
	leadPort    int
	leadPortSet bool
	hub         string
}

// Values of plan's --output.
const (
	outputSummary = "summary"
	outputYAML    = "yaml"
	outputJSON    = "json"
)

func newPlanCommand() *cobra.Command {
	opts := &planOptions{}
	cmd := &cobra.Command{
		Use:   "plan -f FILE [--out DIR] [--lead-address ADDRESS [--lead-port PORT]] [-o yaml|json]",
		Short: "Render a MiniCluster offline: hosts, ranks, broker config",
		Long: "Renders a MiniCluster offline, as the operator would, and prints its hosts, ranks, quorum and\n" +
			"broker tree. An invalid MiniCluster is refused with the API server's messages. With\n" +
			"--lead-address, a root's bursts that name a member cluster are planned as the hub would push\n" +
			"them, and every host of the root and of every child gets a folder.\n\n" +
			"With -o yaml or -o json, the Kubernetes objects the operator would apply for the MiniCluster\n" +
			"are printed instead of the summary (not its CURVE Secret, which is generated, never printed).",
		Example: "  fluxfed plan -f examples/bursting-root.yaml --out /tmp/plan\n" +
			"  fluxfed plan -f examples/bursting-root.yaml --lead-address 203.0.113.7 --lead-port 30050\n" +
			"  fluxfed plan -f minicluster.yaml -o yaml | kubectl diff -f -",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.leadPortSet = cmd.Flags().Changed("lead-port")
			return runPlan(opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&opts.file, "filename", "f", "", "MiniCluster manifest to plan (- for standard input)")
	fs.StringVar(&opts.out, "out", "", "write DIR/<hostname>/{broker.toml,curve.cert,hostlist,hostname} and DIR/manifests.yaml; "+
		"with children also DIR/children.yaml (the child MiniClusters) and DIR/manifests-<burst>.yaml")
	fs.StringVarP(&opts.output, "output", "o", outputSummary, "what to print: summary, or the MiniCluster's Kubernetes objects as yaml or json (a List)")
	fs.StringVar(&opts.leadAddress, "lead-address", "", "address at which the members reach the root's rank 0 (an IPv4 address or a DNS name), "+
		"standing in for the one the hub discovers; needed to render the children of bursts that name a cluster")
	fs.IntVar(&opts.leadPort, "lead-port", defaultLeadPort, "port at --lead-address that leads to rank 0, for example the lead broker Service's NodePort")
	fs.StringVar(&opts.hub, "hub-name", "fluxfed", "hub identity in the children's "+fluxv1alpha2.LabelOriginHub+" label")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{outputSummary, outputYAML, outputJSON}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	_ = cmd.MarkFlagDirname("out")
	return cmd
}

// runPlan renders a MiniCluster offline with the reconciler's own code: it admits the manifest
// as the API server would (defaults, schema and CEL validation), then writes what every broker
// of the MiniCluster would read, one folder per host, and prints a summary. For a root whose
// bursts name member clusters, --lead-address stands in for the endpoint the hub discovers: the
// children the hub would push are then planned, admitted as a member would admit them, and
// rendered too, one folder per host of every side.
func runPlan(opts *planOptions, stdout, stderr io.Writer) error {
	switch {
	case opts.file == "":
		return errors.New("--filename (-f) is required: the MiniCluster manifest to plan, - for standard input\nRun 'fluxfed plan --help' for usage")
	case opts.leadPortSet && opts.leadAddress == "":
		return errors.New("--lead-port needs --lead-address")
	case opts.leadPort < 1 || opts.leadPort > 65535:
		return fmt.Errorf("--lead-port %d is not a TCP port (1-65535)", opts.leadPort)
	case opts.output != outputSummary && opts.output != outputYAML && opts.output != outputJSON:
		return fmt.Errorf("--output %q is not one of summary, yaml, json", opts.output)
	}
	manifest, err := readManifest(opts.file)
	if err != nil {
		return err
	}

	mc, err := admit.Admit(manifest)
	if err != nil {
		return admissionError(manifestName(opts.file), err)
	}
	if mc.IsBurstChild() && opts.leadAddress != "" {
		return fmt.Errorf("MiniCluster %s is a burst child (spec.flux.bursting.leadBroker is set): --lead-address plans the children of a root", mc.Name)
	}
	rendered, err := render.Render(mc)
	if err != nil {
		return fmt.Errorf("MiniCluster %s cannot be rendered: %w", mc.Name, err)
	}
	var children []renderedChild
	switch {
	case opts.leadAddress != "":
		plan, err := bursting.NewPlan(mc, bursting.Endpoint{Address: opts.leadAddress, Port: int32(opts.leadPort)}, opts.hub)
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
	if opts.out != "" {
		if err := writePlan(opts.out, rendered, children, cert); err != nil {
			return err
		}
	}
	if opts.output != outputSummary {
		return printObjects(stdout, stderr, opts, mc, rendered, children)
	}
	printSummary(stdout, mc, rendered.Layout)
	printChildren(stdout, mc, rendered.Layout, children, opts.leadAddress != "")
	if opts.out != "" {
		hosts := rendered.Layout.LocalEnd - rendered.Layout.LocalStart
		if len(children) == 0 {
			fmt.Fprintf(stdout, "\nWrote %d host folders and manifests.yaml to %s\n", hosts, opts.out)
		} else {
			childHosts := 0
			for _, c := range children {
				childHosts += c.rendered.Layout.LocalEnd - c.rendered.Layout.LocalStart
			}
			fmt.Fprintf(stdout, "\nWrote %d host folders (%d of the root, %d of %d children), manifests.yaml, children.yaml and manifests-<burst>.yaml to %s\n",
				hosts+childHosts, hosts, childHosts, len(children), opts.out)
		}
	}
	return nil
}

// printObjects prints the Kubernetes objects the reconciler would apply for mc, for kubectl apply
// or diff: as YAML documents, or as one JSON List. What is not printed is said on stderr.
func printObjects(stdout, stderr io.Writer, opts *planOptions, mc *fluxv1alpha2.MiniCluster, rendered *render.Rendered, children []renderedChild) error {
	var data []byte
	var err error
	if opts.output == outputJSON {
		data, err = objectList(rendered.Objects)
	} else {
		data, err = encodeObjects(rendered.Objects)
	}
	if err != nil {
		return err
	}
	if _, err := stdout.Write(data); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "fluxfed plan: the pods also mount Secret %s (the CURVE certificate), which the operator generates; it is not printed\n",
		names.CurveSecretName(mc))
	if len(children) > 0 {
		where := "pass --out DIR to write them to DIR/children.yaml"
		if opts.out != "" {
			where = "they are in " + filepath.Join(opts.out, "children.yaml")
		}
		fmt.Fprintf(stderr, "fluxfed plan: the %d child MiniClusters belong on their members and are not printed: %s\n", len(children), where)
	}
	return nil
}

// objectList encodes objects as a v1 List, which kubectl reads as its items.
func objectList(objects []render.Object) ([]byte, error) {
	items := make([]json.RawMessage, 0, len(objects))
	for _, o := range objects {
		data, err := json.Marshal(o.Apply)
		if err != nil {
			return nil, fmt.Errorf("encoding %s: %w", o.Kind.Kind, err)
		}
		items = append(items, data)
	}
	list := struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}{APIVersion: "v1", Kind: "List", Items: items}
	data, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
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
			return nil, fmt.Errorf("member %s would refuse the child MiniCluster %s: %w", c.Cluster, c.Burst, admissionError("", err))
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

// manifestName names the manifest in messages: its file, or standard input.
func manifestName(file string) string {
	if file == "-" {
		return "<stdin>"
	}
	return file
}

// yamlSyntax finds the line and the message of a YAML syntax error in a decoder's error.
var yamlSyntax = regexp.MustCompile(`yaml: line (\d+): (.+)$`)

// admissionError words a refusal as kubectl would, one cause per line: a manifest that is not
// YAML as file:line and the parser's message, a manifest that is not a MiniCluster by its
// causes, never the bytes of the input; and an invalid MiniCluster one field per line, without
// the API server's line for the rules it did not check, which names no field.
func admissionError(file string, err error) error {
	var invalid *admit.InvalidError
	var undecoded *admit.DecodeError
	switch {
	case errors.As(err, &invalid):
		var b strings.Builder
		fmt.Fprintf(&b, "MiniCluster %q is invalid:", invalid.Name)
		unchecked := false
		for _, e := range invalid.Errs {
			if e.Field == "" || e.Field == "<nil>" {
				unchecked = true
				continue
			}
			fmt.Fprintf(&b, "\n  * %s", e.Error())
		}
		if unchecked {
			b.WriteString("\n  (some validation rules were not checked because of these errors: fix them and plan again)")
		}
		return errors.New(b.String())
	case errors.As(err, &undecoded):
		where := file
		if where == "" {
			where = "the manifest"
		}
		for _, cause := range undecoded.Causes {
			if m := yamlSyntax.FindStringSubmatch(cause); m != nil {
				return fmt.Errorf("%s:%s: %s (not valid YAML)", where, m[1], m[2])
			}
		}
		if strings.Contains(undecoded.Message, "couldn't get version/kind") {
			return fmt.Errorf("%s is not a MiniCluster manifest: it has no apiVersion and kind (apiVersion: %s, kind: MiniCluster)", where, fluxv1alpha2.GroupVersion)
		}
		if strings.HasPrefix(undecoded.Message, "the object provided is unrecognized") {
			return fmt.Errorf("%s is not a MiniCluster manifest: %s", where, strings.Join(undecoded.Causes, "; "))
		}
		return fmt.Errorf("%s: %s", where, undecoded.Message)
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
	data, err := encodeObjects(objects)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// encodeObjects encodes objects as YAML documents, each after a "---" line.
func encodeObjects(objects []render.Object) ([]byte, error) {
	var manifests strings.Builder
	for _, o := range objects {
		data, err := yaml.Marshal(o.Apply)
		if err != nil {
			return nil, fmt.Errorf("encoding %s: %w", o.Kind.Kind, err)
		}
		fmt.Fprintf(&manifests, "---\n%s", data)
	}
	return []byte(manifests.String()), nil
}

func printSummary(w io.Writer, mc *fluxv1alpha2.MiniCluster, l *bursting.Layout) {
	b := mc.Spec.Flux.Bursting
	bursts := len(b.Clusters) > 0 || b.Hostlist != ""
	var role string
	switch {
	case mc.IsBurstChild():
		role = fmt.Sprintf("burst child of %s (lead broker %s:%d)", b.LeadBroker.Name, l.LeadAddress, l.LeadPort)
	case len(b.Clusters) > 0:
		role = fmt.Sprintf("root of %d burst(s)", len(b.Clusters))
	case bursts:
		role = "root (spec.flux.bursting.hostlist)"
	default:
		role = "no bursts"
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
	switch {
	case topology != "":
	case bursts:
		topology = "custom: flat under rank 0, one subtree per burst"
	default:
		topology = "custom: flat under rank 0"
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
