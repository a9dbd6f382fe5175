package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"strconv"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/fluxfed/fluxfed/hub/gateway"
)

// hubFlags reach a root on the hub: the kubeconfig, its context and the namespace.
type hubFlags struct {
	kubeconfig, context, namespace string
}

func (f *hubFlags) add(c *cobra.Command) {
	fs := c.Flags()
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig to read (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&f.context, "context", "", "kubeconfig context of the hub (default: the current context)")
	fs.StringVarP(&f.namespace, "namespace", "n", "", "namespace of the root MiniCluster (default: the context's namespace)")
}

// client returns the hub's config, its namespace and a client of the gateway's API.
func (f *hubFlags) client() (*rest.Config, string, rest.Interface, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, "", nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	ns := f.namespace
	if ns == "" {
		if ns, _, err = loader.Namespace(); err != nil {
			return nil, "", nil, fmt.Errorf("reading the context's namespace: %w", err)
		}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", nil, err
	}
	return cfg, ns, cs.CoreV1().RESTClient(), nil
}

// gatewayPath is the path of what of root namespace/name.
func gatewayPath(namespace, name, what string) string {
	return "/apis/" + gateway.Group + "/" + gateway.Version + "/namespaces/" + namespace + "/miniclusters/" + name + "/" + what
}

// gatewayError says what a failed request to the gateway means for the user.
func gatewayError(err error) error {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return err
	}
	switch code := status.Status().Code; {
	case code == http.StatusNotFound && (status.Status().Details == nil || status.Status().Details.Name == ""):
		// Not a root or a pod that is missing: the path itself is not served.
		return fmt.Errorf("%w (is the hub's gateway installed? kubectl get apiservice %s shows it)", err, gateway.APIServiceName)
	case code == http.StatusServiceUnavailable:
		return fmt.Errorf("the hub's gateway does not answer (kubectl get apiservice %s says why): %w", gateway.APIServiceName, err)
	}
	return err
}

type logsOptions struct {
	hubFlags
	burst, container string
	rank             int
	follow, previous bool
	tail             int64
}

func newLogsCommand() *cobra.Command {
	opts := &logsOptions{}
	cmd := &cobra.Command{
		Use:   "logs ROOT",
		Short: "Print the log of a broker of a root, on the hub or on a member, through the hub",
		Long: "Prints the log of the Flux broker of one rank of a root MiniCluster: the lead broker by default,\n" +
			"a burst's first broker with --burst, any rank with --rank. The hub's gateway reads it, on\n" +
			"the hub or on the member that runs it, for a user who may read the logs of the root's own\n" +
			"pods on the hub (get pods/log in its namespace): no member kubeconfig is needed.",
		Example: "  fluxfed logs lammps -n research\n" +
			"  fluxfed logs lammps -n research --burst burst-a --follow\n" +
			"  fluxfed logs lammps -n research --rank 5 --tail 20",
		Args: exactlyOneRoot,
		RunE: func(c *cobra.Command, args []string) error {
			return runLogs(c.Context(), opts, args[0], c.OutOrStdout())
		},
	}
	opts.add(cmd)
	fs := cmd.Flags()
	fs.StringVar(&opts.burst, "burst", "", "the burst whose broker to read (its first rank unless --rank)")
	fs.IntVar(&opts.rank, "rank", -1, "the rank whose broker to read (default: 0, the lead broker)")
	fs.StringVarP(&opts.container, "container", "c", "", "the container (default: the one that runs Flux)")
	fs.BoolVarP(&opts.follow, "follow", "f", false, "keep printing as the log grows")
	fs.BoolVarP(&opts.previous, "previous", "p", false, "the log of the container's previous run")
	fs.Int64Var(&opts.tail, "tail", -1, "only the last lines (default: all)")
	return cmd
}

func exactlyOneRoot(c *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%s takes the name of one root MiniCluster, got %d arguments\nRun '%s --help' for usage", c.Name(), len(args), c.CommandPath())
	}
	return nil
}

