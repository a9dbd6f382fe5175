package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/cmd/fluxfed/internal/status"
	"github.com/fluxfed/fluxfed/hub"
)

// statusOptions are the flags of `fluxfed status`.
type statusOptions struct {
	kubeconfig       string
	context          string
	namespace        string
	output           string
	membersNamespace string
	memberContexts   []string
	memberTimeout    time.Duration
}

func newStatusCommand() *cobra.Command {
	opts := &statusOptions{}
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Show a MiniCluster and its bursts across clusters: hostlist, conditions, Flux, pods by rank",
		Long: "Shows a MiniCluster as its cluster and, for a root that bursts, its members see it: the lead\n" +
			"broker's endpoint, the global hostlist and which of its ranks run or are reserved, the\n" +
			"conditions, each burst with what the root's Flux instance sees of it (ranks online,\n" +
			"draining, drained), and the broker pods of every cluster by rank, with their node.\n\n" +
			"A root is read from the hub (the kubeconfig context). Its bursts' pods are read from the\n" +
			"members with the kubeconfig the hub uses, from the Secret each MemberCluster names (which\n" +
			"takes read access to Secrets in --members-namespace); --member-context NAME=CONTEXT reads\n" +
			"member NAME with a context of your kubeconfig instead. Nothing is written anywhere.",
		Example: "  fluxfed status lammps -n research\n" +
			"  fluxfed status lammps -n research --context hub --member-context member-a=member-a -o yaml",
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("status takes the name of one MiniCluster, got %d arguments\nRun '%s --help' for usage", len(args), c.CommandPath())
			}
			return nil
		},
		ValidArgsFunction: func(c *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return opts.miniClusterNames(c.Context()), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			return runStatus(c.Context(), opts, args[0], c.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.kubeconfig, "kubeconfig", "", "kubeconfig to read (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&opts.context, "context", "", "kubeconfig context of the MiniCluster's cluster, the hub for a root (default: the current context)")
	fs.StringVarP(&opts.namespace, "namespace", "n", "", "namespace of the MiniCluster (default: the context's namespace)")
	fs.StringVarP(&opts.output, "output", "o", status.FormatText, "output format: "+strings.Join(status.Formats, ", "))
	fs.StringVar(&opts.membersNamespace, "members-namespace", hub.DefaultMembersNamespace, "namespace of the hub that holds the kubeconfig Secrets of the MemberClusters (the hub's --members-namespace)")
	fs.StringArrayVar(&opts.memberContexts, "member-context", nil, "MEMBER=CONTEXT: read member MEMBER with kubeconfig context CONTEXT instead of its Secret's kubeconfig (repeatable)")
	fs.DurationVar(&opts.memberTimeout, "member-timeout", 10*time.Second, "how long each request to a member may take")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(status.Formats, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("context", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return opts.contextNames(), cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

func runStatus(ctx context.Context, opts *statusOptions, name string, stdout io.Writer) error {
	if !slices.Contains(status.Formats, opts.output) {
		return fmt.Errorf("--output %q is not one of %s", opts.output, strings.Join(status.Formats, ", "))
	}
	memberContexts := map[string]string{}
	for _, mc := range opts.memberContexts {
		member, context, ok := strings.Cut(mc, "=")
		if !ok || member == "" || context == "" {
			return fmt.Errorf("--member-context %q is not MEMBER=CONTEXT", mc)
		}
		memberContexts[member] = context
	}
	loader := opts.loader("")
	cfg, err := loader.ClientConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	namespace := opts.namespace
	if namespace == "" {
		if namespace, _, err = loader.Namespace(); err != nil {
			return fmt.Errorf("reading the context's namespace: %w", err)
		}
	}
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("connecting to the cluster: %w", err)
	}
	members := &status.Members{Hub: c, Namespace: opts.membersNamespace, Configs: map[string]*rest.Config{},
		Scheme: scheme, Timeout: opts.memberTimeout}
	for member, context := range memberContexts {
		if members.Configs[member], err = opts.loader(context).ClientConfig(); err != nil {
			return fmt.Errorf("--member-context %s=%s: %w", member, context, err)
		}
	}
	report, err := status.Collect(ctx, status.Source{Cluster: opts.clusterName(loader), Client: c, Members: members},
		client.ObjectKey{Namespace: namespace, Name: name})
	if err != nil {
		return err
	}
	return status.Write(stdout, report, opts.output)
}

// loader loads the kubeconfig of the flags, with context in place of --context when set.
func (o *statusOptions) loader(context string) clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: o.context}
	if context != "" {
		overrides.CurrentContext = context
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
}

// clusterName names the cluster of the MiniCluster in the report: the context's name.
func (o *statusOptions) clusterName(loader clientcmd.ClientConfig) string {
	if o.context != "" {
		return o.context
	}
	if raw, err := loader.RawConfig(); err == nil && raw.CurrentContext != "" {
		return raw.CurrentContext
	}
	return "this cluster"
}

// contextNames are the contexts of the kubeconfig, for completion.
func (o *statusOptions) contextNames() []string {
	raw, err := o.loader("").RawConfig()
	if err != nil {
		return nil
	}
	var names []string
	for name := range raw.Contexts {
		names = append(names, name)
	}
	return names
}

// miniClusterNames are the MiniClusters of the namespace, for completion.
func (o *statusOptions) miniClusterNames(ctx context.Context) []string {
	loader := o.loader("")
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil
	}
	namespace := o.namespace
	if namespace == "" {
		namespace, _, _ = loader.Namespace()
	}
	scheme := k8sruntime.NewScheme()
	if fluxv1alpha2.AddToScheme(scheme) != nil {
		return nil
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil
	}
	var list fluxv1alpha2.MiniClusterList
	if c.List(ctx, &list, client.InNamespace(namespace)) != nil {
		return nil
	}
	var names []string
	for _, mc := range list.Items {
		names = append(names, mc.Name)
	}
	return names
}
