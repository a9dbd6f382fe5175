package clusters

import "syscall"

// sysProcAttr puts a component in its own process group. An attached one also gets SIGKILL from
// the kernel when the thread that started it dies, which in a Go program means when the program
// dies: the runtime ends threads only for goroutines that exit while locked to their thread, and
// this package locks none. A detached one leads its own session, so that it survives the
// terminal and the program that started it.
func sysProcAttr(detach bool) *syscall.SysProcAttr {
	if detach {
		return &syscall.SysProcAttr{Setsid: true}
	}
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
