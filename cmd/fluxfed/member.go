package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	"github.com/fluxfed/fluxfed/cmd/fluxfed/internal/membership"
	"github.com/fluxfed/fluxfed/hub"
)

// memberFlags are the flags every `fluxfed member` command takes: where the hub is.
type memberFlags struct {
	kubeconfig string
	// context is --context, the hub's context as `fluxfed status` names it; hubContext is
	// --hub-context, its older name, still accepted.
	context, hubContext string
	namespace           string
}

func (m *memberFlags) bind(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&m.kubeconfig, "kubeconfig", "", "kubeconfig with the hub's and the member's contexts (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&m.context, "context", "", "kubeconfig context of the hub (default: the current context)")
	fs.StringVar(&m.hubContext, "hub-context", "", "the same as --context")
	_ = fs.MarkHidden("hub-context")
	fs.StringVar(&m.namespace, "members-namespace", hub.DefaultMembersNamespace, "namespace of the hub that holds the members' kubeconfig Secrets (the hub's --members-namespace)")
}

// hub returns the hub's context (--context, or --hub-context) and its client config.
func (m *memberFlags) hub() (string, *rest.Config, error) {
	name := m.context
	switch {
	case m.hubContext != "" && name != "" && m.hubContext != name:
		return "", nil, fmt.Errorf("--context %q and --hub-context %q name two hubs: give one (--hub-context is another name of --context)", name, m.hubContext)
	case name == "":
		name = m.hubContext
	}
	cfg, name, err := m.config("context", name)
	return name, cfg, err
}

// config returns the client config of a context of the kubeconfig and the context's name,
// naming the flag on error.
func (m *memberFlags) config(flag, kubeContext string) (*rest.Config, string, error) {
	cfg, name, err := membership.Config(m.kubeconfig, kubeContext)
	if err != nil {
		return nil, "", fmt.Errorf("--%s: %w", flag, err)
	}
	return cfg, name, nil
}

// oneName checks that a member command got exactly the member's name.
func oneName(c *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%s takes the name of one member, got %d arguments\nRun '%s --help' for usage", c.Name(), len(args), c.CommandPath())
	}
	return nil
}

func newMemberCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "member",
		Short: "Register, list and remove the member clusters of a hub",
		Long: "Registers a member cluster with a fluxfed hub, lists the members with their health, and\n" +
			"removes one. Run them where your kubeconfig reaches the hub and the member as their\n" +
			"administrator: the member's administrator credentials never reach the hub.",
		Args: unknownCommand,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	cmd.AddCommand(newMemberAddCommand(), newMemberRemoveCommand(), newMemberListCommand(), newMemberProbeCommand())
	return cmd
}

