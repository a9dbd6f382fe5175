package testenv

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/fluxfed/fluxfed/e2e/netguard"
)

// Proxy forwards TCP connections to a server (an API server's URL) until it is cut, or hangs:
// tests make a member unreachable, or silent, with it. It listens on loopback.
type Proxy struct {
	target, addr string
	mu           sync.Mutex
	ln           net.Listener
	conns        map[net.Conn]bool
	hanging      bool
}

// StartProxy starts a proxy to target, cut when the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{target: u.Host, addr: ln.Addr().String(), conns: map[net.Conn]bool{}}
	p.serve(ln)
	t.Cleanup(p.Cut)
	return p
}

// URL is the https URL that reaches the target through the proxy.
func (p *Proxy) URL() string { return "https://" + p.addr }

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(conn)
		}
	}()
}

func (p *Proxy) forward(conn net.Conn) {
	p.mu.Lock()
	if p.hanging {
		p.conns[conn] = true
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	upstream, err := (&netguard.Dialer{}).Dial("tcp", p.target)
	if err != nil {
		_ = conn.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil {
		p.mu.Unlock()
		_ = conn.Close()
		_ = upstream.Close()
		return
	}
	p.conns[conn], p.conns[upstream] = true, true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(upstream, conn); _ = upstream.Close() }()
	_, _ = io.Copy(conn, upstream)
	_ = conn.Close()
}

// Cut closes the listener and every connection: the target is unreachable (connections are
// refused).
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	p.dropLocked()
}

// Restore listens again at the same address: the target is back.
func (p *Proxy) Restore(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ln, err := net.Listen("tcp", p.addr)
		if err == nil {
			p.serve(ln)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("listening again on %s: %v", p.addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Hang makes the target stop answering: open connections are dropped, new ones are accepted and
// never answered, as by a server that stopped. Unhang forwards again.
func (p *Proxy) Hang() { p.setHanging(true) }

// Unhang ends Hang.
func (p *Proxy) Unhang() { p.setHanging(false) }

func (p *Proxy) setHanging(hanging bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hanging = hanging
	p.dropLocked()
}

func (p *Proxy) dropLocked() {
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

// SilentServer returns the address of a listener on loopback that accepts connections and never
// answers: a server that hangs. It closes when the test ends.
func SilentServer(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}
