// Command celcost prints the estimated cost of every CEL rule (x-kubernetes-validations) of a
// CRD, computed as the API server computes it when the CRD is created (k8s.io/apiextensions-apiserver
// at the version go.mod pins), most expensive first, and the CRD's total:
//
//	go run ./tools/celcost                                   # deploy/crd's MiniCluster CRD
//	go run ./tools/celcost -base tools/celcost/testdata/miniclusters-baseline.yaml
//
// With -base it prints each rule's cost in the base CRD beside its cost now; a rule is the same
// rule in both when it sits at the same place and gives the same message.
//
// The package's benchmark, BenchmarkMiniClusterAdmission, measures what the rules cost the API
// server when MiniClusters are created.
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "celcost:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("celcost", flag.ContinueOnError)
	crdPath := fs.String("crd", "deploy/crd/flux-framework.org_miniclusters.yaml", "the CRD whose rules to cost")
	basePath := fs.String("base", "", "a CRD to compare with, rule by rule (same place, same message)")
	version := fs.String("version", "v1alpha2", "the version of the CRD whose schema to read")
	width := fs.Int("width", 90, "how many characters of each rule to print (0: all)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: the CRDs are given with -crd and -base", fs.Args())
	}
	costs, err := costsOf(*crdPath, *version)
	if err != nil {
		return err
	}
	if *basePath == "" {
		return printCosts(stdout, costs, *width)
	}
	base, err := costsOf(*basePath, *version)
	if err != nil {
		return err
	}
	return printComparison(stdout, base, costs, *width)
}

func costsOf(path, version string) ([]ruleCost, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	costs, err := crdCosts(data, version)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return costs, nil
}

func printCosts(w io.Writer, costs []ruleCost, width int) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "total\tper call\ttimes\t path\t rule\t")
	for _, c := range costs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t %s\t %s\t\n", number(c.Total), number(c.MaxCost), number(c.Cardinality), displayPath(c.Path), shorten(c.Rule, width))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d rules, estimated total %s\n", len(costs), number(sum(costs)))
	return err
}

// printComparison prints the rules of base and now side by side: changed ones first, then the
// ones only one of them has, then the unchanged.
func printComparison(w io.Writer, base, now []ruleCost, width int) error {
	type key struct{ path, message string }
	before := map[key]ruleCost{}
	for _, c := range base {
		before[key{c.Path, c.Message}] = c
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "before\tnow\tper call before\tper call now\t path\t rule now\t")
	var same []ruleCost
	seen := map[key]bool{}
	for _, c := range now {
		k := key{c.Path, c.Message}
		seen[k] = true
		b, ok := before[k]
		switch {
		case !ok:
			fmt.Fprintf(tw, "-\t%s\t-\t%s\t %s\t (new) %s\t\n", number(c.Total), number(c.MaxCost), displayPath(c.Path), shorten(c.Rule, width))
		case b.Rule != c.Rule || b.Total != c.Total:
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t %s\t %s\t\n", number(b.Total), number(c.Total), number(b.MaxCost), number(c.MaxCost), displayPath(c.Path), shorten(c.Rule, width))
		default:
			same = append(same, c)
		}
	}
	for _, b := range base {
		if !seen[key{b.Path, b.Message}] {
			fmt.Fprintf(tw, "%s\t-\t%s\t-\t %s\t (gone) %s\t\n", number(b.Total), number(b.MaxCost), displayPath(b.Path), shorten(b.Rule, width))
		}
	}
	for _, c := range same {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t %s\t (unchanged) %s\t\n", number(c.Total), number(c.Total), number(c.MaxCost), number(c.MaxCost), displayPath(c.Path), shorten(c.Rule, width))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "estimated total: before %s (%d rules), now %s (%d rules)\n", number(sum(base)), len(base), number(sum(now)), len(now))
	return err
}

func sum(costs []ruleCost) uint64 {
	var total uint64
	for _, c := range costs {
		if math.MaxUint64-total < c.Total {
			return math.MaxUint64
		}
		total += c.Total
	}
	return total
}

func number(n uint64) string {
	if n == math.MaxUint64 {
		return "unbounded"
	}
	return fmt.Sprint(n)
}

// shorten cuts a rule to width characters, marking the cut.
func shorten(rule string, width int) string {
	r := []rune(strings.Join(strings.Fields(rule), " "))
	if width <= 0 || len(r) <= width {
		return string(r)
	}
	return string(r[:width-1]) + "…"
}
