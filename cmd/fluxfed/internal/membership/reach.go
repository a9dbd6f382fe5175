package membership

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
)

// DefaultReachTimeout bounds the first request to each cluster: a cluster that does not answer
// within it is reported at once, not after client-go's retries.
const DefaultReachTimeout = 10 * time.Second

// HubInstallHint says how to install fluxfed in hub mode, for the errors that find it missing.
const HubInstallHint = "helm install fluxfed deploy/chart/fluxfed -n fluxfed-system --create-namespace --set mode=hub, " +
	"or kubectl apply --server-side -k deploy/hub"

// Config returns the configuration of a context of a kubeconfig, as kubectl would, and the
// context's name: path "" follows $KUBECONFIG and ~/.kube/config, and context "" is the current
// context. It is how `fluxfed member` reads --kubeconfig, --context and --member-context. A
// context the kubeconfig does not have is refused in one line that lists those it has.
func Config(path, kubeContext string) (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return nil, "", fmt.Errorf("the kubeconfig %s cannot be read: %w", path, errors.Unwrap(err))
		}
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext})
	raw, err := loader.RawConfig()
	if err != nil {
		return nil, "", fmt.Errorf("reading the kubeconfig %s: %w", kubeconfigPaths(rules), err)
	}
	name := kubeContext
	if name == "" {
		name = raw.CurrentContext
	}
	var names []string
	for n := range raw.Contexts {
		names = append(names, n)
	}
	slices.Sort(names)
	has := "it has none"
	if len(names) > 0 {
		has = "it has " + strings.Join(names, ", ")
	}
	switch {
	case name == "":
		return nil, "", fmt.Errorf("the kubeconfig %s has no current context: name one (%s)", kubeconfigPaths(rules), has)
	case raw.Contexts[name] == nil:
		return nil, "", fmt.Errorf("the kubeconfig %s has no context %q (%s)", kubeconfigPaths(rules), name, has)
	}
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("context %q of the kubeconfig %s: %w", name, kubeconfigPaths(rules), err)
	}
	return cfg, name, nil
}

// kubeconfigPaths names the files a kubeconfig is read from.
func kubeconfigPaths(rules *clientcmd.ClientConfigLoadingRules) string {
	if rules.ExplicitPath != "" {
		return rules.ExplicitPath
	}
	return strings.Join(rules.GetLoadingPrecedence(), ":")
}

// cluster names a cluster in messages: which flag chose it and where its API server is.
type cluster struct {
	// role is "hub" or "member"; flag is the flag that names its context.
	role, flag string
	// context is the context's name, "" for the current one.
	context string
	server  string
}

func (c cluster) String() string {
	if c.context == "" {
		return fmt.Sprintf("the %s (%s, server %s)", c.role, c.flag, c.server)
	}
	return fmt.Sprintf("the %s context %q (%s, server %s)", c.role, c.context, c.flag, c.server)
}

// unreachable words an error of a first request to c: a cluster that does not answer, refuses
// the credentials, or does not serve what is asked, said with what to check.
func (c cluster) unreachable(err error, timeout time.Duration) error {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s did not answer within %v: is the context right, and does the cluster run and reach you?", c, timeout)
	case errors.As(err, &dnsErr):
		return fmt.Errorf("%s cannot be reached: %w: is the server's name right?", c, dnsErr)
	case errors.As(err, &opErr):
		return fmt.Errorf("%s cannot be reached: %w: is the context right, and does the cluster run?", c, opErr)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%s refused your credentials: %w: log in again (your kubeconfig's token may have expired)", c, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s does not let you %s: %w: use a context of the cluster's administrator", c, verbOf(c.role), err)
	}
	return fmt.Errorf("%s: %w", c, err)
}

func verbOf(role string) string {
	if role == "hub" {
		return "list MemberClusters"
	}
	return "read namespace kube-system"
}

// reachHub lists the hub's MemberClusters within timeout: it tells a hub that does not answer,
// and a cluster without fluxfed in hub mode, from the rest.
func reachHub(ctx context.Context, c client.Client, hub cluster, timeout time.Duration) (*fedv1alpha1.MemberClusterList, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var list fedv1alpha1.MemberClusterList
	err := c.List(ctx, &list)
	switch {
	case err == nil:
		return &list, nil
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return nil, fmt.Errorf("%s has no MemberCluster API: is fluxfed installed there in hub mode (%s)?", hub, HubInstallHint)
	}
	return nil, hub.unreachable(err, timeout)
}
