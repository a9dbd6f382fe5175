package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testdata/mixed.jsonl is go test -json of five packages (times dropped, stack traces cut): tj/a
// has a passing and a failing test, tj/b does not build, tj/c times out in a test, tj/d has no
// test files, tj/e passes. tj/a and tj/e print a line outside their tests, which go test shows
// only for the package that failed.
const mixedText = `# tj/b
b/b_test.go:3:32: expected operand, found '}'
FAIL	tj/b [setup failed]
a: set up
=== RUN   TestBad
    a_test.go:4: why
    a_test.go:4: boom
--- FAIL: TestBad (0.00s)
FAIL
FAIL	tj/a	0.004s
?   	tj/d	[no test files]
ok  	tj/e	0.002s
=== RUN   TestSlow
    c_test.go:3: waiting
panic: test timed out after 1s
	running tests:
		TestSlow (1s)
FAIL	tj/c	1.010s
`

func TestTheReportPrintsWhatGoTestPrintsAndEveryPackagesTime(t *testing.T) {
	in, err := os.Open(filepath.Join("testdata", "mixed.jsonl"))
	require.NoError(t, err)
	defer in.Close()
	var out bytes.Buffer
	r := newReport(&out, "tj/", false)
	r.timeouts = map[string]time.Duration{"tj/c": time.Second, "tj/a": 10 * time.Minute, "tj/e": 90 * time.Second}
	require.NoError(t, r.read(in))
	r.summary(83 * time.Second)
	require.Equal(t, mixedText+`
Package times, longest first (time, go test -timeout, result, package):
      1.0s     1s  FAIL  c
      0.0s    10m  FAIL  a
      0.0s  1m30s  ok    e
      0.0s      -  FAIL  b
1 packages passed, 3 failed, 1 without tests; 1m23s in all
`, out.String())
	require.Equal(t, 3, r.failures())
}

func TestTheVerboseReportPrintsEveryLine(t *testing.T) {
	in, err := os.Open(filepath.Join("testdata", "mixed.jsonl"))
	require.NoError(t, err)
	defer in.Close()
	var out bytes.Buffer
	r := newReport(&out, "tj/", true)
	require.NoError(t, r.read(in))
	require.Contains(t, out.String(), "=== RUN   TestOK\n    a_test.go:3: hello\n--- PASS: TestOK (0.00s)\n")
	require.Contains(t, out.String(), "--- PASS: TestFine (0.00s)\nPASS\nok  \ttj/e\t0.002s\n")
	require.Contains(t, out.String(), "e: set up\n")
}

func TestPackagesRunLongestTimeoutFirst(t *testing.T) {
	table, err := parseTimeouts("hub=30m, e2e/realflux=40m,./e2e=15m")
	require.NoError(t, err)
	packages := []string{"m/api", "m/e2e", "m/e2e/realflux", "m/hub", "m/hub/probe"}
	runs, err := plan(packages, "m", table, 10*time.Minute, true)
	require.NoError(t, err)
	require.Equal(t, []pkgRun{
		{pkg: "m/e2e/realflux", timeout: 40 * time.Minute},
		{pkg: "m/hub", timeout: 30 * time.Minute},
		{pkg: "m/e2e", timeout: 15 * time.Minute},
		{pkg: "m/api", timeout: 10 * time.Minute},
		{pkg: "m/hub/probe", timeout: 10 * time.Minute},
	}, runs)

	_, err = plan(packages[:2], "m", table, 10*time.Minute, true)
	require.EqualError(t, err, "-timeouts names e2e/realflux, hub, which is not among the packages tested (m/...)")
	_, err = plan(packages[:2], "m", table, 10*time.Minute, false)
	require.NoError(t, err, "a subset of the packages need not match the whole table")
}

func TestTimeoutsThatAreNotDurationsAreRefused(t *testing.T) {
	_, err := parseTimeouts("hub")
	require.EqualError(t, err, `-timeouts: "hub" is not path=duration, e.g. hub=30m`)
	_, err = parseTimeouts("hub=soon")
	require.EqualError(t, err, `-timeouts: "hub=soon": the timeout of hub is not a positive duration such as 30m`)
}

