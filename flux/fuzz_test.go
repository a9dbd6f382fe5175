package flux

import (
	"slices"
	"testing"
)

// FuzzNewView feeds the parsers arbitrary outputs, seeded with the real fixtures: they never
// panic, and a view they accept is whole (one entry per rank, counts within the ranks).
func FuzzNewView(f *testing.F) {
	for _, step := range []string{"1-reserved-pending", "2-joined-running", "3-draining", "4-left"} {
		f.Add(string(fixture(f, step, "uptime.txt")), string(fixture(f, step, "resource-status.txt")),
			fixture(f, step, "jobs-pending-running.json"), string(fixture(f, step, "overlay-status.txt")), string(fixture(f, step, "drain.txt")))
	}
	f.Fuzz(func(t *testing.T, uptime, status string, jobs []byte, overlay, drain string) {
		_, _ = ParseOverlayStatus(overlay)
		v, err := NewView(uptime, status, jobs, drain)
		if err != nil {
			return
		}
		if v.Uptime.State != "run" {
			if v.Ranks != nil || v.Jobs != nil {
				t.Fatalf("a view before state run has ranks or jobs: %+v", v)
			}
			return
		}
		if len(v.Ranks) != v.Uptime.Size {
			t.Fatalf("%d ranks for size %d", len(v.Ranks), v.Uptime.Size)
		}
		c := v.Count(0, len(v.Ranks))
		if c.Online > len(v.Ranks) || c.Draining+c.Drained > len(v.Ranks) {
			t.Fatalf("count %+v of %d ranks", c, len(v.Ranks))
		}
		if d := v.Demand(); d.Jobs > len(v.Jobs) || d.Nodes < 0 {
			t.Fatalf("demand %+v of %d jobs", d, len(v.Jobs))
		}
	})
}

// FuzzIDSet checks that what ParseIDSet accepts formats back to a set that parses the same.
func FuzzIDSet(f *testing.F) {
	for _, s := range []string{"", "3", "0-1", "[0-2,5,7-9]", "[5,0-2,1]", "1048576"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids, err := ParseIDSet(s)
		if err != nil {
			return
		}
		if !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
			t.Fatalf("%q: %v is not sorted and unique", s, ids)
		}
		for _, brackets := range []bool{false, true} {
			again, err := ParseIDSet(FormatIDSet(ids, brackets))
			if err != nil || !slices.Equal(ids, again) {
				t.Fatalf("%q: %v formats to %q, which parses to %v, %v", s, ids, FormatIDSet(ids, brackets), again, err)
			}
		}
	})
}
