package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// annotationGroup is the flag annotation that names the section of the help a flag is listed in;
// a flag without it is listed under groupGeneral.
const annotationGroup = "fluxfed.io/help-group"

// The sections of a command's flags in its help, in the order they are listed.
const (
	groupGeneral = "General"
	groupHub     = "Hub"
	groupLogging = "Logging"
)

// groupTitles are the headings of the sections; a group missing here is listed under its name.
var groupTitles = map[string]string{
	groupGeneral: "Flags",
	groupHub:     "Hub flags (used with --hub)",
	groupLogging: "Logging flags",
}

var groupOrder = []string{groupGeneral, groupHub, groupLogging}

// usageColumns is where flag descriptions wrap.
const usageColumns = 100

// setGroup puts every flag of fs that has no group yet and is not in before into group.
func setGroup(fs *pflag.FlagSet, group string, before map[string]bool) {
	fs.VisitAll(func(f *pflag.Flag) {
		if before[f.Name] || len(f.Annotations[annotationGroup]) > 0 {
			return
		}
		if f.Annotations == nil {
			f.Annotations = map[string][]string{}
		}
		f.Annotations[annotationGroup] = []string{group}
	})
}

// flagNames returns the names of the flags fs has now.
func flagNames(fs *pflag.FlagSet) map[string]bool {
	names := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) { names[f.Name] = true })
	return names
}

// groupOf returns the help section of f.
func groupOf(f *pflag.Flag) string {
	if g := f.Annotations[annotationGroup]; len(g) > 0 {
		return g[0]
	}
	return groupGeneral
}

// usage writes a command's usage: its usage line, examples, subcommands, and its flags in
// sections (General, Hub, Logging), sorted by name within each.
func usage(c *cobra.Command) error {
	var b strings.Builder
	b.WriteString("Usage:\n")
	// fluxfed itself runs only to print its help.
	if c.Runnable() && !c.HasAvailableSubCommands() {
		fmt.Fprintf(&b, "  %s\n", c.UseLine())
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(&b, "  %s [command]\n", c.CommandPath())
	}
	if c.HasExample() {
		fmt.Fprintf(&b, "\nExamples:\n%s\n", c.Example)
	}
	if c.HasAvailableSubCommands() {
		b.WriteString("\nCommands:\n")
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() || sub.Name() == "help" {
				fmt.Fprintf(&b, "  %-*s %s\n", sub.NamePadding(), sub.Name(), sub.Short)
			}
		}
	}
	groups := map[string]*pflag.FlagSet{}
	var order []string
	c.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		g := groupOf(f)
		if groups[g] == nil {
			groups[g] = pflag.NewFlagSet(g, pflag.ContinueOnError)
		}
		groups[g].AddFlag(f)
	})
	for _, g := range groupOrder {
		if groups[g] != nil {
			order = append(order, g)
		}
	}
	var others []string
	for g := range groups {
		if !slices.Contains(groupOrder, g) {
			others = append(others, g)
		}
	}
	slices.Sort(others)
	order = append(order, others...)
	for _, g := range order {
		title := groupTitles[g]
		if title == "" {
			title = g + " flags"
		}
		fmt.Fprintf(&b, "\n%s:\n%s", title, groups[g].FlagUsagesWrapped(usageColumns))
	}
	if c.HasAvailableInheritedFlags() {
		fmt.Fprintf(&b, "\nGlobal flags:\n%s", c.InheritedFlags().FlagUsagesWrapped(usageColumns))
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(&b, "\nRun '%s <command> --help' for a command's flags.\n", c.CommandPath())
	}
	_, err := fmt.Fprint(c.OutOrStderr(), b.String())
	return err
}
