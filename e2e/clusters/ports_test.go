package clusters

import (
	"errors"
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPortAllocatorTake(t *testing.T) {
	for _, tc := range []struct {
		name    string
		kernel  []int // what successive listens on :0 return; 0 means an error
		n       int
		want    []int
		wantErr string
	}{
		{name: "distinct ports as given", kernel: []int{1001, 1002, 1003}, n: 3, want: []int{1001, 1002, 1003}},
		{name: "a port given before is skipped", kernel: []int{1001, 1001, 1002}, n: 2, want: []int{1001, 1002}},
		{name: "listen fails", kernel: []int{1001, 0}, n: 2, wantErr: "finding a free port"},
		{name: "the kernel keeps returning one port", kernel: repeat(1001, maxPortTries+1), n: 2, wantErr: "gave up"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newPortAllocator()
			next := 0
			a.listen = func() (int, error) {
				port := tc.kernel[next]
				next++
				if port == 0 {
					return 0, errors.New("no ports left")
				}
				return port, nil
			}
			got, err := a.take(tc.n)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func repeat(port, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = port
	}
	return out
}

// TestPortAllocatorGivesBindablePorts takes real ports twice from one allocator: all distinct,
// and each free to bind.
func TestPortAllocatorGivesBindablePorts(t *testing.T) {
	a := newPortAllocator()
	first, err := a.take(5)
	require.NoError(t, err)
	second, err := a.take(5)
	require.NoError(t, err)
	seen := map[int]bool{}
	for _, port := range append(first, second...) {
		require.False(t, seen[port], "port %d given twice", port)
		seen[port] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		require.NoError(t, err)
		require.NoError(t, l.Close())
	}
}

func TestPortTaken(t *testing.T) {
	for log, want := range map[string]bool{
		`{"level":"fatal","msg":"listen failed","error":"listen tcp 127.0.0.1:2379: bind: address already in use"}`:                    true,
		`E0101 failed to create listener: failed to listen on 127.0.0.1:6443: listen tcp 127.0.0.1:6443: bind: address already in use`: true,
		`E0101 "command failed" err="open /x/apiserver.crt: no such file or directory"`:                                                false,
		``: false,
	} {
		require.Equal(t, want, portTaken(log), log)
	}
}

func TestAddressPlan(t *testing.T) {
	for _, tc := range []struct {
		index                                          int
		node1, node2, podCIDR1, serviceCIDR, serviceIP string
	}{
		{0, "10.1.0.1", "10.1.0.2", "10.1.1.0/24", "10.1.240.0/20", "10.1.240.1"},
		{2, "10.3.0.1", "10.3.0.2", "10.3.1.0/24", "10.3.240.0/20", "10.3.240.1"},
	} {
		p := planFor(tc.index)
		require.Equal(t, tc.node1, p.nodeIP(1))
		require.Equal(t, tc.node2, p.nodeIP(2))
		require.Equal(t, tc.podCIDR1, p.podCIDR(1))
		require.Equal(t, tc.serviceCIDR, p.serviceCIDR())
		require.Equal(t, tc.serviceIP, p.serviceIP().String())
		_, services, err := net.ParseCIDR(p.serviceCIDR())
		require.NoError(t, err)
		require.True(t, services.Contains(p.serviceIP()))
		_, fallback, err := net.ParseCIDR(p.fallbackPodCIDR())
		require.NoError(t, err)
		for n := 1; n <= maxNodes; n++ {
			require.False(t, fallback.Contains(net.ParseIP(p.nodeIP(n))))
			_, pods, err := net.ParseCIDR(p.podCIDR(n))
			require.NoError(t, err)
			require.False(t, pods.Contains(p.serviceIP()))
			require.False(t, pods.Contains(fallback.IP))
		}
	}
}
