package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// event is one line of go test -json (cmd/test2json), build events included.
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Output     string
	Elapsed    float64
}

// result is how a package ended.
type result struct {
	pkg     string
	action  string // pass, fail or skip
	elapsed time.Duration
	tests   bool // whether it ran any test
}

// line is a line of output of a package, of a test or (test empty) of the test binary.
type line struct{ test, text string }

// report prints go test -json as go test prints its text: a package's ok or FAIL line, the
// output of the tests that failed (or of every test, verbose), build errors; and at the end
// every package's time.
type report struct {
	mu      sync.Mutex // guards everything below while go tests run
	out     io.Writer
	prefix  string // the module's path and a slash, cut from package paths in the summary
	verbose bool
	// output of every package running, in order, without that of the tests that passed.
	output   map[string][]line
	results  []result
	tests    map[string]bool
	timeouts map[string]time.Duration
}

func newReport(out io.Writer, prefix string, verbose bool) *report {
	return &report{out: out, prefix: prefix, verbose: verbose, output: map[string][]line{},
		tests: map[string]bool{}, timeouts: map[string]time.Duration{}}
}

// read handles the events of one go test -json until in ends. Several may read at once, one
// per go test; events are handled one at a time.
func (r *report) read(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		r.mu.Lock()
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			fmt.Fprintln(r.out, sc.Text()) // not an event: go test printed it as is
		} else {
			r.handle(e)
		}
		r.mu.Unlock()
	}
	return sc.Err()
}

func (r *report) handle(e event) {
	switch {
	case e.Action == "build-output":
		fmt.Fprint(r.out, e.Output)
	case e.Action == "output" && r.verbose:
		fmt.Fprint(r.out, e.Output)
	case e.Action == "output" && e.Test == "" && isSummary(e.Output):
		// A package's ok or FAIL line: what it printed is shown only when it failed, as go test
		// shows it, with what the tests that passed printed left out.
		if strings.HasPrefix(e.Output, "FAIL") {
			r.flush(e.Package)
		}
		delete(r.output, e.Package)
		fmt.Fprint(r.out, e.Output)
	case e.Action == "output":
		r.output[e.Package] = append(r.output[e.Package], line{test: e.Test, text: e.Output})
	case e.Test != "" && (e.Action == "pass" || e.Action == "skip"):
		r.tests[e.Package] = true
		r.output[e.Package] = slices.DeleteFunc(r.output[e.Package], func(l line) bool {
			return l.test == e.Test || strings.HasPrefix(l.test, e.Test+"/")
		})
	case e.Test != "":
		r.tests[e.Package] = true
	case e.Action == "pass" || e.Action == "fail" || e.Action == "skip":
		if e.Action == "fail" {
			r.flush(e.Package) // a package that ended without its FAIL line (a build failure)
		}
		delete(r.output, e.Package)
		r.results = append(r.results, result{pkg: e.Package, action: e.Action,
			elapsed: time.Duration(e.Elapsed * float64(time.Second)), tests: r.tests[e.Package]})
	}
}

// isSummary reports whether a package's line of output is the one go test ends it with.
func isSummary(text string) bool {
	for _, prefix := range []string{"ok  \t", "FAIL\t", "?   \t"} {
		if strings.HasPrefix(text, prefix) {
			return true
		}
	}
	return false
}

// flush prints the output kept of pkg, in order, and forgets it.
func (r *report) flush(pkg string) {
	for _, l := range r.output[pkg] {
		fmt.Fprint(r.out, l.text)
	}
	delete(r.output, pkg)
}

// failures is how many packages failed so far.
func (r *report) failures() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, res := range r.results {
		if res.action == "fail" {
			n++
		}
	}
	return n
}

// summary prints the time of every package that ran tests, longest first, with its timeout.
func (r *report) summary(wall time.Duration) {
	r.mu.Lock()
	results := slices.Clone(r.results)
	r.mu.Unlock()
	slices.SortStableFunc(results, func(a, b result) int { return cmp.Compare(b.elapsed, a.elapsed) })
	fmt.Fprintln(r.out, "\nPackage times, longest first (time, go test -timeout, result, package):")
	passed, skipped := 0, 0
	for _, res := range results {
		word := "ok"
		switch {
		case res.action == "fail":
			word = "FAIL"
		case res.action == "skip" || !res.tests:
			skipped++
			continue
		default:
			passed++
		}
		fmt.Fprintf(r.out, "  %7.1fs  %5s  %-4s  %s\n", res.elapsed.Seconds(), short(r.timeouts[res.pkg]), word, strings.TrimPrefix(res.pkg, r.prefix))
	}
	fmt.Fprintf(r.out, "%d packages passed, %d failed, %d without tests; %v in all\n",
		passed, r.failures(), skipped, wall.Round(time.Second))
}

// short writes a timeout as the Makefile does: 30m, 90s.
func short(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	default:
		return d.String()
	}
}
