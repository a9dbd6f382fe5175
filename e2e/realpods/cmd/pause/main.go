// Command pause is the sandbox program of the real pods' pause image (e2e/realpods): it holds the
// pod's namespaces, reaps the orphans it inherits as the pod's first process, and exits 0 on
// SIGINT or SIGTERM. It is built static and alone (no imports outside the standard library), so
// that its image is one file.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
