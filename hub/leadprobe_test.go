package hub_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fluxv1alpha2 "github.com/fluxfed/fluxfed/api/v1alpha2"
	"github.com/fluxfed/fluxfed/e2e/netguard"
	"github.com/fluxfed/fluxfed/hub"
	"github.com/fluxfed/fluxfed/hub/probe"
)

// zmtpListener answers like a Flux broker's ZMTP CURVE endpoint, on a node port of 127.0.0.1,
// until it is closed.
type zmtpListener struct {
	net.Listener
	port int32
}

func listenOnANodePort(t *testing.T) *zmtpListener {
	t.Helper()
	var l net.Listener
	var port int
	for range 100 {
		port = 30000 + rand.IntN(2767)
		var err error
		if l, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			break
		}
	}
	require.NotNil(t, l, "no free node port on 127.0.0.1")
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = conn.Close() }()
				var greeting [64]byte
				greeting[0], greeting[9], greeting[10], greeting[11] = 0xFF, 0x7F, 3, 1
				copy(greeting[12:], "CURVE")
				_, _ = conn.Write(greeting[:])
				_, _ = io.ReadFull(conn, greeting[:])
			}()
		}
	}()
	zl := &zmtpListener{Listener: l, port: int32(port)}
	t.Cleanup(func() { _ = zl.Close() })
	return zl
}

func leadCondition(t require.TestingT, f *federation, root *fluxv1alpha2.MiniCluster) *metav1.Condition {
	c := meta.FindStatusCondition(f.root(t, root).Status.Conditions, fluxv1alpha2.ConditionLeadBrokerReachable)
	require.NotNil(t, c)
	return c
}

// TestLeadBrokerReachableFollowsTheEndpoint greets a real listener: LeadBrokerReachable turns
// False within the documented bound once it closes, and the message says the same whatever is
// (or is not) at the endpoint. An address outside the networks the hub may greet is not dialled.
func TestLeadBrokerReachableFollowsTheEndpoint(t *testing.T) {
	const interval, timeout = time.Second, 500 * time.Millisecond
	greet := probe.NewLimiter(interval, nil).Limit(probe.GreetWith(probe.Dialer((&netguard.Dialer{}).DialContext)))
	var greeted []string
	f := startFederation(t, hub.Options{
		ProbeInterval: interval, ProbeTimeout: timeout,
		LeadAddressAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		Probe: func(ctx context.Context, address string, port int32) error {
			greeted = append(greeted, fmt.Sprintf("%s:%d", address, port))
			return greet(ctx, address, port)
		},
	}, "member-a")
	ctx := context.Background()
	ns := f.namespace(t)

	lead := listenOnANodePort(t)
	root := newRoot(ns, "lead", fluxv1alpha2.Burst{Name: "burst-a", Cluster: "member-a", Size: 1})
	root.Spec.Flux.Bursting.Expose.NodePort = lead.port
	require.NoError(t, f.hub.Client.Create(ctx, root))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cond := leadCondition(c, f, root)
		require.Equal(c, metav1.ConditionTrue, cond.Status, cond.Message)
	}, wait, tick)

	// Closed: False within the bound, however long it has been True.
	time.Sleep(3 * interval)
	require.NoError(t, lead.Close())
	closed := time.Now()
	bound := hub.LeadProbeBound(interval, timeout)
	var cond *metav1.Condition
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cond = leadCondition(c, f, root)
		require.Equal(c, metav1.ConditionFalse, cond.Status)
	}, bound+2*time.Second, tick, "the status is written within a second of the reconcile")
	t.Logf("LeadBrokerReachable=False %v after the endpoint closed (bound %v)", time.Since(closed).Round(10*time.Millisecond), bound)
	require.Equal(t, fluxv1alpha2.ReasonNotAnswering, cond.Reason)
	refused := fmt.Sprintf("no Flux broker answered at 127.0.0.1:%d", lead.port)
	require.Equal(t, refused, cond.Message)

	// Something else answers on the port: the same message.
	other := listenOnANodePortAt(t, lead.port)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Positive(c, other.accepted())
	}, bound+2*time.Second, tick)
	time.Sleep(time.Second)
	require.Equal(t, refused, leadCondition(t, f, root).Message, "a port that answers is not told from one that refuses")

	// An address outside the networks the hub greets is never dialled.
	outside := newRoot(ns, "outside", fluxv1alpha2.Burst{Name: "burst-o", Cluster: "member-a", Size: 1})
	outside.Spec.Flux.Bursting.Expose.Address = "127.0.0.2"
	require.NoError(t, f.hub.Client.Create(ctx, outside))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cond := leadCondition(c, f, outside)
		require.Equal(c, metav1.ConditionFalse, cond.Status)
		require.Regexp(c, `^the hub did not greet 127\.0\.0\.2:\d+ \(spec\.flux\.bursting\.expose\.address\): it is outside the networks the hub's operator lets the hub greet \(the hub's --lead-address-allow\); the bursts are told it anyway$`, cond.Message)
	}, wait, tick)
	for _, g := range greeted {
		require.NotContains(t, g, "127.0.0.2")
	}
}

// countingListener accepts connections on a port and answers with something that is not ZMTP.
type countingListener struct {
	net.Listener
	n chan struct{}
}

func (l *countingListener) accepted() int { return len(l.n) }

func listenOnANodePortAt(t *testing.T, port int32) *countingListener {
	t.Helper()
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	require.NoError(t, err)
	cl := &countingListener{Listener: l, n: make(chan struct{}, 1000)}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			select {
			case cl.n <- struct{}{}:
			default:
			}
			_, _ = conn.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			_ = conn.Close()
		}
	}()
	t.Cleanup(func() { _ = l.Close() })
	return cl
}

func TestAllowedLeadAddress(t *testing.T) {
	for _, tt := range []struct {
		address string
		allowed []netip.Prefix
		refused bool
	}{
		{address: "10.0.0.5"},
		{address: "203.0.113.7"},
		{address: "127.0.0.1", refused: true},
		{address: "169.254.169.254", refused: true},
		{address: "::1", refused: true},
		{address: "0.0.0.0", refused: true},
		{address: "10.0.0.5", allowed: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}, refused: true},
		{address: "192.168.3.4", allowed: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}},
		{address: "127.0.0.1", allowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
	} {
		t.Run(fmt.Sprint(tt.address, tt.allowed), func(t *testing.T) {
			got, err := hub.AllowedLeadAddress(context.Background(), tt.allowed, tt.address)
			if tt.refused {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, netip.MustParseAddr(tt.address), got)
		})
	}
	_, err := hub.AllowedLeadAddress(context.Background(), nil, "lead.invalid")
	require.True(t, err != nil && !errors.Is(err, context.Canceled))
}
