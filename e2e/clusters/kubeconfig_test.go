package clusters

import (
	"crypto/x509"
	"encoding/pem"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fluxfed/fluxfed/hub/members"
)

// kubeconfig builds a one-context kubeconfig with entries named prefix+name, as kind writes them.
func kubeconfig(prefix, name, server string) *clientcmdapi.Config {
	kc := clientcmdapi.NewConfig()
	n := prefix + name
	kc.Clusters[n] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: []byte("ca-" + name)}
	kc.AuthInfos[n] = &clientcmdapi.AuthInfo{ClientCertificateData: []byte("cert-" + name), ClientKeyData: []byte("key-" + name)}
	kc.Contexts[n] = &clientcmdapi.Context{Cluster: n, AuthInfo: n}
	kc.CurrentContext = n
	return kc
}

func TestMerge(t *testing.T) {
	withExtra := kubeconfig("kind-", "b", "https://127.0.0.1:2")
	withExtra.Clusters["other"] = &clientcmdapi.Cluster{Server: "https://elsewhere"}
	withExtra.Contexts["other"] = &clientcmdapi.Context{Cluster: "other"}
	anonymous := kubeconfig("", "c", "https://127.0.0.1:3")
	anonymous.Contexts["c"].AuthInfo = ""
	noCurrent := kubeconfig("", "x", "https://127.0.0.1:9")
	noCurrent.CurrentContext = ""
	dangling := kubeconfig("", "y", "https://127.0.0.1:9")
	dangling.Contexts["y"].Cluster = "missing"
	danglingUser := kubeconfig("", "z", "https://127.0.0.1:9")
	danglingUser.Contexts["z"].AuthInfo = "missing"

	for _, tc := range []struct {
		name    string
		in      []namedKubeconfig
		want    *clientcmdapi.Config
		wantErr string
	}{{
		name: "one context per cluster named after it, the first current",
		in: []namedKubeconfig{
			{Name: "hub", Config: kubeconfig("", "hub", "https://127.0.0.1:1")},
			{Name: "member-b", Config: withExtra},
		},
		want: func() *clientcmdapi.Config {
			want := clientcmdapi.NewConfig()
			for _, kc := range []*clientcmdapi.Config{kubeconfig("", "hub", "https://127.0.0.1:1"), kubeconfig("", "member-b", "https://127.0.0.1:2")} {
				for k, v := range kc.Clusters {
					want.Clusters[k] = v
				}
				for k, v := range kc.AuthInfos {
					want.AuthInfos[k] = v
				}
				for k, v := range kc.Contexts {
					want.Contexts[k] = v
				}
			}
			// The renamed entries keep kind's credentials.
			want.Clusters["member-b"].CertificateAuthorityData = []byte("ca-b")
			want.AuthInfos["member-b"].ClientCertificateData = []byte("cert-b")
			want.AuthInfos["member-b"].ClientKeyData = []byte("key-b")
			want.CurrentContext = "hub"
			return want
		}(),
	}, {
		name: "anonymous context",
		in:   []namedKubeconfig{{Name: "c", Config: anonymous}},
		want: func() *clientcmdapi.Config {
			want := kubeconfig("", "c", "https://127.0.0.1:3")
			delete(want.AuthInfos, "c")
			want.Contexts["c"].AuthInfo = ""
			return want
		}(),
	}, {
		name:    "none",
		wantErr: "none given",
	}, {
		name: "duplicate",
		in: []namedKubeconfig{
			{Name: "a", Config: kubeconfig("", "a", "https://127.0.0.1:1")},
			{Name: "a", Config: kubeconfig("", "a", "https://127.0.0.1:2")},
		},
		wantErr: `cluster "a" appears twice`,
	}, {
		name:    "no current context",
		in:      []namedKubeconfig{{Name: "x", Config: noCurrent}},
		wantErr: "no current context",
	}, {
		name:    "context names a missing cluster",
		in:      []namedKubeconfig{{Name: "y", Config: dangling}},
		wantErr: `names cluster "missing"`,
	}, {
		name:    "context names a missing user",
		in:      []namedKubeconfig{{Name: "z", Config: danglingUser}},
		wantErr: `names user "missing"`,
	}, {
		name:    "nil kubeconfig",
		in:      []namedKubeconfig{{Name: "n"}},
		wantErr: "no current context",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := merge(tc.in)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Empty(t, cmp.Diff(tc.want, got))
		})
	}
}

// TestAdminKubeconfigPassesTheHubCheck writes a local cluster's kubeconfig and gives it to the
// hub's check of member kubeconfigs: inline CA and client certificate, no files, no plugins.
func TestAdminKubeconfigPassesTheHubCheck(t *testing.T) {
	keys, err := newPKI("member-a", planFor(1).serviceIP(), nil)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, writeKubeconfig(path, adminKubeconfig("member-a", "https://127.0.0.1:6443", keys)))
	kc, err := clientcmd.LoadFromFile(path)
	require.NoError(t, err)
	data, err := clientcmd.Write(*kc)
	require.NoError(t, err)
	cfg, err := members.Check(data)
	require.NoError(t, err)
	require.Equal(t, "https://127.0.0.1:6443", cfg.Host)
	require.Equal(t, "member-a", kc.CurrentContext)
}

func TestPKI(t *testing.T) {
	keys, err := newPKI("hub", planFor(0).serviceIP(), nil)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(keys.CACert))
	parse := func(data []byte) *x509.Certificate {
		block, _ := pem.Decode(data)
		require.NotNil(t, block)
		cert, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		return cert
	}

	serving := parse(keys.ServingCert)
	for _, name := range []string{"127.0.0.1", "localhost", "kubernetes.default.svc", "127.101.240.1"} {
		_, err := serving.Verify(x509.VerifyOptions{DNSName: name, Roots: pool})
		require.NoError(t, err, name)
	}

	admin := parse(keys.AdminCert)
	_, err = admin.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)
	require.Equal(t, []string{"system:masters"}, admin.Subject.Organization)

	// Another cluster's CA does not vouch for this one's certificates.
	other, err := newPKI("member-a", planFor(1).serviceIP(), nil)
	require.NoError(t, err)
	otherPool := x509.NewCertPool()
	require.True(t, otherPool.AppendCertsFromPEM(other.CACert))
	_, err = serving.Verify(x509.VerifyOptions{DNSName: "127.0.0.1", Roots: otherPool})
	require.Error(t, err)
}
