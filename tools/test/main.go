// Command test is `make test`: it runs go test over the module's packages, each package with a
// timeout of its own, prints what go test prints, and ends with every package's time, longest
// first:
//
//	go run ./tools/test -exec /path/to/loopback -timeout 10m -timeouts 'hub=30m,e2e/realflux=40m' -- -count=1
//
// -timeouts names packages by their path in the module; the others get -timeout. The packages
// of one timeout run in one `go test -json` (so in parallel, as go test runs packages), the
// groups one after another, longest timeout first. Flags after -- go to every go test; with -v
// every line of output is shown, as go test -v shows it.
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
	"slices"
	"strings"
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
	list, err := goOutput(ctx, append([]string{"list"}, strings.Fields(*pkgs)...)...)
	if err != nil {
		return err
	}
	groups, err := group(strings.Fields(list), strings.TrimSpace(module), table, *timeout, *pkgs == "./...")
	if err != nil {
		return err
	}
	testFlags := fs.Args()
	r := newReport(stdout, strings.TrimSpace(module)+"/", verbose(testFlags))
	start := time.Now()
	var failed []error
	for _, g := range groups {
		goArgs := []string{"test", "-json", "-timeout", g.timeout.String()}
		if *execFlag != "" {
			goArgs = append(goArgs, "-exec", *execFlag)
		}
		goArgs = append(goArgs, testFlags...)
		goArgs = append(goArgs, g.packages...)
		for _, p := range g.packages {
			r.timeouts[p] = g.timeout
		}
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
			failed = append(failed, fmt.Errorf("go test -timeout %v (%d packages): %w", g.timeout, len(g.packages), err))
		}
	}
	r.summary(time.Since(start))
	if r.failures() > 0 || len(failed) > 0 {
		return errors.Join(append([]error{fmt.Errorf("%d packages failed", r.failures())}, failed...)...)
	}
	return nil
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

// testGroup is the packages that run with one timeout.
type testGroup struct {
	timeout  time.Duration
	packages []string
}

// group sorts packages by their timeout, longest first. When packages are the whole module
// (all), a path in table that names none of them is an error: a table that no longer matches the
// module would give a package the fallback timeout silently.
func group(packages []string, module string, table map[string]time.Duration, fallback time.Duration, all bool) ([]testGroup, error) {
	byTimeout := map[time.Duration][]string{}
	used := map[string]bool{}
	for _, p := range packages {
		rel := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
		d, ok := table[rel]
		if ok {
			used[rel] = true
		} else {
			d = fallback
		}
		byTimeout[d] = append(byTimeout[d], p)
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
	var groups []testGroup
	for d, ps := range byTimeout {
		groups = append(groups, testGroup{timeout: d, packages: ps})
	}
	slices.SortFunc(groups, func(a, b testGroup) int { return cmp.Compare(b.timeout, a.timeout) })
	return groups, nil
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
