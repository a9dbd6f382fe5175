// Command demo shows fluxfed bursting one Flux instance over three clusters on this machine
// (`make demo`): it starts a hub and two members as local processes, installs and runs fluxfed
// on each, registers the members, applies examples/bursting-root.yaml on the hub, waits for
// every broker, and shows the root once, in full, with fluxfed status. Then it applies
// examples/bursting-on-demand.yaml, whose bursts are reserved at 0, submits a job that needs
// them, and follows, one line per change, the hub growing the bursts, Flux seeing the new
// ranks, the job running, and the bursts shrinking once idle. Pods are
// simulated (kwok), so a stand-in flux (e2e/fluxsim) answers the hub in each root's rank 0
// container, and stand-in brokers (e2e/brokersim) show that the rendered configs join one
// overlay: the burst brokers reach rank 0 through the lead broker's NodePort on the hub's node,
// as they would on real clusters, and the hub's own greeting of that endpoint meets rank 0's
// CURVE socket. With KEEP=1 the clusters keep running afterwards, and so do the stand-ins,
// handed to a process of their own (`demo keep -dir DIR`, recorded with the clusters so that
// `make clusters-down` stops it). Everything stays on loopback.
//
// FLUX=real runs real Flux brokers behind the simulated pods (realDemo); PODS=real runs the pods
// for real, on one real node per cluster, Flux in them (realPodsDemo): it needs root, and not
// with KEEP=1. `demo check` only checks the switches, as make demo does before it builds what
// they need.
package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/brokersim"
	"github.com/fluxfed/fluxfed/e2e/clusters"
	"github.com/fluxfed/fluxfed/e2e/fleet"
	"github.com/fluxfed/fluxfed/e2e/k8sbin"
	"github.com/fluxfed/fluxfed/hub"
	"github.com/fluxfed/fluxfed/internal/testenv"
	"github.com/fluxfed/fluxfed/member/render/names"
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
	if len(os.Args) > 1 && os.Args[1] == "keep" {
		fs := flag.NewFlagSet("demo keep", flag.ContinueOnError)
		dir := fs.String("dir", "", "the kept demo's directory")
		if err := fs.Parse(os.Args[2:]); err != nil {
			return err
		}
		return keepStandIns(ctx, *dir, os.Stdout)
	}
	opts, err := parseOptions(os.Getenv, os.Geteuid())
	if err != nil {
		return err
	}
	if len(os.Args) > 1 && os.Args[1] == "check" {
		// make demo checks the switches before it builds what they need.
		return nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return err
	}
	return run(ctx, os.Stdout, opts, filepath.Join(cache, "fluxfed", "demo"))
}

// options are the demo's switches.
type options struct {
	// Keep leaves the clusters running when the demo returns (KEEP=1).
	Keep bool
	// RealFlux runs real Flux brokers behind the broker pods (FLUX=real).
	RealFlux bool
	// RealPods runs every cluster on real nodes: the kubelets run the broker pods in the real-pod
	// images, Flux in them (PODS=real).
	RealPods bool
}

// parseOptions reads the demo's switches from the environment, as make demo passes them, and
// refuses the values and the combinations the demo cannot run as the user euid.
func parseOptions(getenv func(string) string, euid int) (options, error) {
	opts := options{Keep: getenv("KEEP") == "1"}
	switch flux := getenv("FLUX"); flux {
	case "", "stand-in":
	case "real":
		opts.RealFlux = true
	default:
		return options{}, fmt.Errorf("FLUX=%s: FLUX is real (real Flux brokers behind the pods) or empty (the stand-ins)", flux)
	}
	switch pods := getenv("PODS"); pods {
	case "", "simulated":
	case "real":
		opts.RealPods = true
	default:
		return options{}, fmt.Errorf("PODS=%s: PODS is real (real nodes run the pods, Flux in them) or empty (simulated pods)", pods)
	}
	return opts, opts.check(euid)
}

