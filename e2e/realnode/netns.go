package realnode

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/fluxfed/fluxfed/e2e/netns"
)

// CreateNetns creates a network namespace with only its loopback interface, up, and pins it to
// the file at path (a bind mount), so that processes can enter it (nsenter --net=path) and it
// outlives the thread that made it. Then it checks the namespace with CheckIsolated; a namespace
// that fails the check is removed again and the error says why.
func CreateNetns(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o444)
	if err != nil {
		return fmt.Errorf("creating the network namespace file: %w", err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	err = onThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
		}
		if err := netns.LoopbackUp(); err != nil {
			return err
		}
		if err := unix.Mount("/proc/thread-self/ns/net", path, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("pinning the network namespace to %s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		return errors.Join(fmt.Errorf("creating network namespace %s: %w", path, err), os.Remove(path))
	}
	if err := CheckIsolated(path); err != nil {
		return errors.Join(err, RemoveNetns(path))
	}
	return nil
}

// RemoveNetns unpins the network namespace at path and removes the file. The namespace itself
// goes once no process is left in it. A path that does not exist is not an error.
func RemoveNetns(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unpinning network namespace %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing network namespace %s: %w", path, err)
	}
	return nil
}

// ErrNotIsolated is wrapped by CheckIsolated's errors.
var ErrNotIsolated = errors.New("not isolated")

// CheckIsolated returns an error, wrapping ErrNotIsolated, when the network namespace pinned at
// path has an interface besides lo (an uplink: a veth, a physical or tunnel device, anything a
// packet could leave by) or a default route, IPv4 or IPv6. The harness runs it on a namespace it
// has just created, before anything starts there: pods and nodes in it get addresses outside
// 127.0.0.0/8, and only a namespace with nothing but lo keeps what they send on this machine.
func CheckIsolated(path string) error {
	var problems []string
	err := inNetns(path, func() error {
		ifaces, err := net.Interfaces()
		if err != nil {
			return fmt.Errorf("listing the interfaces: %w", err)
		}
		for _, iface := range ifaces {
			if iface.Name != "lo" {
				problems = append(problems, fmt.Sprintf("it has interface %s besides lo", iface.Name))
			}
		}
		routes, err := defaultRoutes()
		if err != nil {
			return err
		}
		for _, r := range routes {
			problems = append(problems, "it has a default route "+r)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("checking network namespace %s: %w", path, err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("network namespace %s is %w: %s; refusing to start anything in it, since what runs there could reach beyond this machine",
			path, ErrNotIsolated, strings.Join(problems, ", and "))
	}
	return nil
}

// defaultRoutes lists the default routes of the calling thread's network namespace, from
// /proc/thread-self/net (/proc/self/net would show the main thread's namespace).
func defaultRoutes() ([]string, error) {
	var out []string
	v4, err := os.Open("/proc/thread-self/net/route")
	if err != nil {
		return nil, fmt.Errorf("reading the IPv4 routes: %w", err)
	}
	defer v4.Close()
	sc := bufio.NewScanner(v4)
	for sc.Scan() {
		// Iface Destination Gateway Flags ... Mask ...; hexadecimal, the header first.
		f := strings.Fields(sc.Text())
		if len(f) >= 8 && f[1] == "00000000" && f[7] == "00000000" {
			out = append(out, "0.0.0.0/0 dev "+f[0])
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	v6, err := os.ReadFile("/proc/thread-self/net/ipv6_route")
	if errors.Is(err, os.ErrNotExist) {
		return out, nil // no IPv6 in this kernel
	}
	if err != nil {
		return nil, fmt.Errorf("reading the IPv6 routes: %w", err)
	}
	for line := range strings.Lines(string(v6)) {
		// dst dstlen src srclen nexthop metric refcnt use flags dev
		f := strings.Fields(line)
		if len(f) >= 10 && f[0] == strings.Repeat("0", 32) && f[1] == "00" && f[9] != "lo" {
			out = append(out, "::/0 dev "+f[9])
		}
	}
	return out, nil
}

// inNetns runs fn on a thread in the network namespace pinned at path. Sockets fn creates
// belong to that namespace and keep working from any thread afterwards. fn must not start
// processes.
func inNetns(path string, fn func() error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening network namespace %s: %w", path, err)
	}
	defer f.Close()
	return onThread(func() error {
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("entering network namespace %s: %w", path, err)
		}
		return fn()
	})
}

// onThread runs fn locked to a thread whose network namespace it may change, and puts the thread
// back in its namespace afterwards. The thread must live on: a process started by a thread that
// this program once ran on gets SIGKILL when the thread ends (the parent-death signal of
// e2e/clusters' processes), and the runtime ends a thread whose goroutine exits locked. So a
// thread that cannot go back is parked for good instead.
func onThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("opening this thread's network namespace: %w", err)
			return
		}
		defer home.Close()
		errc <- fn()
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
			select {} // in another namespace for good: no goroutine may run here again
		}
		runtime.UnlockOSThread()
	}()
	return <-errc
}

// Listen listens on address in the network namespace pinned at path.
func Listen(path, network, address string) (net.Listener, error) {
	var l net.Listener
	err := inNetns(path, func() error {
		var err error
		l, err = net.Listen(network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listening on %s in network namespace %s: %w", address, path, err)
	}
	return l, nil
}

// Dialer dials from inside the network namespace pinned at Netns, and only IP literals in
// Allowed or in 127.0.0.0/8: the namespace has no way out of the machine (CheckIsolated), and
// the allowed prefixes say which of its addresses a caller means to reach (pods, cluster DNS).
type Dialer struct {
	Netns   string
	Allowed []netip.Prefix
	net.Dialer
}

var loopback = netip.MustParsePrefix("127.0.0.0/8")

// DialContext dials address (an IP literal and a port) inside the namespace.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("dialling %s in network namespace %s: %w", address, d.Netns, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return nil, fmt.Errorf("dialling %s in network namespace %s: only IP literals, no names (a name would need a lookup)", address, d.Netns)
	}
	allowed := loopback.Contains(ip)
	for _, p := range d.Allowed {
		allowed = allowed || p.Contains(ip)
	}
	if !allowed {
		return nil, fmt.Errorf("dialling %s in network namespace %s: not in 127.0.0.0/8 or %v", address, d.Netns, d.Allowed)
	}
	var conn net.Conn
	err = inNetns(d.Netns, func() error {
		var err error
		conn, err = d.Dialer.DialContext(ctx, network, address)
		return err
	})
	return conn, err
}
