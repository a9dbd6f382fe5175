package clusters

import (
	"fmt"
	"net"
	"strings"
	"sync"
)

// portAllocator hands out free TCP ports on the loopback interface. A port is free when the
// kernel gives it for a listen on :0; the listener is closed at once so that a component can bind
// it. Another program may take it in between, so components that fail with "address already in
// use" are started again on new ports (see startWithRetry). The allocator never hands out the same
// port twice, so the clusters of one Environment cannot collide among themselves.
type portAllocator struct {
	mu     sync.Mutex
	given  map[int]bool
	listen func() (int, error)
}

func newPortAllocator() *portAllocator {
	return &portAllocator{given: map[int]bool{}, listen: listenLoopback}
}

// maxPortTries bounds how often the allocator asks the kernel before giving up; the kernel rarely
// returns a port it returned shortly before, so a few tries are plenty.
const maxPortTries = 50

// take returns n ports that were free a moment ago and that this allocator never gave before.
func (a *portAllocator) take(n int) ([]int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries == maxPortTries {
			return nil, fmt.Errorf("finding %d free ports: gave up after %d tries", n, maxPortTries)
		}
		port, err := a.listen()
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		if a.given[port] {
			continue
		}
		a.given[port] = true
		ports = append(ports, port)
	}
	return ports, nil
}

func listenLoopback() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, err
	}
	return port, nil
}

// portTaken reports whether a component's log says it could not bind its port.
func portTaken(log string) bool {
	return strings.Contains(log, "address already in use")
}
