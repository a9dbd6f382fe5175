package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fluxfed/fluxfed/internal/buildinfo"
)

// version is stamped at build time: go build -ldflags "-X main.version=v0.1.0".
var version = ""

// buildVersion is the version of this build (buildinfo.Version).
func buildVersion() string { return buildinfo.Version(version) }

// versionLine is what `fluxfed version` and `fluxfed --version` print.
func versionLine() string { return buildinfo.Line("fluxfed", version) }

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionLine())
			return err
		},
	}
}
