// Command chaos kills fluxfed's hub at random moments while roots change, on a fleet of three
// local clusters (e2e/fleet: a hub and two members, fluxfed installed from deploy/, the managers
// running as processes), and prints what it found (package e2e/chaos). It exits 1 when the
// federation was not as its specs say at a settle check, when something was left behind, or when
// the hub reported a Conflict with its own objects.
//
//	go run ./e2e/cmd/chaos -kills 100        # make chaos
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/fluxfed/fluxfed/e2e/chaos"
	"github.com/fluxfed/fluxfed/e2e/fleet"
)

func main() {
	failed, err := run()
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	case failed:
		os.Exit(1)
	}
}

// run runs the chaos and reports whether it found the federation wrong.
func run() (failed bool, err error) {
	var opts chaos.Options
	flag.IntVar(&opts.Kills, "kills", 100, "how many times the hub is killed (SIGKILL)")
	flag.IntVar(&opts.Roots, "roots", 6, "how many roots the workload keeps creating, resizing, moving and deleting")
	flag.Uint64Var(&opts.Seed, "seed", uint64(time.Now().UnixNano()), "seed of the run's choices")
	flag.DurationVar(&opts.Uptime, "uptime", 3*time.Second, "the longest the hub runs between two kills")
	flag.IntVar(&opts.SettleEvery, "settle-every", 10, "kills between two checks that the fleet becomes consistent")
	flag.DurationVar(&opts.SettleTimeout, "settle-timeout", 3*time.Minute, "how long a settle check waits")
	keep := flag.Bool("keep", false, "leave the clusters' files (and logs) behind")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "fluxfed-chaos-")
	if err != nil {
		return false, err
	}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "chaos: "+format+"\n", args...) }
	logf("seed %d; clusters, binaries and logs in %s", opts.Seed, dir)
	f, err := fleet.Start(ctx, fleet.Options{Dir: dir, Logf: logf})
	if err != nil {
		return false, err
	}
	defer func() {
		if err := f.Stop(); err != nil {
			logf("stopping the fleet: %v", err)
		}
		if !*keep {
			_ = os.RemoveAll(dir)
		}
	}()
	opts.Logf = logf
	report, err := chaos.Run(ctx, f, opts)
	fmt.Print(report)
	if report.Failed() || err != nil {
		*keep = true
		logf("the logs are kept in %s", dir)
	}
	return report.Failed(), err
}
