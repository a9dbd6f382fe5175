package clusters

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fluxfed/fluxfed/e2e/netguard"
)

// pollInterval spaces the checks while waiting; bring-up takes seconds, so finer gains nothing.
const pollInterval = 200 * time.Millisecond

// restConfig reads a kubeconfig written by this package, with client limits generous enough for
// tests that create many objects at once, and its dials guarded (guard).
func restConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	guard(cfg)
	return cfg, nil
}

// guard makes the clients of cfg dial through netguard: an API server of these clusters is on
// loopback, and a kubeconfig that says otherwise is a bug that must not reach the network.
func guard(cfg *rest.Config) {
	cfg.Dial = (&netguard.Dialer{}).DialContext
}

// poll calls check until it reports done, a process of c exits, or ctx ends. check returns why
// it is not done yet, quoted when the wait times out, together with the end of the log of the
// component that is late (suspect), if c has it.
func (env *Environment) poll(ctx context.Context, c *Cluster, what, suspect string, check func(context.Context) (bool, error)) error {
	var last error
	for {
		if err := env.exited(c); err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		done, err := check(ctx)
		if done {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			err := fmt.Errorf("waiting for %s: %w", what, ctx.Err())
			if last != nil {
				err = fmt.Errorf("%w (last: %w)", err, last)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				if p := env.process(c, suspect); p != nil {
					err = fmt.Errorf("%w; last lines of %s:\n%s", err, p.Log, tail(p.Log, tailLines))
				}
			}
			return err
		case <-time.After(pollInterval):
		}
	}
}

// process returns the last process of c started for component, or nil.
func (env *Environment) process(c *Cluster, component string) *Process {
	env.mu.Lock()
	defer env.mu.Unlock()
	for i := len(c.Processes) - 1; i >= 0; i-- {
		if c.Processes[i].Component == component {
			return c.Processes[i]
		}
	}
	return nil
}

// readyz reports whether the API server answers /readyz with ok, and otherwise which of its
// checks fail.
func readyz(ctx context.Context, cs kubernetes.Interface) (bool, error) {
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err == nil && strings.TrimSpace(string(body)) == "ok" {
		return true, nil
	}
	if failing := failingChecks(string(body)); len(failing) > 0 {
		return false, fmt.Errorf("readyz: not ready: %s", strings.Join(failing, ", "))
	}
	if err != nil {
		return false, err
	}
	return false, fmt.Errorf("readyz: %q", body)
}

// failingChecks picks the names of the failing checks from a verbose /readyz answer, whose lines
// read "[+]name ok" or "[-]name failed: reason withheld".
func failingChecks(body string) []string {
	var failing []string
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, "[-]"); ok {
			name, _, _ := strings.Cut(rest, " ")
			failing = append(failing, name)
		}
	}
	return failing
}

// waitUsable waits until c serves its API, can take pods in namespace default (the
// ServiceAccount admission plugin refuses them until the default ServiceAccount exists) and has
// nodes Ready nodes, and fills in c.Config and c.NodeAddresses.
func (env *Environment) waitUsable(ctx context.Context, c *Cluster, nodes int) error {
	cfg, err := restConfig(c.Kubeconfig)
	if err != nil {
		return err
	}
	c.Config = cfg
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building a client: %w", err)
	}
	if err := env.poll(ctx, c, "the API server to be ready", componentAPIServer, func(ctx context.Context) (bool, error) {
		return readyz(ctx, cs)
	}); err != nil {
		return err
	}
	if err := env.poll(ctx, c, "the default ServiceAccount in namespace default", componentController, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	}); err != nil {
		return err
	}
	var addrs []string
	if err := env.poll(ctx, c, fmt.Sprintf("%d nodes to be Ready", nodes), componentKwok, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var notReady []string
		addrs, notReady = readyNodes(list.Items)
		if len(addrs) < nodes {
			return false, fmt.Errorf("%d of %d nodes Ready; not Ready: %v", len(addrs), nodes, notReady)
		}
		return true, nil
	}); err != nil {
		return err
	}
	// Other clusters' goroutines write the state file, which holds the addresses.
	return env.update(func() { c.NodeAddresses = addrs })
}

// readyNodes returns the InternalIP of every Ready node in node name order, and the names of the
// nodes that are not Ready.
func readyNodes(nodes []corev1.Node) (addresses, notReady []string) {
	slices.SortFunc(nodes, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	for _, n := range nodes {
		if !nodeReady(&n) {
			notReady = append(notReady, n.Name)
			continue
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				addresses = append(addresses, a.Address)
				break
			}
		}
	}
	return addresses, notReady
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