// TestEachPackageRunsWithItsOwnTimeout runs the command on a small module: the package given 1s
// times out, the one with the default 10m passes, and the summary says so.
func TestEachPackageRunsWithItsOwnTimeout(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":            "module tj\n\ngo 1.24\n",
		"slow/slow_test.go": "package slow\n\nimport (\n\t\"testing\"\n\t\"time\"\n)\n\nfunc TestSlow(t *testing.T) { time.Sleep(3 * time.Second) }\n",
		"fast/fast_test.go": "package fast\n\nimport (\n\t\"testing\"\n\t\"time\"\n)\n\nfunc TestFast(t *testing.T) { time.Sleep(3 * time.Second) }\n",
	}
	writeModule(t, dir, files)
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"-timeout", "10m", "-timeouts", "slow=1s", "--", "-count=1"}, &out, &errOut)
	require.ErrorContains(t, err, "1 packages failed", out.String()+errOut.String())
	require.Contains(t, out.String(), "panic: test timed out after 1s")
	require.Regexp(t, `(?m)^ok  \ttj/fast\t\d+\.\d+s$`, out.String())
	require.Regexp(t, `(?m)^\s+\d+\.\ds     1s  FAIL  slow$`, out.String())
	require.Regexp(t, `(?m)^\s+\d+\.\ds    10m  ok    fast$`, out.String())
	require.Contains(t, out.String(), "1 packages passed, 1 failed, 0 without tests;")
}

// TestWithoutLeavesOutThePackagesWhoseTestsLinkAPackage runs the command on a small module as
// make test-fast does: the package named, the one whose tests import it and the one whose tests
// import it through another package are left out and named, as is the package -skip names; a package whose tests link a
// package that links it only in its own tests runs, as do those without tests.
func TestWithoutLeavesOutThePackagesWhoseTestsLinkAPackage(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":                 "module tj\n\ngo 1.24\n",
		"clusters/clusters.go":   "package clusters\n\n// Start starts clusters.\nfunc Start() {}\n",
		"clusters/start_test.go": "package clusters\n\nimport \"testing\"\n\nfunc TestStart(t *testing.T) { Start() }\n",
		"e2e/e2e.go":             "package e2e\n",
		"e2e/e2e_test.go":        "package e2e_test\n\nimport (\n\t\"testing\"\n\n\t\"tj/clusters\"\n)\n\nfunc TestE2E(t *testing.T) { clusters.Start() }\n",
		"unit/unit_test.go":      "package unit\n\nimport \"testing\"\n\nfunc TestUnit(t *testing.T) {}\n",
		"notests/notests.go":     "package notests\n\nimport _ \"tj/clusters\"\n",
		"deeper/deeper_test.go":  "package deeper\n\nimport (\n\t\"testing\"\n\n\t_ \"tj/e2e\"\n)\n\nfunc TestDeeper(t *testing.T) {}\n",
		"e2e/helper/helper.go":   "package helper\n\nimport _ \"tj/clusters\"\n",
		"usehelper/use_test.go":  "package usehelper\n\nimport (\n\t\"testing\"\n\n\t_ \"tj/e2e/helper\"\n)\n\nfunc TestUse(t *testing.T) {}\n",
		"unit/unit.go":           "package unit\n",
		"usehelper/usehelper.go": "package usehelper\n",
		"deeper/deeper.go":       "package deeper\n",
	}
	writeModule(t, dir, files)
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"-without", "clusters", "--", "-count=1"}, &out, &errOut)
	require.NoError(t, err, out.String()+errOut.String())
	require.Contains(t, out.String(), "Leaving out 3 packages whose tests link clusters: clusters, e2e, usehelper\n")
	require.Regexp(t, `(?m)^ok  \ttj/unit\t`, out.String())
	require.Regexp(t, `(?m)^ok  \ttj/deeper\t`, out.String(), "deeper's tests link e2e, which links clusters only in its tests")
	require.NotContains(t, out.String(), "tj/clusters\t")
	require.NotContains(t, out.String(), "tj/e2e\t")
	require.NotContains(t, out.String(), "tj/usehelper\t")
	require.Contains(t, out.String(), "2 packages passed, 0 failed, 2 without tests;")

	out.Reset()
	err = run(context.Background(), []string{"-without", "clusters", "-skip", "deeper", "--", "-count=1"}, &out, &errOut)
	require.NoError(t, err, out.String()+errOut.String())
	require.Contains(t, out.String(), "Leaving out 1 packages named by -skip: deeper\n")
	require.NotContains(t, out.String(), "tj/deeper\t")
	require.Contains(t, out.String(), "1 packages passed, 0 failed, 2 without tests;")

	out.Reset()
	err = run(context.Background(), []string{"-without", "clusters,cluster"}, &out, &errOut)
	require.ErrorContains(t, err, "-without: cluster is not a package of tj")
	err = run(context.Background(), []string{"-skip", "deep"}, &out, &errOut)
	require.ErrorContains(t, err, "-skip: deep is not a package of tj")
	require.Empty(t, out.String(), "nothing runs")
}

// writeModule writes files, by path, into dir and makes it the working directory.
func writeModule(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	t.Chdir(dir)
}
