// Command clusters brings up local Kubernetes clusters for fluxfed's demos and manual end-to-end
// runs, and tears them down again:
//
//	go run ./e2e/clusters/cmd/clusters up [-n 3 | -names hub,member-a] [-nodes 2] [-dir DIR] [-foreground]
//	go run ./e2e/clusters/cmd/clusters status [-dir DIR]
//	go run ./e2e/clusters/cmd/clusters down [-dir DIR]
//
// up returns once the clusters are usable and leaves them running (their PIDs are in
// DIR/state.json) unless -foreground is given, in which case it stops them on SIGINT or SIGTERM.
// An interrupt during bring-up stops whatever was started. down stops the processes recorded in
// the state file and removes the run directory's files.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/fluxfed/fluxfed/e2e/clusters"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "clusters:", err)
		os.Exit(1)
	}
}

const usage = `usage: clusters up|status|down [flags]

  up       start clusters and leave them running (see -foreground)
  status   show the clusters recorded in the run directory
  down     stop them and remove the run directory's files

Flags:
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprint(stderr, usage)
		return errors.New("no command")
	}
	command := args[0]
	defaultDir, err := defaultRunDir()
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("clusters "+command, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	dir := fs.String("dir", defaultDir, "run directory: kubeconfigs, state, logs")
	count := fs.Int("n", 3, "number of clusters, named hub, member-a, member-b, ...")
	names := fs.String("names", "", "comma-separated cluster names (overrides -n)")
	nodes := fs.Int("nodes", clusters.DefaultNodesPerCluster, "simulated nodes per cluster")
	provider := fs.String("provider", "", "local or kind (default $"+clusters.EnvProvider+", else local)")
	timeout := fs.Duration("timeout", clusters.DefaultTimeout, "bring-up deadline")
	foreground := fs.Bool("foreground", false, "up: stay in the foreground and stop the clusters on SIGINT or SIGTERM")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch command {
	case "up":
		opts := clusters.Options{
			Count: *count, Dir: *dir, NodesPerCluster: *nodes, Provider: *provider, Timeout: *timeout,
			Detach: !*foreground,
			Logf: func(format string, args ...any) {
				fmt.Fprintf(stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
			},
		}
		if *names != "" {
			opts.Names = strings.Split(*names, ",")
		}
		return up(ctx, opts, *foreground, stdout)
	case "status":
		return status(ctx, *dir, stdout)
	case "down":
		return down(*dir, stdout)
	}
	fs.Usage()
	return fmt.Errorf("unknown command %q", command)
}

func defaultRunDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the user cache directory: %w", err)
	}
	return filepath.Join(base, "fluxfed", "clusters"), nil
}

func up(ctx context.Context, opts clusters.Options, foreground bool, stdout io.Writer) error {
	// What an earlier run left behind, stopped, is in the way of new clusters of the same names.
	if old, err := clusters.Load(opts.Dir); err == nil {
		if old.Running() {
			return fmt.Errorf("clusters are already running from %s; run `clusters down` first", opts.Dir)
		}
		if err := old.RemoveFiles(); err != nil {
			return fmt.Errorf("removing what an earlier run left in %s: %w", opts.Dir, err)
		}
	}
	env, err := clusters.Start(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d clusters up (%s provider) in %s\n\n", len(env.Clusters), env.Provider, env.Dir)
	for _, c := range env.Clusters {
		fmt.Fprintf(stdout, "  %-10s %s  nodes %s\n             kubeconfig %s\n", c.Name, c.Config.Host, strings.Join(c.NodeAddresses, " "), c.Kubeconfig)
	}
	fmt.Fprintf(stdout, "\nAll clusters, one context each:\n  export KUBECONFIG=%s\n  kubectl --context %s get nodes\n", env.Kubeconfig, env.Clusters[0].Name)
	if !foreground {
		fmt.Fprintf(stdout, "\nStop them with: go run ./e2e/clusters/cmd/clusters down -dir %s\n", env.Dir)
		return nil
	}
	fmt.Fprintln(stdout, "\nRunning until interrupted.")
	<-ctx.Done()
	if err := env.Stop(); err != nil {
		return err
	}
	return env.RemoveFiles()
}

func status(ctx context.Context, dir string, stdout io.Writer) error {
	env, err := clusters.Load(dir)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stdout, "no clusters recorded in %s\n", dir)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s provider, run directory %s, kubeconfig %s\n", env.Provider, env.Dir, env.Kubeconfig)
	for _, c := range env.Clusters {
		api := "unreachable"
		if c.Config != nil {
			if cs, err := kubernetes.NewForConfig(c.Config); err == nil {
				rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				if body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx); err == nil {
					api = "readyz " + strings.TrimSpace(string(body))
				}
				cancel()
			}
		}
		host := "-"
		if c.Config != nil {
			host = c.Config.Host
		}
		fmt.Fprintf(stdout, "\n%s  %s  %s  nodes %s\n", c.Name, host, api, strings.Join(c.NodeAddresses, " "))
		if c.KindName != "" {
			fmt.Fprintf(stdout, "  kind cluster %s\n", c.KindName)
		}
		for _, p := range c.Processes {
			state := "stopped"
			if p.Running() {
				state = "running"
			}
			fmt.Fprintf(stdout, "  %-24s pid %-7d %-8s %s\n", p.Component, p.PID, state, p.Log)
		}
	}
	return nil
}

func down(dir string, stdout io.Writer) error {
	env, err := clusters.Load(dir)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stdout, "no clusters recorded in %s\n", dir)
		return nil
	}
	if err != nil {
		return err
	}
	if err := env.Stop(); err != nil {
		return err
	}
	if err := env.RemoveFiles(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "stopped %d clusters and removed their files from %s\n", len(env.Clusters), dir)
	return nil
}