func newMemberAddCommand() *cobra.Command {
	var (
		flags         memberFlags
		memberContext string
		access, allow string
		podSecurity   string
		o             = membership.Options{}
	)
	cmd := &cobra.Command{
		Use:   "add NAME --member-context CONTEXT",
		Short: "Register a member cluster with the hub and wait until the hub reports it Ready",
		Long: "Installs on the member the identity the hub uses there (deploy/member-access, or\n" +
			"deploy/member-access-any with --access any; or uses the one the Helm chart's member mode\n" +
			"installed), lends it the --lend namespaces, mints it a token that expires, builds a\n" +
			"kubeconfig with the member's CA inline, creates its Secret and the MemberCluster on the hub,\n" +
			"and waits until the hub reports the member Ready, printing what the hub reports. A name, or\n" +
			"a cluster, that the hub has registered already is refused before anything changes; a\n" +
			"registration the hub finds unusable (unreachable, credentials refused) is undone.\n\n" +
			"Once Ready, a pod on the member greets the lead broker endpoints of --check-endpoint and of\n" +
			"the hub's roots, as the hub does, to check that bursts there can join their root; then the\n" +
			"next step is printed. --dry-run says what would be created, and creates nothing.",
		Example: "  fluxfed member add member-a --member-context member-a --context hub --lend research\n" +
			"  fluxfed member add member-a --member-context member-a --context hub --lend research --dry-run -o yaml",
		Args: oneName,
		RunE: func(c *cobra.Command, args []string) error {
			if memberContext == "" {
				return fmt.Errorf("--member-context is required: the kubeconfig context of the member to register\nRun '%s --help' for usage", c.CommandPath())
			}
			if o.Output != "" && !o.DryRun {
				return fmt.Errorf("printing the objects (yaml or json) is for a dry run: add --dry-run\nRun '%s --help' for usage", c.CommandPath())
			}
			if err := membership.ValidateEndpoints(o.CheckEndpoints); err != nil {
				return err
			}
			hubContext, hubCfg, err := flags.hub()
			if err != nil {
				return err
			}
			memberCfg, _, err := flags.config("member-context", memberContext)
			if err != nil {
				return err
			}
			o.Name, o.Hub, o.Member, o.Namespace, o.Out = args[0], hubCfg, memberCfg, flags.namespace, c.OutOrStdout()
			o.HubContext, o.MemberContext = hubContext, memberContext
			o.Access, o.Allow, o.PodSecurity = membership.Access(access), fedv1alpha1.NamespaceAllow(allow), fedv1alpha1.PodSecurityLevel(podSecurity)
			_, err = membership.Add(c.Context(), o)
			return err
		},
	}
	flags.bind(cmd)
	fs := cmd.Flags()
	fs.StringVar(&memberContext, "member-context", "", "kubeconfig context of the member to register (required)")
	fs.StringVar(&o.MemberServer, "member-server", "", "the member's API server URL as the hub reaches it (default: the member context's)")
	fs.StringVar(&access, "access", "", "what the hub may do on the member: namespaces (only the --lend namespaces) or any (default: namespaces, or what the chart installed)")
	fs.StringSliceVar(&o.Lend, "lend", nil, "namespaces lent to the hub, created if missing (with --access namespaces)")
	fs.StringVar(&allow, "allow", "", "spec.namespaces.allow of the MemberCluster: Mirror, Listed or Any (default: Any with --access any, else Mirror)")
	fs.BoolVar(&o.CreateNamespaces, "create-namespaces", false, "let the hub create the children's namespaces (with --access any)")
	fs.StringVar(&podSecurity, "pod-security", "", "spec.podSecurity.level of the MemberCluster (default: the CRD's)")
	fs.DurationVar(&o.TokenTTL, "token-ttl", 0, "how long the hub's token is valid (default 720h, or what the member allows)")
	fs.BoolVar(&o.NonExpiringToken, "non-expiring-token", false, "mint a token that never expires (deploy/member-access-token) instead")
	fs.DurationVar(&o.Wait, "wait", membership.DefaultWait, "how long to wait for the hub to report the member Ready (negative: do not wait)")
	fs.BoolVar(&o.DryRun, "dry-run", false, "check both clusters and say what would be created on each; create nothing")
	fs.StringVarP(&o.Output, "output", "o", "", "with --dry-run: print the objects that would be created, as yaml or json (the token left out)")
	fs.StringSliceVar(&o.CheckEndpoints, "check-endpoint", nil, "HOST:PORT of a lead broker endpoint that the member's pods must reach (a hub node and a NodePort); the hub's roots' endpoints are added")
	fs.BoolVar(&o.SkipDataPathCheck, "skip-data-path-check", false, "do not check from a pod on the member that it reaches the lead broker endpoints")
	fs.StringVar(&o.CheckImage, "check-image", "", "image of the data-path check's pod (default: the image of the member's fluxfed manager)")
	fs.DurationVar(&o.CheckTimeout, "check-timeout", membership.DefaultCheckTimeout, "how long the data-path check may take")
	_ = cmd.RegisterFlagCompletionFunc("access", cobra.FixedCompletions([]string{string(membership.AccessNamespaces), string(membership.AccessAny)}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"yaml", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func newMemberRemoveCommand() *cobra.Command {
	var (
		flags         memberFlags
		memberContext string
		o             = membership.RemoveOptions{}
	)
	cmd := &cobra.Command{
		Use:   "remove NAME [--member-context CONTEXT]",
		Short: "Remove a member from the hub and the hub's identity from the member",
		Long: "Refuses while child MiniClusters of any hub still exist on the member (delete their roots\n" +
			"first), then deletes the MemberCluster and its Secret on the hub and, on the member, the\n" +
			"identity member add installed. --force removes it anyway and leaves the children running;\n" +
			"without --member-context, --force only removes it from the hub.",
		Example: "  fluxfed member remove member-a --member-context member-a --context hub",
		Args:    oneName,
		RunE: func(c *cobra.Command, args []string) error {
			if memberContext == "" && !o.Force {
				return fmt.Errorf("--member-context is required (or --force, to remove the member from the hub only)\nRun '%s --help' for usage", c.CommandPath())
			}
			_, hubCfg, err := flags.hub()
			if err != nil {
				return err
			}
			if memberContext != "" {
				if o.Member, _, err = flags.config("member-context", memberContext); err != nil {
					return err
				}
			}
			o.Name, o.Hub, o.Namespace, o.Out = args[0], hubCfg, flags.namespace, c.OutOrStdout()
			return membership.Remove(c.Context(), o)
		},
	}
	flags.bind(cmd)
	fs := cmd.Flags()
	fs.StringVar(&memberContext, "member-context", "", "kubeconfig context of the member")
	fs.BoolVar(&o.Force, "force", false, "remove it even while children run there (they are left running, unmanaged)")
	fs.BoolVar(&o.KeepAccess, "keep-access", false, "leave the hub's identity on the member (another hub may use it)")
	return cmd
}

func newMemberListCommand() *cobra.Command {
	var (
		flags  memberFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "list [-o wide|yaml|json]",
		Short: "List the members of the hub with their health",
		Long: "Lists the members of the hub with their health, then, for each member, every condition\n" +
			"the hub reports that is not True, with its reason and message. -o wide adds the cluster ID\n" +
			"and the namespaces the hub watches there; -o yaml and -o json print the MemberClusters.",
		Example: "  fluxfed member list --context hub\n  fluxfed member list --context hub -o yaml",
		Args:    noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if output != membership.FormatTable && !slices.Contains(membership.Formats, output) {
				return fmt.Errorf("--output %q is not one of %s\nRun '%s --help' for usage", output, strings.Join(membership.Formats, ", "), c.CommandPath())
			}
			hubContext, hubCfg, err := flags.hub()
			if err != nil {
				return err
			}
			rows, err := membership.ListAs(c.Context(), hubCfg, hubContext)
			if err != nil {
				return err
			}
			return membership.Print(c.OutOrStdout(), rows, time.Now(), output)
		},
	}
	flags.bind(cmd)
	// list reads MemberClusters, wherever their Secrets are.
	_ = cmd.Flags().MarkHidden("members-namespace")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: "+strings.Join(membership.Formats, ", ")+" (default: the table)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(membership.Formats, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// newMemberProbeCommand is what the data-path check of member add runs in a pod on the member:
// it greets lead broker endpoints as the hub does. Hidden: it is for that pod.
func newMemberProbeCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "probe HOST:PORT...",
		Short:  "Greet lead broker endpoints as the hub does (the data-path check's pod runs it)",
		Hidden: true,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("probe takes one or more HOST:PORT endpoints\nRun '%s --help' for usage", c.CommandPath())
			}
			return membership.ValidateEndpoints(args)
		},
		RunE: func(c *cobra.Command, args []string) error {
			return membership.ProbeAndRecord(c.Context(), args, c.OutOrStdout())
		},
	}
}
