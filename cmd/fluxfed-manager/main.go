// Command fluxfed-manager is the MiniCluster operator alone: what `fluxfed manager` runs without
// --hub, in a binary that links neither the hub nor the rest of fluxfed's command line, so that
// the operator of a cluster that is not a hub (deploy/manager, the chart's single and member
// modes) maps less of its binary. It takes the general and logging flags of `fluxfed manager`;
// the hub is `fluxfed manager --hub` (/fluxfed in the same image).
//
// Usage:
//
//	fluxfed-manager [flags]
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/fluxfed/fluxfed/internal/buildinfo"
	"github.com/fluxfed/fluxfed/internal/manager"
)

// name is the command's name in its messages.
const name = "fluxfed-manager"

// version is stamped at build time: go build -ldflags "-X main.version=v0.1.0".
var version = ""

// hubFlags are the flags of `fluxfed manager` that only the hub takes
// (internal/manager/hubmanager, which this binary does not link; a test keeps the list whole).
var hubFlags = []string{
	"cleanup-timeout", "dial-allow", "flux-interval", "flux-interval-max", "flux-timeout",
	"gateway-bind-address", "gateway-cert-dir", "gateway-service", "hub", "hub-name", "join-timeout",
	"lead-address-allow", "lead-probe-interval", "member-api-burst", "member-api-qps",
	"member-connect-timeout", "member-health-interval", "member-health-timeout", "member-timeout",
	"members-namespace", "orphan-sweep-interval", "skip-member-namespaces",
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// run runs the operator with the command line args until ctx is done. Help and the version go
// to stdout, logs to stderr; an error is returned, not printed.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts := &manager.Options{}
	general := pflag.NewFlagSet(name, pflag.ContinueOnError)
	opts.BindGeneral(general)
	help := general.BoolP("help", "h", false, "help for "+name)
	showVersion := general.Bool("version", false, "print the version and exit")
	logging := pflag.NewFlagSet(name, pflag.ContinueOnError)
	opts.BindLogging(logging)

	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard) // the error is returned with where the usage is
	fs.AddFlagSet(general)
	fs.AddFlagSet(logging)
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	switch {
	case *help:
		return usage(stdout, general, logging)
	case *showVersion:
		_, err := fmt.Fprintln(stdout, versionLine())
		return err
	case fs.NArg() > 0:
		msg := fmt.Sprintf("unexpected arguments %q: only flags are taken", fs.Args())
		if fs.Arg(0) == "manager" {
			msg += " (this binary is `fluxfed manager` already: leave the word manager out)"
		}
		return fmt.Errorf("%s\nRun '%s --help' for usage", msg, name)
	}
	return manager.Run(ctx, opts, nil, buildVersion(), stderr)
}

// flagError says what was wrong with the flags and where the usage is; a flag of the hub says
// where the hub is.
func flagError(err error) error {
	var unknown *pflag.NotExistError
	if errors.As(err, &unknown) && slices.Contains(hubFlags, unknown.GetSpecifiedName()) {
		err = fmt.Errorf("--%s is a flag of the hub, which %s does not run: the hub is `fluxfed manager --hub` "+
			"(/fluxfed in the same image)", unknown.GetSpecifiedName(), name)
	}
	return fmt.Errorf("%w\nRun '%s --help' for usage", err, name)
}

// usageColumns is where flag descriptions wrap, as in fluxfed's help.
const usageColumns = 100

// usage writes the help: what the command is, its usage line, an example and its flags, the
// general ones and the logging ones apart.
func usage(w io.Writer, general, logging *pflag.FlagSet) error {
	var b strings.Builder
	b.WriteString("Runs the MiniCluster operator: it reconciles the MiniClusters of its cluster. It is\n" +
		"`fluxfed manager` without the hub and without the rest of fluxfed's commands, in a smaller\n" +
		"binary; the hub is `fluxfed manager --hub`.\n\n")
	fmt.Fprintf(&b, "Usage:\n  %s [flags]\n\n", name)
	fmt.Fprintf(&b, "Examples:\n  %s --leader-elect\n  %s --kubeconfig ~/.kube/config --zap-log-level debug\n", name, name)
	fmt.Fprintf(&b, "\nFlags:\n%s", general.FlagUsagesWrapped(usageColumns))
	fmt.Fprintf(&b, "\nLogging flags:\n%s", logging.FlagUsagesWrapped(usageColumns))
	_, err := io.WriteString(w, b.String())
	return err
}

// buildVersion is the version of this build (buildinfo.Version), as fluxfed's.
func buildVersion() string { return buildinfo.Version(version) }

// versionLine is what --version prints, in the form of `fluxfed version`.
func versionLine() string { return buildinfo.Line(name, version) }