// check refuses the combinations of switches the demo cannot run as the user euid, before
// anything starts.
func (o options) check(euid int) error {
	switch {
	case o.RealPods && o.RealFlux:
		return errors.New("PODS=real runs Flux in the pods, FLUX=real runs it behind simulated pods: set one of the two")
	case o.RealPods && o.Keep:
		return errors.New("KEEP=1 does not go with PODS=real: the real nodes' kubelets reach their API server, and the members' pods the hub's node ports, through proxies in the demo's process, which runs in a network namespace of its own, and they end with it; run make demo PODS=real without KEEP=1")
	case o.Keep && o.RealFlux:
		return errors.New("KEEP=1 does not go with FLUX=real: the real brokers run in the demo's process, in a network namespace of its own, and end with it")
	case o.RealPods && euid != 0:
		return errors.New("PODS=real needs root: the real nodes mount file systems and create network namespaces and cgroups; run make demo PODS=real as root (make real-pod-deps installs containerd, runc and the CNI plugins, as root)")
	}
	return nil
}

// run runs the demo in dir.
func run(ctx context.Context, out io.Writer, opts options, dir string) error {
	keep := opts.Keep
	if err := opts.check(os.Geteuid()); err != nil {
		return err
	}
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

	// The members are registered as a user registers them, with fluxfed member add (in demo).
	fleetOpts := fleet.Options{Dir: dir, Detach: keep, Logf: say, Unregistered: true}
	if opts.RealFlux {
		// Real brokers answer as a user's would, and the hub asks them as often as it does by
		// default.
		fleetOpts.RealFlux = true
		fleetOpts.ManagerArgs = []string{"--flux-interval=" + hub.DefaultFluxInterval.String(), "--flux-interval-max=" + hub.DefaultFluxIntervalMax.String()}
	}
	if opts.RealPods {
		// One real node per cluster, and nothing simulated: the kubelets run every pod. The hub
		// asks Flux as often as it does by default.
		fleetOpts.RealNodes = 1
		fleetOpts.ManagerArgs = []string{"--flux-interval=" + hub.DefaultFluxInterval.String(), "--flux-interval-max=" + hub.DefaultFluxIntervalMax.String()}
	}
	f, err := fleet.Start(ctx, fleetOpts)
	if err != nil {
		return err
	}
	stopFleet := func(failed bool) error {
		say("Stopping the clusters and managers")
		if err := f.Stop(); err != nil {
			return err
		}
		if failed {
			// The logs the error names stay to be read; without the state file, the next demo
			// starts over them.
			say("The clusters' logs are kept in %s", dir)
			return os.Remove(filepath.Join(dir, clusters.StateFile))
		}
		return os.RemoveAll(dir)
	}

	switch {
	case opts.RealPods:
		err = realPodsDemo(ctx, f, out, say)
	case opts.RealFlux:
		err = realDemo(ctx, f, out, say, false)
	default:
		if err = demo(ctx, f, out, say); err == nil {
			printPoke(out, f, keep)
		}
	}
	if err == nil && keep {
		err = handOver(ctx, f, dir, say)
	}
	if err != nil || !keep {
		return errors.Join(err, stopFleet(err != nil))
	}
	fmt.Fprintf(out, "\nThe clusters, the managers and the stand-ins keep running (KEEP=1). Stop them all, and remove their files, with:\n  make clusters-down CLUSTERS_DIR=%s\n", dir)
	return nil
}

// register registers the members as a user does, with fluxfed member add: each lends the hub
// the namespaces of the demo's two roots, and nothing else. What member add prints is shown for
// the first member up to the next steps it suggests, which are what the demo does next; for the
// others, which go through the same steps, only the line that says the member is Ready.
func register(ctx context.Context, f *fleet.Fleet, out io.Writer, say func(string, ...any)) error {
	for i, m := range f.Members {
		var printed bytes.Buffer
		if err := fluxfed(ctx, f, &printed, say, "member", "add", m.Name, "--member-context", m.Name, "--hub-context", f.Hub.Name,
			"--lend", namespace+","+elasticNamespace); err != nil {
			_, _ = printed.WriteTo(out)
			return err
		}
		for line := range strings.Lines(printed.String()) {
			if strings.HasPrefix(line, "  "+m.Name+": next: ") {
				break
			}
			if i == 0 || strings.HasPrefix(line, "  "+m.Name+": Ready after ") {
				fmt.Fprint(out, line)
			}
		}
	}
	return nil
}

