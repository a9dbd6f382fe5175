// Package netguard keeps fluxfed's tests, benchmarks and demos on the loopback network: every
// address they may dial must be in 127.0.0.0/8 (or be "localhost"). The machines the project is
// built on watch for traffic to anything else, and a test has no business leaving the machine.
//
// [Allowed] tells an allowed address from the rest without a DNS lookup, since a lookup is
// itself a packet to a resolver. [Dialer] refuses what Allowed refuses before a packet leaves,
// and records the attempt; a test package that opens connections wires its dialers through it
// and makes [Main] its TestMain, which fails the run when anything was refused, even when every
// test passed: a refused dial is a bug in the test or in the code under test, whether or not
// that code handled the error.
//
// The guard sees only the dials that go through a Dialer. Run the test binaries in a network
// namespace of their own (e2e/cmd/loopback, as `make test` does) to stop the rest.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// ErrNotLoopback is wrapped by the errors of Allowed, and of a Dialer for the addresses it
// refuses.
var ErrNotLoopback = errors.New("not a loopback address (127.0.0.0/8 or localhost)")

// loopback is where every dialled address must be.
var loopback = netip.MustParsePrefix("127.0.0.0/8")

// Allowed returns nil when address, "host:port" or a bare host, names a host in 127.0.0.0/8 by
// an IPv4 literal, or is exactly "localhost". Anything else is refused with an error that wraps
// ErrNotLoopback and quotes address: names (resolving them would send a packet), IPv6 (::1
// included: the clusters listen on IPv4 only), IPv4-mapped IPv6, the unspecified address,
// literals Go would not parse as IPv4 (such as 127.1, which the dialer would look up as a name)
// and malformed input.
func Allowed(address string) error {
	host := address
	if h, _, err := net.SplitHostPort(address); err == nil {
		host = h
	}
	if host == "localhost" {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err == nil && ip.Is4() && loopback.Contains(ip) {
		return nil
	}
	return fmt.Errorf("%q: %w", address, ErrNotLoopback)
}

// Dialer dials like its embedded net.Dialer, but only addresses that Allowed allows. Every
// refusal is recorded for Main, with the caller that asked for it.
type Dialer struct {
	net.Dialer
}

// DialContext refuses, before any packet is sent, an address that Allowed refuses and records
// the attempt; it dials any other with the embedded net.Dialer.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if err := Allowed(address); err != nil {
		record(address, caller())
		return nil, fmt.Errorf("netguard: dial %s %w", network, err)
	}
	return d.Dialer.DialContext(ctx, network, address)
}

// Dial is DialContext without a context.
func (d *Dialer) Dial(network, address string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, address)
}

// violations are the refused dials of this process. They are global because Main must see the
// dials of every Dialer of the test binary, wherever the tests made it.
var violations struct {
	sync.Mutex
	list []string
}

func record(address, by string) {
	violations.Lock()
	defer violations.Unlock()
	violations.list = append(violations.list, fmt.Sprintf("%q dialled by %s", address, by))
}

// Violations returns every refused dial so far, in order, each as the address and the caller.
func Violations() []string {
	violations.Lock()
	defer violations.Unlock()
	return append([]string(nil), violations.list...)
}

// caller describes the code that asked for the dial: the first function up the stack outside
// this file and the standard library's dialling (net, net/http, crypto/tls). A dial that
// net/http makes in a goroutine of its own has no such caller; the description is then the
// first frame outside this file.
func caller() string {
	pc := make([]uintptr, 32)
	frames := runtime.CallersFrames(pc[:runtime.Callers(2, pc)])
	first := ""
	for {
		f, more := frames.Next()
		if !strings.HasSuffix(f.File, "/e2e/netguard/netguard.go") {
			if first == "" {
				first = describe(f)
			}
			if !inDialPath(f.Function) {
				return describe(f)
			}
		}
		if !more {
			return first
		}
	}
}

func inDialPath(function string) bool {
	for _, prefix := range []string{"net.", "net/http.", "crypto/tls.", "runtime."} {
		if strings.HasPrefix(function, prefix) {
			return true
		}
	}
	return false
}

func describe(f runtime.Frame) string {
	if f.Function == "" {
		return "an unknown caller"
	}
	file := f.File
	if i := strings.LastIndexByte(file, '/'); i >= 0 {
		file = file[i+1:]
	}
	return fmt.Sprintf("%s (%s:%d)", f.Function, file, f.Line)
}

// Main runs the tests of m and exits: with m.Run's code, or with 1 when any dial was refused,
// after printing every refusal to stderr. Make it the TestMain of a package that opens
// connections: func TestMain(m *testing.M) { netguard.Main(m) }.
func Main(m *testing.M) {
	os.Exit(Check(m.Run()))
}

// Check returns code, or 1 after printing every refused dial to stderr when there was one. It
// is Main for a TestMain that has more to do after m.Run: code = netguard.Check(m.Run()).
func Check(code int) int { return check(code, os.Stderr) }

func check(code int, stderr io.Writer) int {
	v := Violations()
	if len(v) == 0 {
		return code
	}
	fmt.Fprintf(stderr, "netguard: %d dial(s) to addresses outside 127.0.0.0/8 were refused; every test must stay on loopback:\n", len(v))
	for _, line := range v {
		fmt.Fprintf(stderr, "netguard:   %s\n", line)
	}
	return 1
}
