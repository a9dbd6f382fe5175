package gateway

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ca is a test CA that signs client certificates.
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T, name string) *ca {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &ca{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (c *ca) client(t *testing.T, cn string, usage x509.ExtKeyUsage) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn}, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, key.Public(), c.key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return cert
}

func frontProxyData(caPEM []byte) map[string]string {
	return map[string]string{
		"requestheader-client-ca-file":       string(caPEM),
		"requestheader-allowed-names":        `["front-proxy-client"]`,
		"requestheader-username-headers":     `["X-Remote-User"]`,
		"requestheader-group-headers":        `["X-Remote-Group"]`,
		"requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
	}
}

func TestParseFrontProxy(t *testing.T) {
	good := newCA(t, "front-proxy-ca")
	for _, tc := range []struct {
		name string
		data map[string]string
		err  string
	}{
		{"as kube-apiserver publishes it", frontProxyData(good.pem), ""},
		{"no front-proxy CA", map[string]string{"client-ca-file": string(good.pem)}, "publishes no front-proxy CA"},
		{"no PEM", map[string]string{"requestheader-client-ca-file": "not a certificate", "requestheader-username-headers": `["X-Remote-User"]`},
			"holds no PEM certificate"},
		{"a header list that is not JSON", map[string]string{"requestheader-client-ca-file": string(good.pem), "requestheader-username-headers": "X-Remote-User"},
			"requestheader-username-headers is not a JSON list"},
		{"no user header", map[string]string{"requestheader-client-ca-file": string(good.pem)}, "names no requestheader-username-headers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseFrontProxy(tc.data)
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.err)
		})
	}
}

// TestAuthenticateTrustsOnlyTheAPIServer: the user headers count only on a connection of the
// front-proxy certificate; a caller who reaches the gateway directly is nobody, whatever headers
// it sends.
func TestAuthenticateTrustsOnlyTheAPIServer(t *testing.T) {
	proxyCA, otherCA := newCA(t, "front-proxy-ca"), newCA(t, "cluster-ca")
	fp, err := ParseFrontProxy(frontProxyData(proxyCA.pem))
	require.NoError(t, err)
	headers := http.Header{
		"X-Remote-User":                     {"alice"},
		"X-Remote-Group":                    {"research", "system:authenticated"},
		"X-Remote-Extra-Scopes":             {"a", "b"},
		"X-Remote-Extra-Example.com%2fteam": {"hpc"},
	}
	for _, tc := range []struct {
		name  string
		certs []*x509.Certificate
		hdr   http.Header
		user  *User
		err   string
	}{
		{name: "the API server's front proxy", certs: []*x509.Certificate{proxyCA.client(t, "front-proxy-client", x509.ExtKeyUsageClientAuth)}, hdr: headers,
			user: &User{Name: "alice", Groups: []string{"research", "system:authenticated"},
				Extra: map[string][]string{"scopes": {"a", "b"}, "example.com/team": {"hpc"}}}},
		{name: "no certificate", hdr: headers, err: "no client certificate"},
		{name: "another CA", certs: []*x509.Certificate{otherCA.client(t, "front-proxy-client", x509.ExtKeyUsageClientAuth)}, hdr: headers,
			err: "not signed by the API server's front-proxy CA"},
		{name: "a name not allowed", certs: []*x509.Certificate{proxyCA.client(t, "mallory", x509.ExtKeyUsageClientAuth)}, hdr: headers,
			err: `"mallory", which is not one of the API server's front-proxy names`},
		{name: "a serving certificate", certs: []*x509.Certificate{proxyCA.client(t, "front-proxy-client", x509.ExtKeyUsageServerAuth)}, hdr: headers,
			err: "not signed by the API server's front-proxy CA"},
		{name: "no user", certs: []*x509.Certificate{proxyCA.client(t, "front-proxy-client", x509.ExtKeyUsageClientAuth)}, hdr: http.Header{},
			err: "forwarded no user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, prefix, nil)
			r.Header = tc.hdr.Clone()
			if tc.certs != nil {
				r.TLS = &tls.ConnectionState{PeerCertificates: tc.certs}
			} else {
				r.TLS = &tls.ConnectionState{}
			}
			u, err := fp.Authenticate(r)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.Nil(t, u)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.user, u)
		})
	}
}

// TestStripLeavesNoIdentity: nothing the caller or the API server sent about who asks reaches
// the hub's API server, where the hub's own credentials are added.
func TestStripLeavesNoIdentity(t *testing.T) {
	fp, err := ParseFrontProxy(frontProxyData(newCA(t, "ca").pem))
	require.NoError(t, err)
	h := http.Header{
		"X-Remote-User": {"alice"}, "X-Remote-Group": {"system:masters"}, "X-Remote-Extra-Scopes": {"x"},
		"Authorization": {"Bearer stolen"}, "Impersonate-User": {"admin"}, "Impersonate-Group": {"system:masters"},
		"X-Stream-Protocol-Version": {"v5.channel.k8s.io"}, "Upgrade": {"websocket"},
	}
	fp.Strip(h)
	require.Equal(t, http.Header{"X-Stream-Protocol-Version": {"v5.channel.k8s.io"}, "Upgrade": {"websocket"}}, h)
}

func TestParsePath(t *testing.T) {
	for _, tc := range []struct {
		path string
		want request
		ok   bool
	}{
		{prefix + "/namespaces/research/miniclusters/lammps/log", request{"research", "lammps", "log"}, true},
		{prefix + "/namespaces/research/miniclusters/lammps/exec", request{"research", "lammps", "exec"}, true},
		{prefix + "/namespaces/research/miniclusters/lammps/status", request{}, false},
		{prefix + "/namespaces/research/miniclusters/lammps", request{}, false},
		{prefix + "/namespaces//miniclusters/lammps/log", request{}, false},
		{prefix + "/namespaces/research/pods/lammps/log", request{}, false},
		{prefix + "/namespaces/research/miniclusters/lammps/log/extra", request{}, false},
		{"/apis/other.io/v1/namespaces/research/miniclusters/lammps/log", request{}, false},
	} {
		got, ok := parsePath(tc.path)
		require.Equal(t, tc.ok, ok, tc.path)
		require.Equal(t, tc.want, got, tc.path)
	}
}

func FuzzParsePath(f *testing.F) {
	f.Add(prefix + "/namespaces/research/miniclusters/lammps/log")
	f.Add(prefix + "/namespaces/a/miniclusters/b/exec")
	f.Fuzz(func(t *testing.T, path string) {
		req, ok := parsePath(path)
		if !ok {
			return
		}
		if req.namespace == "" || req.name == "" || (req.what != "log" && req.what != "exec") {
			t.Fatalf("%q parsed as %+v", path, req)
		}
		if strings.Contains(req.namespace, "/") || strings.Contains(req.name, "/") {
			t.Fatalf("%q parsed as %+v", path, req)
		}
	})
}
