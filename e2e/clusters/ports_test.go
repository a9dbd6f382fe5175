package clusters

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
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

// podNet writes the prefix 10.b.c.0/bits, where pods are, from the bytes of its address, so that no
// address outside loopback appears literally in e2e/ (a grep for them must find none).
func podNet(b, c byte, bits int) string {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, b, c, 0}), bits).String()
}

func TestAddressPlan(t *testing.T) {
	for _, tc := range []struct {
		index                                                    int
		node1, node2, serviceCIDR, serviceIP, podCIDR1, fallback string
	}{
		{0, "127.101.0.1", "127.101.0.2", "127.101.240.0/20", "127.101.240.1", podNet(1, 1, 24), podNet(1, 239, 24)},
		{2, "127.103.0.1", "127.103.0.2", "127.103.240.0/20", "127.103.240.1", podNet(3, 1, 24), podNet(3, 239, 24)},
	} {
		p := planFor(tc.index)
		require.Equal(t, tc.node1, p.nodeIP(1))
		require.Equal(t, tc.node2, p.nodeIP(2))
		require.Equal(t, tc.serviceCIDR, p.serviceCIDR())
		require.Equal(t, tc.serviceIP, p.serviceIP().String())
		require.Equal(t, tc.podCIDR1, p.podCIDR(1))
		require.Equal(t, tc.fallback, p.fallbackPodCIDR())
	}
}

// TestAddressPlanKeepsApart checks every cluster's ranges: nodes and Services in a /16 of
// 127.0.0.0/8 of the cluster's own, where everything stays on the machine, away from 127.0.0.1
// where the API servers and etcd listen; pods in a /16 of the cluster's own too; all apart from
// each other.
func TestAddressPlanKeepsApart(t *testing.T) {
	servers := netip.MustParseAddr("127.0.0.1")
	loopback := netip.MustParsePrefix("127.0.0.0/8")
	prefix := func(s string) netip.Prefix {
		p, err := netip.ParsePrefix(s)
		require.NoError(t, err)
		require.Equal(t, p.Masked(), p, "%s is a network address", s)
		return p
	}
	blocks := map[netip.Prefix]int{}
	for index := range maxClusters {
		p := planFor(index)
		local := prefix(fmt.Sprintf("127.%d.0.0/16", p.octet()))
		pods := prefix(podNet(byte(index+1), 0, 16))
		for _, b := range []netip.Prefix{local, pods} {
			require.NotContains(t, blocks, b, "cluster %d", index)
			blocks[b] = index
		}
		require.True(t, loopback.Contains(local.Addr()))
		require.False(t, local.Contains(servers))

		services := prefix(p.serviceCIDR())
		require.True(t, services.Contains(netip.MustParseAddr(p.serviceIP().String())), "the kubernetes Service is in the Service range")
		require.True(t, local.Contains(services.Addr()) && services.Bits() >= 16, "%s is outside %s", services, local)
		ranges := []netip.Prefix{prefix(p.fallbackPodCIDR())}
		for n := 1; n <= maxNodes; n++ {
			ranges = append(ranges, prefix(p.podCIDR(n)))
		}
		for i, r := range ranges {
			require.True(t, pods.Contains(r.Addr()) && r.Bits() >= 16, "%s is outside %s", r, pods)
			for _, other := range ranges[:i] {
				if r.Overlaps(other) {
					t.Fatalf("%s overlaps %s", r, other)
				}
			}
		}
		for n := 1; n <= maxNodes; n++ {
			node := netip.MustParseAddr(p.nodeIP(n))
			require.True(t, local.Contains(node), "node %s is outside %s", node, local)
			require.False(t, services.Contains(node), "node %s is in %s", node, services)
		}
	}
}
