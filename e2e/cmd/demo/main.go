// Command demo shows fluxfed bursting one Flux instance over three clusters on this machine
// (`make demo`): it starts a hub and two members as local processes, installs and runs fluxfed
// on each, registers the members, applies examples/bursting-root.yaml on the hub, waits for
// every broker, and prints what a user would look at. Pods are simulated (kwok), so stand-in
// brokers (e2e/brokersim) show that the rendered configs join one overlay. With KEEP=1 the
// clusters keep running afterwards.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/brokersim"
	"github.com/fluxfed/fluxfed/e2e/fleet"
	"github.com/fluxfed/fluxfed/e2e/k8sbin"
	"github.com/fluxfed/fluxfed/e2e/testenv"
	"github.com/fluxfed/fluxfed/hostlist"
)

const namespace = "demo"

func main() {
	if err := mainErr(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func mainErr() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cache, err := os.UserCacheDir()
	if err != nil {
		return err
	}
	return run(ctx, os.Stdout, os.Getenv("KEEP") == "1", filepath.Join(cache, "fluxfed", "demo"))
}

// run runs the demo in dir; with keep, the clusters keep running when it returns.
func run(ctx context.Context, out io.Writer, keep bool, dir string) error {
	start := time.Now()
	say := func(format string, args ...any) {
		fmt.Fprintf(out, "[%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	if old, err := os.ReadFile(filepath.Join(dir, "state.json")); err == nil && len(old) > 0 {
		return fmt.Errorf("a demo is still running in %s (KEEP=1 earlier?): stop it with make clusters-down CLUSTERS_DIR=%s", dir, dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}

	f, err := fleet.Start(ctx, fleet.Options{Dir: dir, Detach: keep, Logf: say})
	if err != nil {
		return err
	}
	stopFleet := func() error {
		say("Stopping the clusters and managers")
		if err := f.Stop(); err != nil {
			return err
		}
		return os.RemoveAll(dir)
	}

	err = demo(ctx, f, out, say)
	switch {
	case err != nil || !keep:
		return errors.Join(err, stopFleet())
	default:
		fmt.Fprintf(out, "\nThe clusters keep running (KEEP=1). Stop them with:\n  make clusters-down CLUSTERS_DIR=%s\n", dir)
		return nil
	}
}

func demo(ctx context.Context, f *fleet.Fleet, out io.Writer, say func(string, ...any)) error {
	hub := f.Clients["hub"]
	if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "bursting-root.yaml"))
	if err != nil {
		return err
	}
	root := &fluxv1alpha2.MiniCluster{}
	if err := yaml.UnmarshalStrict(data, root); err != nil {
		return err
	}
	root.Namespace = namespace
	say("kubectl apply -n %s -f examples/bursting-root.yaml   (on the hub)", namespace)
	applied := time.Now()
	if err := hub.Create(ctx, root); err != nil {
		return err
	}

	// Follow the bursts until every one is Ready.
	last := ""
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if err := hub.Get(ctx, client.ObjectKeyFromObject(root), root); err != nil {
			return err
		}
		var phases []string
		for _, b := range root.Status.Bursts {
			phases = append(phases, fmt.Sprintf("%s %s (%d/%d)", b.Name, b.Phase, b.Ready, b.Size))
		}
		now := fmt.Sprintf("root ready %d/%d; %s", root.Status.Ready, root.Spec.Size, strings.Join(phases, ", "))
		if now != last {
			say("%s", now)
			last = now
		}
		if meta.IsStatusConditionTrue(root.Status.Conditions, fluxv1alpha2.ConditionReady) &&
			meta.IsStatusConditionTrue(root.Status.Conditions, fluxv1alpha2.ConditionBurstsReady) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the federation was not ready after 2 minutes; logs are in %s", f.Env.Dir)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	say("Every broker of the federation runs, %v after the apply", time.Since(applied).Round(10*time.Millisecond))

	if err := printRoot(out, root); err != nil {
		return err
	}
	sides, err := f.Federation(ctx, root)
	if err != nil {
		return err
	}
	printPods(out, root, sides)
	if err := printJoin(ctx, out, root, sides); err != nil {
		return err
	}
	printPoke(out, f)
	return nil
}

func printRoot(out io.Writer, root *fluxv1alpha2.MiniCluster) error {
	fmt.Fprintf(out, "\n== The root MiniCluster %s/%s on the hub\n", root.Namespace, root.Name)
	lead := root.Status.LeadBroker
	fmt.Fprintf(out, "lead broker:     %s:%d  (Service %s-lead-broker, NodePort, on the node that runs rank 0)\n", lead.Address, lead.Port, root.Name)
	fmt.Fprintf(out, "global hostlist: %s\n", root.Status.Hostlist)
	fmt.Fprintln(out, "conditions:")
	for _, c := range root.Status.Conditions {
		fmt.Fprintf(out, "  %-20s %-6s %-16s %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	if meta.IsStatusConditionFalse(root.Status.Conditions, fluxv1alpha2.ConditionLeadBrokerReachable) {
		fmt.Fprintln(out, "  (the hub greets the advertised endpoint; with simulated pods no Flux broker listens there,")
		fmt.Fprintln(out, "   so it cannot answer: on real clusters this condition tells a wrong address from a right one)")
	}
	fmt.Fprintln(out, "bursts:")
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "  NAME\tCLUSTER\tNAMESPACE\tSIZE\tREADY\tPHASE\tMESSAGE")
	for _, b := range root.Status.Bursts {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%d\t%d\t%s\t%s\n", b.Name, b.Cluster, b.Namespace, b.Size, b.Ready, b.Phase, b.Message)
	}
	return w.Flush()
}

// printPods lists the broker pods of every cluster with their rank in the global hostlist.
func printPods(out io.Writer, root *fluxv1alpha2.MiniCluster, sides []fleet.Side) {
	hosts, err := hostlist.Expand(root.Status.Hostlist)
	if err != nil {
		fmt.Fprintf(out, "(cannot expand the hostlist: %v)\n", err)
		return
	}
	fmt.Fprintln(out, "\n== Broker pods, by rank")
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "  RANK\tCLUSTER\tPOD\tHOSTNAME\tNODE\tPHASE")
	type row struct {
		rank int
		line string
	}
	var rows []row
	for _, s := range sides {
		for _, p := range s.Pods {
			rank := slices.Index(hosts, p.Spec.Hostname)
			rows = append(rows, row{rank, fmt.Sprintf("  %d\t%s\t%s/%s\t%s\t%s\t%s", rank, s.Cluster, p.Namespace, p.Name, p.Spec.Hostname, p.Spec.NodeName, p.Status.Phase)})
		}
	}
	slices.SortFunc(rows, func(a, b row) int { return a.rank - b.rank })
	for _, r := range rows {
		fmt.Fprintln(w, r.line)
	}
	_ = w.Flush()
	if len(rows) < len(hosts) {
		fmt.Fprintf(out, "  (%d of %d hosts have a pod: the rest are reserved)\n", len(rows), len(hosts))
	}
}

