package fluxsim

import (
	"strings"
	"testing"
	"time"

	"github.com/fluxfed/fluxfed/flux"
)

// FuzzCommand feeds the stand-in any command line: it never panics, and whatever it prints
// reads back with the hub's parsers.
func FuzzCommand(f *testing.F) {
	for _, seed := range []string{
		"submit\x00-N3\x00sleep\x005", "resource\x00drain\x002-3\x00why", "resource\x00undrain\x00b-[0-1]",
		"resource\x00drain\x00[0-9999999999]", "submit\x00--nodes=2\x00--ntasks=9\x00x", "jobs\x00--json\x00-f\x00pending,running",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		in, err := New([]string{"lead-0", "lead-1", "b-0", "b-1"}, 2, 2, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if err := in.SetOnline([]int{0, 1, 3}, 1001); err != nil {
			t.Fatal(err)
		}
		_, _ = command(in, strings.Split(line, "\x00"))
		in.Advance(1010)
		if _, err := flux.NewView(in.Uptime(1010, time.UTC), in.ResourceStatus(), []byte(in.JobsJSON(1010, "u")), in.DrainList()); err != nil {
			t.Fatalf("after %q the outputs do not parse: %v", line, err)
		}
	})
}
