// Package netns holds what the test harness does to a network namespace it made itself, whether
// the one every test binary runs in (e2e/cmd/loopback) or a cluster's sandbox of real nodes
// (e2e/realnode): bring its loopback interface up.
package netns

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// LoopbackUp sets IFF_UP on lo of the calling thread's network namespace, which is all a new
// namespace lacks: the kernel then gives lo 127.0.0.1/8 and routes all of 127.0.0.0/8 to it. The
// namespace is the thread's: the caller locks it to its OS thread.
func LoopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("a socket for ioctl: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCGIFFLAGS lo: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCSIFFLAGS lo: %w", err)
	}
	return nil
}
