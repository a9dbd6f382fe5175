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
	"github.com/fluxfed/fluxfed/member"
	"github.com/fluxfed/fluxfed/member/admit"
	"github.com/fluxfed/fluxfed/member/render/curve"
)

// runPlan renders a MiniCluster offline with the reconciler's own code: it admits the manifest
// as the API server would (defaults, schema and CEL validation), then writes what every broker
// of the MiniCluster would read, one folder per host, and prints a summary.
func runPlan(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("f", "", "MiniCluster manifest to plan (- for standard input)")
	out := fs.String("out", "", "write DIR/<hostname>/{broker.toml,curve.cert,hostlist,hostname} and DIR/manifests.yaml")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: fluxfed plan -f minicluster.yaml [--out DIR]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Renders a MiniCluster offline, as the operator would, and prints its hosts, ranks,")
		fmt.Fprintln(stderr, "quorum and broker tree. An invalid MiniCluster is refused with the API server's messages.")
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
	manifest, err := readManifest(*file)
	if err != nil {
		return err
	}

	mc, err := admit.Admit(manifest)
	if err != nil {
		return admissionError(err)
	}
	rendered, err := member.Render(mc)
	if err != nil {
		return fmt.Errorf("MiniCluster %s cannot be rendered: %w", mc.Name, err)
	}
	cert, err := certificate(mc)
	if err != nil {
		return err
	}
	if *out != "" {
		if err := writePlan(*out, rendered, cert); err != nil {
			return err
		}
	}
	printSummary(stdout, mc, rendered.Layout)
	if *out != "" {
		l := rendered.Layout
		fmt.Fprintf(stdout, "\nWrote %d host folders and manifests.yaml to %s\n", l.LocalEnd-l.LocalStart, *out)
	}
	return nil
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

// writePlan writes one folder per host of this MiniCluster with the files its broker reads, and
// the Kubernetes objects the reconciler would apply (the curve Secret aside: its content is in
// every host folder).
func writePlan(dir string, rendered *member.Rendered, cert *curve.Certificate) error {
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
	var manifests strings.Builder
	for _, o := range rendered.Objects {
		data, err := yaml.Marshal(o.Apply)
		if err != nil {
			return fmt.Errorf("encoding %s: %w", o.Kind.Kind, err)
		}
		fmt.Fprintf(&manifests, "---\n%s", data)
	}
	return os.WriteFile(filepath.Join(dir, "manifests.yaml"), []byte(manifests.String()), 0o644)
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

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RANKS\tHOSTS\tGROUP\tCLUSTER\tPARENTS")
	for _, g := range l.Groups {
		cluster := g.Cluster
		switch {
		case g.Name == mc.Name:
			cluster = "(this MiniCluster)"
		case cluster == "":
			cluster = "(reserved)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", rankRange(g.Start, g.End),
			hostlist.Compress(l.Hosts[g.Start:g.End]), g.Name, cluster, parents(l, g.Start, g.End))
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
