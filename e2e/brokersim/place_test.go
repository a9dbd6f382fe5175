package brokersim_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/curve25519"

	"github.com/fluxfed/fluxfed/e2e/brokersim"
	"github.com/fluxfed/fluxfed/member/render/curve"
)

// bootstrap returns a broker.toml with the rendered defaults and the given hosts entries and
// extra tables.
func bootstrap(hosts string, extra ...string) []byte {
	return []byte(`[bootstrap]
curve_cert = "/mnt/flux/curve/curve.cert"
default_port = 8050
default_bind = "tcp://eth0:%p"
default_connect = "tcp://%h.flux-service.hpc.svc.cluster.local:%p"
hosts = [
` + hosts + `
]
` + strings.Join(extra, "\n"))
}

const svc = ".flux-service.hpc.svc.cluster.local:8050"

func TestLocate(t *testing.T) {
	root := bootstrap(`{ host = "r-[0-1],b-0" },
  { host = "b-[1-2]", parent = "b-0" },`)
	burst := bootstrap(`{ host = "127.100.0.10", bind = "tcp://eth0:31050", connect = "tcp://127.100.0.10:31050" },
  { host = "r-1,b-0" },
  { host = "b-[1-2]", parent = "b-0" },`)
	flat := func(topo string) []byte { return bootstrap(`{ host = "n-[0-9]" },`, "[tbon]\ntopo = \""+topo+"\"\n") }
	tests := []struct {
		name     string
		toml     []byte
		hostname string
		want     brokersim.Place
	}{
		{name: "rank 0 of the root side", toml: root, hostname: "r-0",
			want: brokersim.Place{Rank: 0, Size: 5, Parent: -1, Children: []int{1, 2}, Bind: "tcp://eth0:8050"}},
		{name: "a root broker without children", toml: root, hostname: "r-1",
			want: brokersim.Place{Rank: 1, Size: 5, Parent: 0, ParentHost: "r-0", Connect: "tcp://r-0" + svc}},
		{name: "a burst's first broker reaches rank 0 at the lead address", toml: burst, hostname: "b-0",
			want: brokersim.Place{Rank: 2, Size: 5, Parent: 0, ParentHost: "127.100.0.10", Children: []int{3, 4}, Bind: "tcp://eth0:8050", Connect: "tcp://127.100.0.10:31050"}},
		{name: "a burst broker below the burst's first", toml: burst, hostname: "b-2",
			want: brokersim.Place{Rank: 4, Size: 5, Parent: 2, ParentHost: "b-0", Connect: "tcp://b-0" + svc}},
		{name: "a host listed twice keeps its first rank and takes the later keys", hostname: "b-1",
			toml: bootstrap(`{ host = "r-0,b-[0-1]" }, { host = "b-1", parent = "b-0", connect = "tcp://%h.alt:%p" }, { host = "b-0", bind = "tcp://*:9000" },`),
			want: brokersim.Place{Rank: 2, Size: 3, Parent: 1, ParentHost: "b-0", Connect: "tcp://b-0" + svc}},
		{name: "the merged bind key", hostname: "b-0",
			toml: bootstrap(`{ host = "r-0,b-[0-1]" }, { host = "b-1", parent = "b-0" }, { host = "b-0", bind = "tcp://*:%p%%" },`),
			want: brokersim.Place{Rank: 1, Size: 3, Parent: 0, ParentHost: "r-0", Children: []int{2}, Bind: "tcp://*:8050%", Connect: "tcp://r-0" + svc}},
		{name: "kary:2", toml: flat("kary:2"), hostname: "n-4",
			want: brokersim.Place{Rank: 4, Size: 10, Topology: "kary:2", Parent: 1, ParentHost: "n-1", Children: []int{9}, Bind: "tcp://eth0:8050", Connect: "tcp://n-1" + svc}},
		{name: "kary:3", toml: flat("kary:3"), hostname: "n-2",
			want: brokersim.Place{Rank: 2, Size: 10, Topology: "kary:3", Parent: 0, ParentHost: "n-0", Children: []int{7, 8, 9}, Bind: "tcp://eth0:8050", Connect: "tcp://n-0" + svc}},
		{name: "kary:0 is flat", toml: flat("kary:0"), hostname: "n-9",
			want: brokersim.Place{Rank: 9, Size: 10, Topology: "kary:0", Parent: 0, ParentHost: "n-0", Connect: "tcp://n-0" + svc}},
		{name: "kary:1 is a chain", toml: flat("kary:1"), hostname: "n-5",
			want: brokersim.Place{Rank: 5, Size: 10, Topology: "kary:1", Parent: 4, ParentHost: "n-4", Children: []int{6}, Bind: "tcp://eth0:8050", Connect: "tcp://n-4" + svc}},
		{name: "binomial", toml: flat("binomial"), hostname: "n-6",
			want: brokersim.Place{Rank: 6, Size: 10, Topology: "binomial", Parent: 4, ParentHost: "n-4", Children: []int{7}, Bind: "tcp://eth0:8050", Connect: "tcp://n-4" + svc}},
		{name: "binomial rank 8", toml: flat("binomial"), hostname: "n-8",
			want: brokersim.Place{Rank: 8, Size: 10, Topology: "binomial", Parent: 0, ParentHost: "n-0", Children: []int{9}, Bind: "tcp://eth0:8050", Connect: "tcp://n-0" + svc}},
		{name: "mincrit:2", toml: flat("mincrit:2"), hostname: "n-1",
			want: brokersim.Place{Rank: 1, Size: 10, Topology: "mincrit:2", Parent: 0, ParentHost: "n-0", Children: []int{3, 5, 7, 9}, Bind: "tcp://eth0:8050", Connect: "tcp://n-0" + svc}},
		{name: "mincrit is flat when small", toml: flat("mincrit"), hostname: "n-7",
			want: brokersim.Place{Rank: 7, Size: 10, Topology: "mincrit", Parent: 0, ParentHost: "n-0", Connect: "tcp://n-0" + svc}},
		{name: "parent keys mean nothing under kary", hostname: "b-1",
			toml: bootstrap(`{ host = "r-0,b-0" }, { host = "b-1", parent = "b-0" },`, "[tbon]\ntopo = \"kary:0\"\n"),
			want: brokersim.Place{Rank: 2, Size: 3, Topology: "kary:0", Parent: 0, ParentHost: "r-0", Connect: "tcp://r-0" + svc}},
		{name: "a connect URI with a bad port starts, and fails later", hostname: "b-0",
			toml: bootstrap(`{ host = "r-0", connect = "tcp://r-0:port" }, { host = "b-0" },`),
			want: brokersim.Place{Rank: 1, Size: 2, Parent: 0, ParentHost: "r-0", Connect: "tcp://r-0:port"}},
		{name: "no hosts: a singleton", toml: []byte("[bootstrap]\n"), hostname: "a-0",
			want: brokersim.Place{Rank: 0, Size: 1, Parent: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := brokersim.Locate(tt.toml, tt.hostname)
			require.NoError(t, err)
			tt.want.Hostname = tt.hostname
			if diff := cmp.Diff(&tt.want, got); diff != "" {
				t.Errorf("Locate(%s) (-want +got):\n%s", tt.hostname, diff)
			}
		})
	}
}

