package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	fedv1alpha1 "github.com/fluxfed/fluxfed/api/fluxfed/v1alpha1"
	"github.com/fluxfed/fluxfed/hub"
	"github.com/fluxfed/fluxfed/internal/membership"
)

// memberFlags are the flags every `fluxfed member` command takes: where the hub is.
type memberFlags struct {
	kubeconfig string
	hubContext string
	namespace  string
}

func (m *memberFlags) bind(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&m.kubeconfig, "kubeconfig", "", "kubeconfig with the hub's and the member's contexts (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&m.hubContext, "hub-context", "", "kubeconfig context of the hub (default: the current context)")
	fs.StringVar(&m.namespace, "members-namespace", hub.DefaultMembersNamespace, "namespace of the hub that holds the members' kubeconfig Secrets (the hub's --members-namespace)")
}

// config returns the client config of a context of the kubeconfig, naming the flag on error.
func (m *memberFlags) config(flag, kubeContext string) (*rest.Config, error) {
	cfg, err := membership.Config(m.kubeconfig, kubeContext)
	if err != nil {
		return nil, fmt.Errorf("--%s %q: %w", flag, kubeContext, err)
	}
	return cfg, nil
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
	cmd.AddCommand(newMemberAddCommand(), newMemberRemoveCommand(), newMemberListCommand())
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
			"deploy/member-access-any with --access any), lends it the --lend namespaces, mints it a\n" +
			"token that expires, builds a kubeconfig with the member's CA inline, creates its Secret and\n" +
			"the MemberCluster on the hub, and waits until the hub reports the member Ready. A name, or\n" +
			"a cluster, that the hub has registered already is refused before anything changes.",
		Example: "  fluxfed member add member-a --member-context member-a --hub-context hub --lend research",
		Args:    oneName,
		RunE: func(c *cobra.Command, args []string) error {
			if memberContext == "" {
				return fmt.Errorf("--member-context is required: the kubeconfig context of the member to register\nRun '%s --help' for usage", c.CommandPath())
			}
			hubCfg, err := flags.config("hub-context", flags.hubContext)
			if err != nil {
				return err
			}
			memberCfg, err := flags.config("member-context", memberContext)
			if err != nil {
				return err
			}
			o.Name, o.Hub, o.Member, o.Namespace, o.Out = args[0], hubCfg, memberCfg, flags.namespace, c.OutOrStdout()
			o.Access, o.Allow, o.PodSecurity = membership.Access(access), fedv1alpha1.NamespaceAllow(allow), fedv1alpha1.PodSecurityLevel(podSecurity)
			_, err = membership.Add(c.Context(), o)
			return err
		},
	}
	flags.bind(cmd)
	fs := cmd.Flags()
	fs.StringVar(&memberContext, "member-context", "", "kubeconfig context of the member to register (required)")
	fs.StringVar(&o.MemberServer, "member-server", "", "the member's API server URL as the hub reaches it (default: the member context's)")
	fs.StringVar(&access, "access", string(membership.AccessNamespaces), "what the hub may do on the member: namespaces (only the --lend namespaces) or any")
	fs.StringSliceVar(&o.Lend, "lend", nil, "namespaces lent to the hub, created if missing (with --access namespaces)")
	fs.StringVar(&allow, "allow", "", "spec.namespaces.allow of the MemberCluster: Mirror, Listed or Any (default: Any with --access any, else Mirror)")
	fs.BoolVar(&o.CreateNamespaces, "create-namespaces", false, "let the hub create the children's namespaces (with --access any)")
	fs.StringVar(&podSecurity, "pod-security", "", "spec.podSecurity.level of the MemberCluster (default: the CRD's)")
	fs.DurationVar(&o.TokenTTL, "token-ttl", 0, "how long the hub's token is valid (default 720h, or what the member allows)")
	fs.BoolVar(&o.NonExpiringToken, "non-expiring-token", false, "mint a token that never expires (deploy/member-access-token) instead")
	fs.DurationVar(&o.Wait, "wait", 2*time.Minute, "how long to wait for the hub to report the member Ready (negative: do not wait)")
	_ = cmd.RegisterFlagCompletionFunc("access", cobra.FixedCompletions([]string{string(membership.AccessNamespaces), string(membership.AccessAny)}, cobra.ShellCompDirectiveNoFileComp))
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
		Example: "  fluxfed member remove member-a --member-context member-a --hub-context hub",
		Args:    oneName,
		RunE: func(c *cobra.Command, args []string) error {
			if memberContext == "" && !o.Force {
				return fmt.Errorf("--member-context is required (or --force, to remove the member from the hub only)\nRun '%s --help' for usage", c.CommandPath())
			}
			hubCfg, err := flags.config("hub-context", flags.hubContext)
			if err != nil {
				return err
			}
			if memberContext != "" {
				if o.Member, err = flags.config("member-context", memberContext); err != nil {
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
	var flags memberFlags
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the members of the hub with their health",
		Example: "  fluxfed member list --hub-context hub",
		Args:    noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			hubCfg, err := flags.config("hub-context", flags.hubContext)
			if err != nil {
				return err
			}
			rows, err := membership.List(c.Context(), hubCfg)
			if err != nil {
				return err
			}
			return membership.Print(c.OutOrStdout(), rows, time.Now())
		},
	}
	flags.bind(cmd)
	// list reads MemberClusters, wherever their Secrets are.
	_ = cmd.Flags().MarkHidden("members-namespace")
	return cmd
}
