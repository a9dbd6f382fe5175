// Command fluxfed-manager is the fluxfed manager alone, the binary the image ships (at /fluxfed):
// it runs what `fluxfed manager` runs, with the same flags, and links nothing that only the
// fluxfed command line needs (plan, status, member, logs, exec), so that the running operator
// maps less of its binary into memory.
//
// Usage:
//
//	fluxfed-manager [manager] [flags]     run the manager
//	fluxfed-manager version               print the version, as --version does
//	fluxfed-manager member probe HOST:PORT...
//
// The word manager may come first, so that the Deployments, written for `fluxfed manager`, run
// it unchanged. `member probe` is what the data-path check of `fluxfed member add` runs in a
// pod on a member, with the image of the member's manager: `/fluxfed member probe`, as it was
// when the image held the whole of fluxfed.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/fluxfed/fluxfed/internal/brokerprobe"
	"github.com/fluxfed/fluxfed/internal/manager"
)

// version is stamped at build time: go build -ldflags "-X main.version=v0.1.0".
var version = ""

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fluxfed-manager:", err)
		os.Exit(1)
	}
}

// run runs the manager with the command line args until ctx is done. Help and the version go
// to stdout, logs to stderr; an error is returned, not printed.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	switch {
	case len(args) > 0 && args[0] == "manager":
		args = args[1:]
	case len(args) == 1 && args[0] == "version":
		return printVersion(stdout)
	case len(args) >= 2 && args[0] == "member" && args[1] == "probe":
		return probe(ctx, args[2:], stdout)
	}
	opts := &manager.Options{}
	fs := pflag.NewFlagSet("fluxfed-manager", pflag.ContinueOnError)
	fs.SetOutput(stdout)
	opts.BindGeneral(fs)
	opts.BindHub(fs)
	opts.BindLogging(fs)
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprintf(stdout, "Usage:\n  fluxfed-manager [manager] [flags]\n  fluxfed-manager version\n\n"+
			"Runs the fluxfed operator, as `fluxfed manager` does: it reconciles the MiniClusters of its\n"+
			"cluster; with --hub it is also the hub, which bursts root MiniClusters onto the member\n"+
			"clusters registered as MemberClusters.\n\nFlags:\n%s", fs.FlagUsagesWrapped(100))
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w\nRun 'fluxfed-manager --help' for usage", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("fluxfed-manager takes no arguments, got %q\nRun 'fluxfed-manager --help' for usage", fs.Args())
	}
	if *showVersion {
		return printVersion(stdout)
	}
	return manager.Run(ctx, opts, buildVersion(), stderr)
}

func printVersion(w io.Writer) error {
	_, err := fmt.Fprintf(w, "fluxfed-manager %s (%s, %s/%s)\n", buildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}

// probe greets the lead broker endpoints as `fluxfed member probe` does.
func probe(ctx context.Context, endpoints []string, stdout io.Writer) error {
	if len(endpoints) == 0 {
		return errors.New("member probe takes one or more HOST:PORT endpoints")
	}
	for _, e := range endpoints {
		if _, _, err := brokerprobe.SplitEndpoint(e); err != nil {
			return fmt.Errorf("member probe: %w", err)
		}
	}
	return brokerprobe.ProbeAndRecord(ctx, endpoints, stdout)
}

// buildVersion returns the stamped version, else the module version Go recorded, else "devel".
func buildVersion() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "devel"
}
