package members

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAllowDial(t *testing.T) {
	allowed, err := ParsePrefixes("127.0.0.0/8, 10.20.0.0/16")
	require.NoError(t, err)
	var dialled []string
	fake := func(_ context.Context, _, address string) (net.Conn, error) {
		dialled = append(dialled, address)
		return nil, errors.New("not dialling in a test")
	}
	dial := AllowDial(allowed, fake)
	tests := []struct {
		address, dialled string
		refused          bool
	}{
		{address: "127.0.0.1:6443", dialled: "127.0.0.1:6443"},
		{address: "127.101.0.3:30093", dialled: "127.101.0.3:30093"},
		{address: "10.20.3.4:443", dialled: "10.20.3.4:443"},
		{address: "[::ffff:127.0.0.1]:443", dialled: "127.0.0.1:443"},
		{address: "10.21.0.1:443", refused: true},
		{address: "[::1]:443", refused: true},
		{address: "0.0.0.0:443", refused: true},
		{address: "no-port", refused: true},
	}
	for _, tt := range tests {
		t.Run(tt.address, func(t *testing.T) {
			dialled = nil
			_, err := dial(context.Background(), "tcp", tt.address)
			if tt.refused {
				require.ErrorIs(t, err, ErrDialRefused)
				require.Empty(t, dialled, "a refused address is never dialled")
				return
			}
			require.NotErrorIs(t, err, ErrDialRefused)
			require.Equal(t, []string{tt.dialled}, dialled)
		})
	}

	// A name is resolved and checked address by address; localhost resolves from /etc/hosts.
	dialled = nil
	_, err = dial(context.Background(), "tcp", "localhost:443")
	if !errors.Is(err, ErrDialRefused) {
		require.Len(t, dialled, 1)
		ip, perr := netip.ParseAddrPort(dialled[0])
		require.NoError(t, perr)
		require.True(t, ip.Addr().IsLoopback(), "localhost was dialled as %s", dialled[0])
	}
}

func TestParsePrefixes(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  string
	}{
		{in: "", want: nil},
		{in: "127.0.0.0/8", want: []string{"127.0.0.0/8"}},
		{in: " 10.0.0.0/8 ,, 127.0.0.1/8", want: []string{"10.0.0.0/8", "127.0.0.0/8"}},
		{in: "fd00::/8", want: []string{"fd00::/8"}},
		{in: "127.0.0.1", err: `"127.0.0.1" is not a CIDR`},
		{in: "10.0.0.0/33", err: `"10.0.0.0/33" is not a CIDR`},
		{in: "localhost/8", err: "is not a CIDR"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParsePrefixes(tt.in)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			var s []string
			for _, p := range got {
				s = append(s, p.String())
			}
			require.Equal(t, tt.want, s)
		})
	}
}

func FuzzParsePrefixes(f *testing.F) {
	for _, s := range []string{"127.0.0.0/8", "10.0.0.0/8,192.168.0.0/16", "::1/128", "", ",", "1.2.3.4/0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		prefixes, err := ParsePrefixes(s)
		if err != nil {
			return
		}
		for _, p := range prefixes {
			if !p.IsValid() || p != p.Masked() {
				t.Fatalf("ParsePrefixes(%q) gave %v", s, p)
			}
			again, err := ParsePrefixes(p.String())
			if err != nil || len(again) != 1 || again[0] != p {
				t.Fatalf("%v does not parse back: %v %v", p, again, err)
			}
		}
	})
}
