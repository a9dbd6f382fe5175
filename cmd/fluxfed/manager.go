package main

import (
	"github.com/spf13/cobra"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/fluxfed/fluxfed/internal/manager"
	"github.com/fluxfed/fluxfed/internal/manager/hubmanager"
)

// newScheme returns the types the manager works with: Kubernetes' built-in ones and fluxfed's.
func newScheme() (*k8sruntime.Scheme, error) { return manager.NewScheme() }

// newManagerCommand is `fluxfed manager` (internal/manager, and internal/manager/hubmanager for
// --hub), its flags grouped in its help.
func newManagerCommand() *cobra.Command {
	opts, hubOpts := &manager.Options{}, &hubmanager.Options{}
	cmd := &cobra.Command{
		Use:   "manager",
		Short: "Run the MiniCluster operator (with --hub, also the bursting hub)",
		Long: "Runs the operator: it reconciles the MiniClusters of its cluster. With --hub it is also the\n" +
			"hub, which bursts root MiniClusters onto the member clusters registered as MemberClusters.",
		Example: "  fluxfed manager --leader-elect\n" +
			"  fluxfed manager --hub --dial-allow 10.0.0.0/8 --zap-log-level debug",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return manager.Run(cmd.Context(), opts, hubOpts, buildVersion(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	opts.BindGeneral(fs)
	general := flagNames(fs)
	opts.BindLogging(fs)
	setGroup(fs, groupLogging, general)
	general = flagNames(fs)
	hubOpts.Bind(fs)
	setGroup(fs, groupHub, general)
	return cmd
}
