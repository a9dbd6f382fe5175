package testenv

import (
	"bytes"
	"runtime/pprof"
	"strings"
)

// Goroutines returns the stacks of the running goroutines that are in fluxfed's code or in the
// controller and multicluster runtimes: what a test prints when a manager does not stop, to name
// the runnable that holds it up.
func Goroutines() string {
	var all bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&all, 2); err != nil {
		return "reading the goroutines: " + err.Error()
	}
	var out strings.Builder
	for g := range strings.SplitSeq(all.String(), "\n\n") {
		if strings.Contains(g, "github.com/fluxfed/fluxfed/") || strings.Contains(g, "sigs.k8s.io/") {
			out.WriteString(g)
			out.WriteString("\n\n")
		}
	}
	return out.String()
}