func runLogs(ctx context.Context, opts *logsOptions, name string, stdout io.Writer) error {
	_, ns, rc, err := opts.client()
	if err != nil {
		return err
	}
	req := rc.Get().AbsPath(gatewayPath(ns, name, "log"))
	if opts.burst != "" {
		req.Param("burst", opts.burst)
	}
	if opts.rank >= 0 {
		req.Param("rank", strconv.Itoa(opts.rank))
	}
	if opts.container != "" {
		req.Param("container", opts.container)
	}
	if opts.follow {
		req.Param("follow", "true")
	}
	if opts.previous {
		req.Param("previous", "true")
	}
	if opts.tail >= 0 {
		req.Param("tailLines", strconv.FormatInt(opts.tail, 10))
	}
	stream, err := req.Stream(ctx)
	if err != nil {
		return gatewayError(err)
	}
	defer func() { _ = stream.Close() }()
	_, err = io.Copy(stdout, stream)
	return err
}

type execOptions struct {
	hubFlags
	stdin, tty bool
}

func newExecCommand() *cobra.Command {
	opts := &execOptions{}
	cmd := &cobra.Command{
		Use:   "exec ROOT -- COMMAND [ARG...]",
		Short: "Run a command, such as flux, in the Flux instance of a root's lead broker, through the hub",
		Long: "Runs a command in the container of a root's lead broker, within its Flux instance (FLUX_URI\n" +
			"set, the flux view's commands first in PATH), and exits with the command's status. The hub's\n" +
			"gateway runs it for a user who may exec into the root's pods (create pods/exec in its\n" +
			"namespace on the hub).",
		Example: "  fluxfed exec lammps -n research -- flux resource list\n" +
			"  fluxfed exec lammps -n research -- flux jobs -a\n" +
			"  fluxfed exec lammps -n research -it -- flux proxy local:///mnt/flux/view/run/flux/local",
		Args: func(c *cobra.Command, args []string) error {
			if c.ArgsLenAtDash() != 1 || len(args) < 2 {
				return fmt.Errorf("exec takes the root's name, then -- and the command, e.g. fluxfed exec lammps -- flux resource list\nRun '%s --help' for usage", c.CommandPath())
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			return runExec(c.Context(), opts, args[0], args[1:], c.InOrStdin(), c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	opts.add(cmd)
	cmd.Flags().BoolVarP(&opts.stdin, "stdin", "i", false, "pass standard input to the command")
	cmd.Flags().BoolVarP(&opts.tty, "tty", "t", false, "give the command a terminal")
	return cmd
}

// exitError ends fluxfed with a command's exit status.
type exitError struct{ code int }

func (e exitError) Error() string { return "command terminated with exit code " + strconv.Itoa(e.code) }

func runExec(ctx context.Context, opts *execOptions, name string, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cfg, ns, rc, err := opts.client()
	if err != nil {
		return err
	}
	req := rc.Post().AbsPath(gatewayPath(ns, name, "exec")).Param("stdout", "true").Param("stderr", strconv.FormatBool(!opts.tty))
	for _, a := range argv {
		req.Param("command", a)
	}
	streams := remotecommand.StreamOptions{Stdout: stdout, Tty: opts.tty}
	if !opts.tty {
		streams.Stderr = stderr
	}
	if opts.stdin {
		req.Param("stdin", "true")
		streams.Stdin = stdin
	}
	if opts.tty {
		req.Param("tty", "true")
	}
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		return err
	}
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		return err
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(error) bool { return true })
	if err != nil {
		return err
	}
	err = exec.StreamWithContext(ctx, streams)
	var exit utilexec.CodeExitError
	if errors.As(err, &exit) {
		return exitError{code: exit.Code}
	}
	return gatewayError(err)
}

// exitCode is the status fluxfed ends with for err.
func exitCode(err error) int {
	var exit exitError
	if errors.As(err, &exit) {
		return exit.code
	}
	return 1
}
