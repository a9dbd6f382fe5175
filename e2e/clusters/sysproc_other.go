//go:build unix && !linux

package clusters

import "syscall"

// sysProcAttr puts a component in its own process group, or its own session when detached. Only
// Linux can have the kernel kill an attached component when this program dies.
func sysProcAttr(detach bool) *syscall.SysProcAttr {
	if detach {
		return &syscall.SysProcAttr{Setsid: true}
	}
	return &syscall.SysProcAttr{Setpgid: true}
}
