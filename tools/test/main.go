// Command test is `make test`: it runs go test over the module's packages, each package with a
// timeout of its own, prints what go test prints, and ends with every package's time, longest
// first:
//
//	go run ./tools/test -exec /path/to/loopback -timeout 10m -timeouts 'hub=30m,e2e/realflux=40m' -- -count=1
//
// -timeouts names packages by their path in the module; the others get -timeout. Each package
// runs in a go test -json of its own, -p at a time as go test runs packages, those with the
// longest timeouts (the longest tests) first, so that they do not end up running alone at the
// end. Flags after -- go to every go test; with -v every line of output is shown, as go test -v
// shows it.
//
// -without leaves out every package whose test binary links one of the packages it names (paths
// in the module): `make test-fast` leaves out the tests that start local clusters (e2e/clusters)
// or real Flux (e2e/fluxcore) this way, so that a package that starts using them leaves the fast
// lane without anyone editing a list. -skip leaves out the packages it names, by their path in
// the module: `make test-fast` leaves out those whose own tests take minutes.
package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "test:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	execFlag := fs.String("exec", "", "run every test binary through this program (go test -exec)")
	timeout := fs.Duration("timeout", 10*time.Minute, "go test -timeout of the packages -timeouts does not name")
	timeouts := fs.String("timeouts", "", "comma-separated path=duration: the -timeout of a package, by its path in the module")
	pkgs := fs.String("pkgs", "./...", "the packages, as go test takes them")
	parallel := fs.Int("p", runtime.GOMAXPROCS(0), "how many packages are tested at once")
	skip := fs.String("skip", "", "comma-separated paths in the module: leave out these packages")
	without := fs.String("without", "", "comma-separated paths in the module: leave out the packages whose tests link one of them")
	if err := fs.Parse(args); err != nil {
		return err
	}
	table, err := parseTimeouts(*timeouts)
	if err != nil {
		return err
	}
	module, err := goOutput(ctx, "list", "-m")
	if err != nil {
		return err
	}
	module = strings.TrimSpace(module)
	list, err := goOutput(ctx, append([]string{"list"}, strings.Fields(*pkgs)...)...)
	if err != nil {
		return err
	}
	runs, err := plan(strings.Fields(list), module, table, *timeout, *pkgs == "./...")
	if err != nil {
		return err
	}
	if *without != "" {
		left, names, err := linking(ctx, module, strings.Fields(list), *without)
		if err != nil {
			return err
		}
		runs = slices.DeleteFunc(runs, func(p pkgRun) bool { return slices.Contains(left, p.pkg) })
		if len(left) > 0 {
			short := make([]string, len(left))
			for i, p := range left {
				short[i] = strings.TrimPrefix(p, module+"/")
			}
			fmt.Fprintf(stdout, "Leaving out %d packages whose tests link %s: %s\n", len(left),
				strings.Join(names, " or "), strings.Join(short, ", "))
		}
	}
	if *skip != "" {
		var named []string
		for p := range strings.SplitSeq(*skip, ",") {
			p = strings.Trim(strings.TrimSpace(p), "./")
			if p == "" {
				continue
			}
			n := len(runs)
			runs = slices.DeleteFunc(runs, func(r pkgRun) bool { return r.pkg == module+"/"+p })
			if n == len(runs) && !slices.Contains(strings.Fields(list), module+"/"+p) {
				return fmt.Errorf("-skip: %s is not a package of %s; name packages by their path in the module, e.g. hub", p, module)
			}
			named = append(named, p)
		}
		fmt.Fprintf(stdout, "Leaving out %d packages named by -skip: %s\n", len(named), strings.Join(named, ", "))
	}
	testFlags := fs.Args()
	r := newReport(stdout, module+"/", verbose(testFlags))
	for _, p := range runs {
		r.timeouts[p.pkg] = p.timeout
	}
	start := time.Now()
	queue := make(chan pkgRun)
	errs := make(chan error, len(runs))
	var wg sync.WaitGroup
	for range max(*parallel, 1) {
		wg.Go(func() {
			for p := range queue {
				errs <- goTest(ctx, r, p, *execFlag, testFlags, stderr)
			}
		})
	}
	for _, p := range runs {
		queue <- p
	}
	close(queue)
	wg.Wait()
	close(errs)
	var failed []error
	for err := range errs {
		if err != nil {
			failed = append(failed, err)
		}
	}
	r.summary(time.Since(start))
	if r.failures() > 0 || len(failed) > 0 {
		return errors.Join(append([]error{fmt.Errorf("%d packages failed", r.failures())}, failed...)...)
	}
	return nil
}

