// Command fluxfed is the Flux Framework MiniCluster operator with multi-cluster bursting.
//
// Usage:
//
//	fluxfed manager [flags]      run the operator (--hub: also the bursting hub)
//	fluxfed plan -f FILE         render a MiniCluster offline
//	fluxfed status NAME          show a MiniCluster and its bursts across clusters
//	fluxfed logs ROOT            print a broker's log, on the hub or a member, through the hub
//	fluxfed exec ROOT -- CMD     run a command such as flux in a root's lead broker, through the hub
//	fluxfed version              print the version
//	fluxfed completion SHELL     print a shell completion script
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	if err := runWithSignals(os.Args[1:]); err != nil {
		if code := exitCode(err); code != 1 {
			os.Exit(code) // the status of a command that fluxfed exec ran, which said why itself
		}
		fmt.Fprintln(os.Stderr, "fluxfed:", err)
		os.Exit(1)
	}
}

// runWithSignals runs the command until it returns or SIGINT/SIGTERM cancels it.
func runWithSignals(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, args, os.Stdout, os.Stderr)
}

// run runs the fluxfed command line args. Help, usage and command output go to stdout,
// logs to stderr; an error is returned, not printed.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := newRootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContext(ctx)
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "fluxfed",
		Short: "Flux Framework MiniClusters on Kubernetes, across clusters",
		Long: "fluxfed runs Flux Framework MiniClusters on Kubernetes. A MiniCluster on a hub cluster can\n" +
			"burst onto member clusters: its Flux instance then spans all of them.",
		Version: versionLine(),
		// main prints the error once; a flag error adds where to find the usage.
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          unknownCommand,
		// Runnable, so that cobra checks the arguments with unknownCommand.
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	root.SuggestionsMinimumDistance = 2
	// Defined here so that cobra does not take -v for it.
	root.Flags().Bool("version", false, "print the version and exit")
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(flagError)
	root.SetUsageFunc(usage)
	root.AddCommand(newManagerCommand(), newPlanCommand(), newStatusCommand(), newLogsCommand(), newExecCommand(), newMemberCommand(), newVersionCommand())
	return root
}

// flagError says where the usage is, after what was wrong with the flags.
func flagError(c *cobra.Command, err error) error {
	return fmt.Errorf("%w\nRun '%s --help' for usage", err, c.CommandPath())
}

// unknownCommand refuses a command fluxfed does not have, with the ones it may have meant.
func unknownCommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q", args[0])
	if suggestions := c.SuggestionsFor(args[0]); len(suggestions) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(suggestions, " or "))
	}
	return fmt.Errorf("%s\nRun '%s --help' for usage", msg, c.CommandPath())
}

// noArgs refuses arguments with the command's name in the error.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%s takes no arguments, got %q\nRun '%s --help' for usage", c.Name(), args, c.CommandPath())
	}
	return nil
}