// applyRoot applies examples/bursting-root.yaml in the demo's namespace on the hub, made to run
// on the real nodes with realPods (onRealPods).
func applyRoot(ctx context.Context, f *fleet.Fleet, say func(string, ...any), realPods bool) (*fluxv1alpha2.MiniCluster, error) {
	hubClient := f.Clients["hub"]
	if err := hubClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "bursting-root.yaml"))
	if err != nil {
		return nil, err
	}
	root := &fluxv1alpha2.MiniCluster{}
	if err := yaml.UnmarshalStrict(data, root); err != nil {
		return nil, err
	}
	root.Namespace = namespace
	if realPods {
		onRealPods(root)
		say("kubectl apply -n %s -f examples/bursting-root.yaml   (on the hub; %s)", namespace, realPodsChanges())
		return root, hubClient.Create(ctx, root)
	}
	say("kubectl apply -n %s -f examples/bursting-root.yaml   (on the hub)", namespace)
	return root, hubClient.Create(ctx, root)
}

func demo(ctx context.Context, f *fleet.Fleet, out io.Writer, say func(string, ...any)) error {
	hubClient := f.Clients["hub"]
	if err := register(ctx, f, out, say); err != nil {
		return err
	}
	applied := time.Now()
	root, err := applyRoot(ctx, f, say, false)
	if err != nil {
		return err
	}
	stopEarly := answerEarly(ctx, f, root, say)
	defer stopEarly()

	// Follow the bursts until every one is Ready.
	last := ""
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if err := hubClient.Get(ctx, client.ObjectKeyFromObject(root), root); err != nil {
			return err
		}
		now := fmt.Sprintf("hub: root ready %d/%d", root.Status.Ready, root.Spec.Size)
		for _, b := range root.Status.Bursts {
			now += fmt.Sprintf(" | %s %s %d/%d", b.Name, b.Phase, b.Ready, b.Size)
		}
		if now != last && len(root.Status.Bursts) > 0 {
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

	sides, err := f.Federation(ctx, root)
	if err != nil {
		return err
	}
	stopEarly() // the whole federation's stand-ins take over rank 0 and the NodePort
	sim, err := join(ctx, root, sides)
	if err != nil {
		return err
	}
	defer sim.Close()
	if err := awaitReachable(ctx, f, root, say); err != nil {
		return err
	}
	printJoin(out, say, sim.Result())
	sim.Close() // the stand-in instance's overlay takes over rank 0 and the NodePort
	x, err := answerFlux(ctx, f, root, say)
	if err != nil {
		return err
	}
	defer x.Stop()
	if err := fluxfed(ctx, f, out, say, statusArgs(f)...); err != nil {
		return err
	}
	return elastic(ctx, f, out, say, false, func(root *fluxv1alpha2.MiniCluster) (instance, error) {
		x, err := f.StartFlux(ctx, root, filepath.Join(f.Env.Dir, "flux-"+root.Name))
		if err != nil {
			return nil, err
		}
		return standIn{x}, nil
	})
}

// answerFlux makes a stand-in Flux instance (e2e/fluxsim) answer the hub in root's lead broker
// container, its ranks online as their stand-in brokers join rank 0, and waits until the hub
// reports that Flux sees every rank of the federation online and the lead broker reachable.
// Until then the hub's asks failed, as they would in a container without flux.
func answerFlux(ctx context.Context, f *fleet.Fleet, root *fluxv1alpha2.MiniCluster, say func(string, ...any)) (*fleet.Flux, error) {
	x, err := f.StartFlux(ctx, root, filepath.Join(f.Env.Dir, "flux-"+root.Name))
	if err != nil {
		return nil, err
	}
	say("A stand-in flux answers the hub in %s's rank 0 container (kwok runs exec on this machine); a rank is online once its stand-in broker joins rank 0", root.Name)
	hubClient := f.Clients["hub"]
	deadline := time.Now().Add(time.Minute)
	for {
		if err := hubClient.Get(ctx, client.ObjectKeyFromObject(root), root); err != nil {
			x.Stop()
			return nil, err
		}
		fs := root.Status.Flux
		if fs != nil && fs.State == "run" && fs.Message == "" && fs.Size > 0 && fs.Online == fs.Size &&
			meta.IsStatusConditionTrue(root.Status.Conditions, fluxv1alpha2.ConditionLeadBrokerReachable) {
			say("hub: Flux %s, %d/%d ranks online", fs.State, fs.Online, fs.Size)
			return x, nil
		}
		if time.Now().After(deadline) {
			x.Stop()
			err := fmt.Errorf("the hub did not report every rank of %s online within a minute (flux: %+v); logs are in %s", root.Name, fs, f.Env.Dir)
			return nil, errors.Join(err, x.Err())
		}
		select {
		case <-ctx.Done():
			x.Stop()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// statusArgs are the arguments of fluxfed status for the demo's root, bursting-root. The
// members are read with the administrator's contexts.
func statusArgs(f *fleet.Fleet) []string {
	args := []string{"status", "bursting-root", "-n", namespace, "--context", f.Hub.Name}
	for _, m := range f.Members {
		args = append(args, "--member-context", m.Name+"="+m.Name)
	}
	return args
}

// fluxfed runs the fluxfed binary the managers run, as a user would on the clusters' kubeconfig,
// and prints its output indented.
func fluxfed(ctx context.Context, f *fleet.Fleet, out io.Writer, say func(string, ...any), args ...string) error {
	say("fluxfed %s", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, f.Binary, append(args, "--kubeconfig", f.Env.Kubeconfig)...)
	data, err := cmd.CombinedOutput()
	for line := range strings.Lines(string(data)) {
		fmt.Fprint(out, "  "+line)
	}
	if err != nil {
		return fmt.Errorf("fluxfed %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// answerEarly stands in for rank 0 from the moment the hub can greet it: once the root's lead
// broker Service has its node port and the root's broker config and certificate exist (the
// member reconciler writes them before the Job, so before rank 0's pod has a node, which is
// when the hub greets the endpoint it advertises), it starts rank 0's stand-in and serves the
// node port on every hub node in front of it, as kube-proxy serves a NodePort as soon as the
// Service exists. The returned func ends it and returns once it ended; it may be called more
// than once. When it loses the race with the hub, awaitReachable waits for the hub's next
// greeting.
func answerEarly(ctx context.Context, f *fleet.Fleet, root *fluxv1alpha2.MiniCluster, say func(string, ...any)) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var sim *brokersim.Sim
	var forwarder *clusters.Forwarder
	go func() {
		defer close(done)
		hubClient := f.Clients["hub"]
		svc, cm, secret := &corev1.Service{}, &corev1.ConfigMap{}, &corev1.Secret{}
		get := func(name string, obj client.Object) bool {
			return hubClient.Get(ctx, client.ObjectKey{Namespace: root.Namespace, Name: name}, obj) == nil
		}
		for !get(names.LeadBrokerServiceName(root), svc) || len(svc.Spec.Ports) == 0 || svc.Spec.Ports[0].NodePort == 0 ||
			!get(names.ConfigMapName(root), cm) || !get(names.CurveSecretName(root), secret) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
		rank0 := brokersim.Broker{Cluster: f.Hub.Name, Hostname: root.Name + "-0",
			BrokerTOML: []byte(cm.Data[names.KeyBrokerTOML]), CurveCert: secret.Data[names.KeyCurveCert]}
		var err error
		if sim, err = brokersim.Start(ctx, []brokersim.Broker{rank0}, brokersim.NewNetwork()); err != nil {
			say("Rank 0's stand-in did not start: %v", err)
			return
		}
		addr, listening := sim.Addr(brokersim.Listener{Cluster: rank0.Cluster, Hostname: rank0.Hostname, Port: names.DefaultBrokerPort})
		if !listening {
			say("Rank 0's stand-in does not listen: %v", sim.Result().Err())
			return
		}
		if forwarder, err = f.Hub.ForwardNodePort(svc, addr); err != nil {
			say("The lead broker's NodePort cannot be served: %v", err)
			return
		}
		say("Rank 0's stand-in answers on NodePort %d of every hub node %v", svc.Spec.Ports[0].NodePort, f.Hub.NodeAddresses)
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
			if forwarder != nil {
				_ = forwarder.Close() // the connections it carries end, which is the point
			}
			if sim != nil {
				sim.Close()
			}
		})
	}
}

// join starts a stand-in broker for every pod with the config its cluster rendered, routed as
// the clusters' networks would route it: the burst brokers dial the lead broker's NodePort,
// which a stand-in for kube-proxy serves on the hub's node. The stand-ins keep serving until
// the returned Sim is closed.
func join(ctx context.Context, root *fluxv1alpha2.MiniCluster, sides []fleet.Side) (*brokersim.Sim, error) {
	n, err := fleet.Network(root, sides)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return brokersim.Start(ctx, fleet.Brokers(sides, nil), n)
}

// awaitReachable waits until the hub finds the lead broker reachable, and leaves root as last
// read. The hub greets the endpoint as soon as rank 0's pod has a node. When answerEarly was not
// listening yet, the hub greets the endpoint again only after its probe interval (hub.Options
// ProbeInterval; the fleet runs the hub with fleet.LeadProbeInterval), so the true status can take that
// long to show.
func awaitReachable(ctx context.Context, f *fleet.Fleet, root *fluxv1alpha2.MiniCluster, say func(string, ...any)) error {
	hubClient := f.Clients["hub"]
	start := time.Now()
	deadline := start.Add(fleet.LeadProbeInterval + 30*time.Second)
	waiting := false
	for {
		if err := hubClient.Get(ctx, client.ObjectKeyFromObject(root), root); err != nil {
			return err
		}
		c := meta.FindStatusCondition(root.Status.Conditions, fluxv1alpha2.ConditionLeadBrokerReachable)
		switch {
		case c != nil && c.Status == metav1.ConditionTrue:
			if waiting {
				say("The hub's next greeting found rank 0's stand-in: %s", c.Message)
			}
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("the hub did not find the lead broker reachable within %v: %v", time.Since(start).Round(time.Second), c)
		case !waiting:
			say("Waiting for the hub to greet the lead broker again (it greets an endpoint that did not answer every %v)", fleet.LeadProbeInterval)
			waiting = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// printJoin reports what rank 0's stand-in saw.
func printJoin(out io.Writer, say func(string, ...any), res *brokersim.Result) {
	joined := fmt.Sprintf("The overlay of stand-in brokers, one per pod (pods are simulated: no real Flux runs), the burst brokers routed through the lead broker's NodePort: rank 0 (%s) saw %d of %d ranks join in %v",
		res.Root, len(res.Online), len(res.Hosts), res.JoinTime.Round(time.Millisecond/10))
	if res.Complete() {
		say("%s; every rank answers it", joined)
		return
	}
	say("%s; missing: %v", joined, res.Missing())
	for _, fl := range res.Failures {
		fmt.Fprintf(out, "  %s\n", fl.Error())
	}
}

// printPoke says how to look at the clusters while they run, with KEEP=1.
func printPoke(out io.Writer, f *fleet.Fleet, keep bool) {
	if !keep {
		fmt.Fprintln(out, "\nKEEP=1 make demo leaves all this running, and says how to look at it and how to stop it.")
		return
	}
	fmt.Fprintf(out, "\n== Poke at it\n")
	if dir, err := k8sbin.Dir("kubectl"); err == nil {
		fmt.Fprintf(out, "  alias kubectl=%s   # the kubectl the demo built, if you have none\n", filepath.Join(dir, "kubectl"))
	}
	fmt.Fprintf(out, "  export KUBECONFIG=%s\n", f.Env.Kubeconfig)
	fmt.Fprintf(out, "  %s %s\n", cmp.Or(os.Getenv("FLUXFED_BIN"), "bin/fluxfed"), strings.Join(statusArgs(f), " "))
	fmt.Fprintf(out, "  kubectl --context hub -n %s get minicluster bursting-root -o yaml\n", namespace)
	fmt.Fprintf(out, "  kubectl --context member-a -n %s get minicluster,jobs,pods\n", namespace)
	fmt.Fprintf(out, "  kubectl --context hub -n %[1]s exec $(kubectl --context hub -n %[1]s get pod -l job-name=bursting-root,batch.kubernetes.io/job-completion-index=0 -o name) -- sh -c 'flux uptime'   # the stand-in Flux\n", namespace)
	fmt.Fprintf(out, "  kubectl --context hub -n %s get events --field-selector involvedObject.name=on-demand\n", elasticNamespace)
	fmt.Fprintf(out, "  kubectl --context hub -n %s delete minicluster bursting-root   # the children go too\n", namespace)
	fmt.Fprintf(out, "  manager logs: %s/<cluster>/logs/fluxfed.log\n", f.Env.Dir)
}
