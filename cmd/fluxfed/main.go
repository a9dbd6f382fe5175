// Command fluxfed is the Flux Framework MiniCluster operator with multi-cluster bursting.
//
// Usage:
//
//	fluxfed manager [flags]   run the operator
//	fluxfed plan -f FILE      render a MiniCluster offline
//	fluxfed version           print the version
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if err := runWithSignals(os.Args[1:]); err != nil {
		if !errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, "fluxfed:", err)
		}
		os.Exit(1)
	}
}

// runWithSignals runs the command until it returns or SIGINT/SIGTERM cancels it.
func runWithSignals(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, args, os.Stdout, os.Stderr)
}

// errUsage reports that the usage text was already printed.
var errUsage = errors.New("usage")

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{name: "manager", summary: "run the MiniCluster operator", run: runManager},
		{name: "plan", summary: "render a MiniCluster offline: hosts, ranks, broker config", run: runPlan},
		{name: "version", summary: "print the version and exit", run: runVersion},
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	usage(stderr)
	return fmt.Errorf("unknown command %q", args[0])
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "fluxfed: Flux Framework MiniClusters on Kubernetes, across clusters.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: fluxfed <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'fluxfed <command> -h' for a command's flags.")
}