// goTest runs go test -json on one package and hands its events to r.
func goTest(ctx context.Context, r *report, p pkgRun, execPath string, testFlags []string, stderr io.Writer) error {
	goArgs := []string{"test", "-json", "-timeout", p.timeout.String()}
	if execPath != "" {
		goArgs = append(goArgs, "-exec", execPath)
	}
	goArgs = append(goArgs, testFlags...)
	goArgs = append(goArgs, p.pkg)
	cmd := exec.CommandContext(ctx, "go", goArgs...)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting go test: %w", err)
	}
	readErr := r.read(out)
	if err := errors.Join(cmd.Wait(), readErr); err != nil {
		return fmt.Errorf("go test -timeout %v %s: %w", p.timeout, p.pkg, err)
	}
	return nil
}

// linking returns the packages among pkgs whose test binary links one of the packages that
// paths (comma-separated, by their path in the module) names, sorted, and those paths. A path
// that names no package of the module is an error: a misspelt one would leave nothing out,
// silently.
func linking(ctx context.Context, module string, pkgs []string, paths string) (left, names []string, err error) {
	var targets []string
	for p := range strings.SplitSeq(paths, ",") {
		p = strings.Trim(strings.TrimSpace(p), "./")
		if p == "" {
			continue
		}
		if _, err := goOutput(ctx, "list", module+"/"+p); err != nil {
			return nil, nil, fmt.Errorf("-without: %s is not a package of %s; name packages by their path in the module, e.g. e2e/clusters", p, module)
		}
		names = append(names, p)
		targets = append(targets, module+"/"+p)
	}
	// With -test, go list adds the test binary of each package with tests, "<path>.test", whose
	// Deps are everything the test binary links.
	out, err := goOutput(ctx, append([]string{"list", "-test", "-f", `{{if not .ForTest}}{{.ImportPath}} {{join .Deps " "}}{{end}}`}, pkgs...)...)
	if err != nil {
		return nil, nil, err
	}
	for l := range strings.Lines(out) {
		fields := strings.Fields(l)
		if len(fields) == 0 {
			continue
		}
		pkg, ok := strings.CutSuffix(fields[0], ".test")
		if !ok {
			continue
		}
		for _, t := range targets {
			if pkg == t || slices.Contains(fields[1:], t) {
				left = append(left, pkg)
				break
			}
		}
	}
	slices.Sort(left)
	return left, names, nil
}

// goOutput runs go with args and returns its standard output.
func goOutput(ctx context.Context, args ...string) (string, error) {
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

// parseTimeouts reads "path=duration,..." into a table by path in the module.
func parseTimeouts(s string) (map[string]time.Duration, error) {
	table := map[string]time.Duration{}
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		path, value, ok := strings.Cut(entry, "=")
		if !ok {
			return nil, fmt.Errorf("-timeouts: %q is not path=duration, e.g. hub=30m", entry)
		}
		d, err := time.ParseDuration(value)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("-timeouts: %q: the timeout of %s is not a positive duration such as 30m", entry, path)
		}
		table[strings.Trim(path, "./")] = d
	}
	return table, nil
}

// pkgRun is one package and its timeout.
type pkgRun struct {
	pkg     string
	timeout time.Duration
}

// plan gives every package its timeout and orders them longest timeout first (then by path).
// When packages are the whole module (all), a path in table that names none of them is an
// error: a table that no longer matches the module would give a package the fallback timeout
// silently.
func plan(packages []string, module string, table map[string]time.Duration, fallback time.Duration, all bool) ([]pkgRun, error) {
	used := map[string]bool{}
	var runs []pkgRun
	for _, p := range packages {
		rel := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
		d, ok := table[rel]
		if ok {
			used[rel] = true
		} else {
			d = fallback
		}
		runs = append(runs, pkgRun{pkg: p, timeout: d})
	}
	var unknown []string
	for path := range table {
		if !used[path] {
			unknown = append(unknown, path)
		}
	}
	if len(unknown) > 0 && all {
		slices.Sort(unknown)
		return nil, fmt.Errorf("-timeouts names %s, which is not among the packages tested (%s/...)", strings.Join(unknown, ", "), module)
	}
	slices.SortStableFunc(runs, func(a, b pkgRun) int {
		return cmp.Or(cmp.Compare(b.timeout, a.timeout), strings.Compare(a.pkg, b.pkg))
	})
	return runs, nil
}

// verbose reports whether the go test flags ask for -v.
func verbose(flags []string) bool {
	for _, f := range flags {
		switch strings.TrimLeft(f, "-") {
		case "v", "v=true", "test.v", "test.v=true":
			return true
		}
	}
	return false
}
