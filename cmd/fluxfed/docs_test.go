package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTheDocsListEveryCommand: docs/minicluster.md's table of commands names every command of
// fluxfed, and no command it does not have.
func TestTheDocsListEveryCommand(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "minicluster.md"))
	require.NoError(t, err)
	documented := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "| `fluxfed "); ok {
			documented[strings.FieldsFunc(rest, func(r rune) bool { return r == ' ' || r == '`' })[0]] = true
		}
	}
	commands := map[string]bool{}
	root := newRootCommand()
	root.InitDefaultCompletionCmd() // as Execute adds it
	for _, c := range root.Commands() {
		if !c.Hidden && c.Name() != "help" {
			commands[c.Name()] = true
		}
	}
	require.Equal(t, commands, documented)
}
