// Command release writes what a fluxfed release ships besides its image, from the kustomizations
// under deploy/ built with the pinned kubectl (e2e/k8sbin/build.sh builds it):
//
//	release manifests -out dist -version v0.1.0   # dist/fluxfed.yaml, fluxfed-hub.yaml, fluxfed-member.yaml
//	release chart                                 # the generated files of deploy/chart/fluxfed
//
// Run it from the root of the source tree; `make release-manifests` and `make chart` do.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fluxfed/fluxfed/deploy/release"
	"github.com/fluxfed/fluxfed/e2e/k8sbin"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: release manifests [-out dir] [-version v] | release chart [-dir dir]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	deployDir := fs.String("deploy", "deploy", "the deploy/ directory of the source tree")
	out := fs.String("out", "dist", "manifests: where to write them")
	version := fs.String("version", "devel", "manifests: the version named in their header")
	chartDir := fs.String("dir", filepath.Join("deploy", "chart", "fluxfed"), "chart: the chart's directory")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	bin, err := k8sbin.Dir("kubectl")
	if err != nil {
		return err
	}
	k := release.Kubectl(filepath.Join(bin, "kubectl"), *deployDir)
	switch args[0] {
	case "manifests":
		paths, err := release.WriteManifests(k, *out, *version)
		if err != nil {
			return err
		}
		for _, p := range paths {
			fmt.Println(p)
		}
		return nil
	case "chart":
		return release.WriteChartFiles(k, *chartDir)
	default:
		return fmt.Errorf("unknown command %q: manifests or chart", args[0])
	}
}