func TestLocateRefuses(t *testing.T) {
	tests := []struct {
		name, toml, hostname, err string
	}{
		{name: "not TOML", toml: "[bootstrap", hostname: "a-0", err: "broker.toml must be TOML"},
		{name: "no bootstrap", toml: "[tbon]\n", hostname: "a-0", err: "there is no [bootstrap] table"},
		{name: "not in hosts", toml: string(bootstrap(`{ host = "r-[0-1]" },`)), hostname: "r-2", err: "r-2 not found in hosts, so the broker exits"},
		{name: "a string port", toml: strings.Replace(string(bootstrap(`{ host = "r-[0-1]" },`)), "8050", `"8050"`, 1), hostname: "r-0",
			err: "default_port is string 8050"},
		{name: "an unknown key", toml: string(bootstrap(`{ host = "r-[0-1]", port = 1 },`)), hostname: "r-0", err: "hosts[0] has the unknown key port"},
		{name: "an unknown topology", toml: string(bootstrap(`{ host = "r-[0-1]" },`, "[tbon]\ntopo = \"ring\"\n")), hostname: "r-0", err: `unknown topology "ring"`},
		{name: "a parent cycle", toml: string(bootstrap(`{ host = "r-0" }, { host = "r-1", parent = "r-2" }, { host = "r-2", parent = "r-1" },`)), hostname: "r-0",
			err: "the parent keys make a cycle"},
		{name: "no curve_cert", toml: strings.Replace(string(bootstrap(`{ host = "r-[0-1]" },`)), "curve_cert", "#", 1), hostname: "r-0", err: "2 hosts and no curve_cert"},
		{name: "no bind URI", toml: "[bootstrap]\ncurve_cert = \"c\"\nhosts = [{ host = \"r-[0-1]\", connect = \"tcp://%h:1\" }]\n", hostname: "r-0",
			err: "rank 0 has children (rank 1) but no bind URI"},
		{name: "the 0MQ wildcard", toml: strings.Replace(string(bootstrap(`{ host = "r-[0-1]" },`)), "eth0:%p", "eth0:*", 1), hostname: "r-1",
			err: "the port is the 0MQ wildcard"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := brokersim.Locate([]byte(tt.toml), tt.hostname)
			require.ErrorContains(t, err, tt.err)
			var cfgErr *brokersim.ConfigError
			require.ErrorAs(t, err, &cfgErr)
			require.Equal(t, tt.hostname, cfgErr.Hostname)
			require.Contains(t, err.Error(), tt.hostname+": the broker does not start: ")
		})
	}
}

func TestCertificateKeys(t *testing.T) {
	secret := bytes.Repeat([]byte{3}, curve.KeySize)
	a, err := curve.Generate(bytes.NewReader(secret), curve.Metadata{Key: "name", Value: "a"})
	require.NoError(t, err)
	b, err := curve.Generate(bytes.NewReader(secret), curve.Metadata{Key: "name", Value: "b"}, curve.Metadata{Key: "keygen.hostname", Value: "x"})
	require.NoError(t, err)
	other, err := curve.Generate(bytes.NewReader(bytes.Repeat([]byte{4}, curve.KeySize)))
	require.NoError(t, err)

	ka, err := brokersim.CertificateKeys(curve.File(a))
	require.NoError(t, err)
	require.Equal(t, secret, ka.Secret[:])
	public, err := curve.DecodeZ85(a.PublicKey())
	require.NoError(t, err)
	require.Equal(t, public, ka.Public[:])
	// The secret key makes the public key, as the CURVE handshake needs.
	derived, err := curve25519.X25519(ka.Secret[:], curve25519.Basepoint)
	require.NoError(t, err)
	require.Equal(t, ka.Public[:], derived)

	kb, err := brokersim.CertificateKeys(curve.File(b))
	require.NoError(t, err)
	require.Equal(t, ka, kb, "the same keypair with other metadata is the same certificate")
	ko, err := brokersim.CertificateKeys(curve.File(other))
	require.NoError(t, err)
	require.NotEqual(t, ka.Public, ko.Public)
	_, err = brokersim.CertificateKeys([]byte("curve\n"))
	require.ErrorContains(t, err, "has no public-key")
}
