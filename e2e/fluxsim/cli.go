package fluxsim

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fluxfed/fluxfed/flux"
)

// Main runs the stand-in flux with args (without the program name) on the instance of dir,
// writing as flux does to stdout and stderr, and returns the exit status.
func Main(dir string, args []string, stdout, stderr io.Writer) int {
	if dir == "" {
		fmt.Fprintf(stderr, "flux: the stand-in flux needs $%s, the directory of its instance\n", EnvDir)
		return 1
	}
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: flux COMMAND [ARGS...] (stand-in: uptime, resource status|drain|undrain, jobs, submit, python -c FOLLOWER)")
		return 1
	}
	if args[0] == "python" {
		if !equal(args, flux.FollowArgs()[1:]) {
			fmt.Fprintln(stderr, "flux-python: the stand-in runs no python but the hub's follower (flux.FollowCommand)")
			return 1
		}
		return follow(dir, stdout, stderr)
	}
	out, err := run(dir, args)
	return answer(args, out, err, stdout, stderr)
}

// Run runs the stand-in flux with args on in, at in.Now, as Main does on the instance of a
// directory.
func Run(in *Instance, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return Main("-", args, stdout, stderr)
	}
	out, err := command(in, args)
	return answer(args, out, err, stdout, stderr)
}

// answer writes what a command printed, or its error as flux does, and returns its exit status.
func answer(args []string, out string, err error, stdout, stderr io.Writer) int {
	var refused *Refusal
	switch {
	case errors.As(err, &refused):
		errno := ""
		if refused.Errno != 0 {
			errno = fmt.Sprintf("[Errno %d] ", refused.Errno)
		}
		fmt.Fprintf(stderr, "flux-%s: ERROR: %s%s\n", args[0], errno, refused.Message)
		if refused.Info != "" {
			fmt.Fprintf(stderr, "flux-%s: INFO: %s\n", args[0], refused.Info)
		}
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "flux-%s: ERROR: %v\n", args[0], err)
		return 1
	}
	_, _ = io.WriteString(stdout, out) // nobody to tell when stdout is gone
	return 0
}

// Refusal is an error a Flux service answers a request with, as a flux command prints it: the
// errno when the command shows it (0 when not), the message, and a hint the command adds.
type Refusal struct {
	Errno   int
	Message string
	Info    string
}

func (r *Refusal) Error() string { return r.Message }

// errNoInstance is what a command gets before the harness created the instance: no broker runs.
var errNoInstance = errors.New("Unable to connect to Flux: the stand-in instance does not exist yet") //nolint:staticcheck // flux's capitalisation

func run(dir string, args []string) (string, error) {
	var out string
	err := Update(dir, func(in *Instance) error {
		if in.Size() == 0 || !slices.Contains(in.Online, 0) {
			return errNoInstance
		}
		var err error
		out, err = command(in, args)
		return err
	})
	return out, err
}

// command runs one flux command on in, which is advanced to now.
func command(in *Instance, args []string) (string, error) {
	now := in.Now
	sub := args[1:]
	switch args[0] {
	case "uptime":
		if len(sub) > 0 {
			return "", fmt.Errorf("unexpected arguments %q", sub)
		}
		return in.Uptime(now, time.Local), nil
	case "resource":
		return resource(in, sub)
	case "jobs":
		if !equal(sub, []string{"-A", "--json", "-f", "pending,running"}) && !equal(sub, []string{"--json", "-f", "pending,running"}) {
			return "", fmt.Errorf("the stand-in lists jobs only as `flux jobs [-A] --json -f pending,running`, not %q", sub)
		}
		return in.JobsJSON(now, userName(in.UserID)), nil
	case "submit":
		return submit(in, sub)
	}
	return "", fmt.Errorf("%q is not a command the stand-in simulates", args[0])
}

func equal(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}

func resource(in *Instance, args []string) (string, error) {
	if len(args) == 0 {
		return "", errors.New("resource needs a subcommand")
	}
	sub := args[1:]
	switch args[0] {
	case "status":
		if !equal(sub, flux.ResourceStatusCommand[3:]) {
			return "", fmt.Errorf("the stand-in prints the status only as %q, not %q", flux.ResourceStatusCommand[3:], sub)
		}
		return in.ResourceStatus(), nil
	case "drain":
		if len(sub) > 0 && strings.HasPrefix(sub[0], "-") && sub[0] != "-f" && sub[0] != "-u" {
			if !equal(sub, flux.DrainCommand[3:]) {
				return "", fmt.Errorf("the stand-in lists drained ranks only as %q, not %q", flux.DrainCommand[3:], sub)
			}
			return in.DrainList(), nil
		}
		force := len(sub) > 0 && (sub[0] == "-f" || sub[0] == "-u")
		if force {
			sub = sub[1:]
		}
		if len(sub) == 0 {
			return in.DrainList(), nil
		}
		ranks, err := in.Ranks(sub[0])
		if err != nil {
			return "", err
		}
		return "", in.Drain(ranks, strings.Join(sub[1:], " "), force, in.Now)
	case "undrain":
		if len(sub) != 1 {
			return "", fmt.Errorf("undrain takes TARGETS only, not %q", sub)
		}
		ranks, err := in.Ranks(sub[0])
		if err != nil {
			return "", err
		}
		return "", in.Undrain(ranks, in.Now)
	}
	return "", fmt.Errorf("resource %q is not simulated", args[0])
}

// submit takes -N/--nodes and -n/--ntasks, then the command.
func submit(in *Instance, args []string) (string, error) {
	nnodes, ntasks := 1, 0
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		opt := args[0]
		args = args[1:]
		var name, value string
		switch {
		case strings.HasPrefix(opt, "--") && strings.Contains(opt, "="):
			name, value, _ = strings.Cut(opt, "=")
		case opt == "--nodes" || opt == "--ntasks" || opt == "-N" || opt == "-n":
			if len(args) == 0 {
				return "", fmt.Errorf("option %s needs a value", opt)
			}
			name, value, args = opt, args[0], args[1:]
		case len(opt) > 2 && (opt[:2] == "-N" || opt[:2] == "-n"):
			name, value = opt[:2], opt[2:]
		default:
			return "", fmt.Errorf("option %s is not simulated", opt)
		}
		n, err := strconv.Atoi(value)
		if err != nil {
			return "", fmt.Errorf("option %s: %q is not a number", name, value)
		}
		switch name {
		case "-N", "--nodes":
			nnodes = n
		case "-n", "--ntasks":
			ntasks = n
		default:
			return "", fmt.Errorf("option %s is not simulated", name)
		}
	}
	cwd, err := os.Getwd()
	if err != nil {
		cwd = "/"
	}
	j, err := in.Submit(args, nnodes, ntasks, cwd, in.Now)
	if err != nil {
		return "", err
	}
	return f58(j.ID) + "\n", nil
}

// userName is the name of uid, or uid as a number, as flux prints a user.
func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return u.Username
	}
	return strconv.Itoa(uid)
}
