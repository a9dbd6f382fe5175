package members

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// Dialer opens a connection, as net.Dialer.DialContext does.
type Dialer func(ctx context.Context, network, address string) (net.Conn, error)

// ErrDialRefused is wrapped by the errors of a dialer from AllowDial for an address it refuses.
var ErrDialRefused = errors.New("refused to dial")

// AllowDial returns a dialer that connects only to addresses in allowed, through dial (a
// net.Dialer when nil). A name is resolved first, and refused unless every address it resolves to
// is allowed, so that a name cannot lead the hub where an address could not. The hub dials what
// other people's kubeconfigs and MiniClusters name (members' API servers, the lead broker's
// advertised address); this is where its operator decides which networks that may be.
func AllowDial(allowed []netip.Prefix, dial Dialer) Dialer {
	if dial == nil {
		dial = (&net.Dialer{KeepAlive: keepAlive}).DialContext
	}
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(address)
		if err != nil {
			return nil, fmt.Errorf("%w %s: %w", ErrDialRefused, address, err)
		}
		var addrs []netip.Addr
		if ip, err := netip.ParseAddr(host); err == nil {
			addrs = []netip.Addr{ip}
		} else {
			if addrs, err = net.DefaultResolver.LookupNetIP(ctx, "ip", host); err != nil {
				return nil, err
			}
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("%w %s: the name resolves to no address", ErrDialRefused, address)
		}
		for _, a := range addrs {
			if !allows(allowed, a.Unmap()) {
				return nil, fmt.Errorf("%w %s: %s is outside the networks the hub may dial (%s)", ErrDialRefused, address, a, prefixes(allowed))
			}
		}
		// Dial the address that was checked, not the name again.
		return dial(ctx, network, net.JoinHostPort(addrs[0].Unmap().String(), port))
	}
}

func allows(allowed []netip.Prefix, a netip.Addr) bool {
	for _, p := range allowed {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func prefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// ParsePrefixes parses a comma-separated list of CIDRs, such as "127.0.0.0/8,10.0.0.0/8".
func ParsePrefixes(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR such as 127.0.0.0/8: %w", f, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// withTimeout bounds establishing each connection of dial to timeout.
func withTimeout(dial Dialer, timeout time.Duration) Dialer {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return dial(ctx, network, address)
	}
}

// hash identifies a kubeconfig without keeping it.
func hash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