// printJoin runs a stand-in broker for every pod with the config its cluster rendered, routed
// as the clusters' networks would, and reports what rank 0 saw.
func printJoin(ctx context.Context, out io.Writer, root *fluxv1alpha2.MiniCluster, sides []fleet.Side) error {
	n, err := fleet.Network(root, sides)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := brokersim.Run(ctx, fleet.Brokers(sides, nil), n)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "\n== The overlay (stand-in brokers: pods are simulated here, so no real Flux runs)")
	fmt.Fprintf(out, "rank 0 (%s) saw %d of %d ranks join in %v; ", res.Root, len(res.Online), len(res.Hosts), res.JoinTime.Round(time.Millisecond/10))
	if res.Complete() {
		fmt.Fprintln(out, "every rank answers it.")
	} else {
		fmt.Fprintf(out, "missing: %v\n", res.Missing())
		for _, fl := range res.Failures {
			fmt.Fprintf(out, "  %s\n", fl.Error())
		}
	}
	return nil
}

func printPoke(out io.Writer, f *fleet.Fleet) {
	kubectl := "kubectl"
	if dir, err := k8sbin.Dir("kubectl"); err == nil {
		kubectl = filepath.Join(dir, "kubectl")
	}
	fmt.Fprintf(out, "\n== Poke at it (with KEEP=1 make demo)\n")
	fmt.Fprintf(out, "  export KUBECONFIG=%s\n", f.Env.Kubeconfig)
	fmt.Fprintf(out, "  %s --context hub -n %s get minicluster bursting-root -o yaml\n", kubectl, namespace)
	fmt.Fprintf(out, "  %s --context member-a -n %s get minicluster,jobs,pods\n", kubectl, namespace)
	fmt.Fprintf(out, "  %s --context hub -n %s get events --field-selector involvedObject.name=bursting-root\n", kubectl, namespace)
	fmt.Fprintf(out, "  %s --context hub -n %s delete minicluster bursting-root   # the children go too\n", kubectl, namespace)
	fmt.Fprintf(out, "  manager logs: %s/<cluster>/logs/fluxfed.log\n", f.Env.Dir)
}
