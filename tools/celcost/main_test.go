package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRunPrintsCostsAndComparison(t *testing.T) {
	const base = "testdata/miniclusters-baseline.yaml"
	var out bytes.Buffer
	if err := run([]string{"-crd", base, "-width", "40"}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "total per call times path rule" {
		t.Errorf("header: %q", lines[0])
	}
	// The most expensive rule of the baseline is the name regex at the root, estimated as the
	// API server estimates it (metadata.name has no maxLength the estimator could use).
	if got := strings.Fields(lines[1]); len(got) < 4 || got[0] != "2516587" || got[3] != "<root>" {
		t.Errorf("first rule: %q", lines[1])
	}
	if last := lines[len(lines)-1]; last != "44 rules, estimated total 7435056" {
		t.Errorf("last line: %q", last)
	}

	out.Reset()
	if err := run([]string{"-crd", base, "-base", base}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.String(), "estimated total: before 7435056 (44 rules), now 7435056 (44 rules)\n") {
		t.Errorf("comparison of the baseline with itself ends:\n%s", out.String()[max(0, out.Len()-200):])
	}
	if strings.Count(out.String(), "(unchanged)") != 44 {
		t.Errorf("comparison of the baseline with itself: want 44 unchanged rules:\n%s", out.String())
	}

	if err := run([]string{"extra"}, &out); err == nil || !strings.Contains(err.Error(), "-crd and -base") {
		t.Errorf("an argument: got %v", err)
	}
}
