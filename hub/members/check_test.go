package members

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Credentials planted in the fixtures; no error message may ever contain one.
const (
	secretToken    = "s3cr3t-token"
	secretPassword = "s3cr3t-password"
	secretKey      = "s3cr3t-key"
	secretCert     = "s3cr3t-cert"
)

var secrets = []string{secretToken, secretPassword, secretKey, secretCert}

// hubFiles are files on "the hub" that a refused kubeconfig points at. They exist, so that
// clientcmd (and so the provider's backstop path) gets as far as it can with them.
type hubFiles struct{ token, ca, cert, key string }

func newHubFiles(t testing.TB) hubFiles {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	return hubFiles{
		token: write("token", "hub-service-account-token"),
		ca:    write("ca.crt", "hub-ca"),
		cert:  write("tls.crt", "hub-cert"),
		key:   write("tls.key", "hub-key"),
	}
}

// memberKubeconfig returns a valid member kubeconfig (inline token and CA) changed by edits.
func memberKubeconfig(t testing.TB, edits ...func(*clientcmdapi.Config)) []byte {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["gke-west"] = &clientcmdapi.Cluster{Server: "https://member.example:6443", CertificateAuthorityData: []byte("member-ca")}
	kc.AuthInfos["fluxfed-hub"] = &clientcmdapi.AuthInfo{Token: secretToken}
	kc.Contexts["member"] = &clientcmdapi.Context{Cluster: "gke-west", AuthInfo: "fluxfed-hub"}
	kc.CurrentContext = "member"
	for _, edit := range edits {
		edit(kc)
	}
	data, err := clientcmd.Write(*kc)
	require.NoError(t, err)
	return data
}

func editCluster(edit func(*clientcmdapi.Cluster)) func(*clientcmdapi.Config) {
	return func(kc *clientcmdapi.Config) { edit(kc.Clusters["gke-west"]) }
}

func editUser(edit func(*clientcmdapi.AuthInfo)) func(*clientcmdapi.Config) {
	return func(kc *clientcmdapi.Config) { edit(kc.AuthInfos["fluxfed-hub"]) }
}

func clientCertData(u *clientcmdapi.AuthInfo) {
	u.Token = ""
	u.ClientCertificateData = []byte(secretCert)
	u.ClientKeyData = []byte(secretKey)
}

type refusalCase struct {
	name    string
	data    func(testing.TB, hubFiles) []byte
	subject string
	field   string
	reason  string // a part of the reason
	// anonymous marks a kubeconfig that Check refuses but clientcmd turns into an anonymous
	// rest.Config, which the backstop lets through: harmless to the hub, and the hub's member
	// reconciler still reports the refusal and pushes nothing there.
	anonymous bool
}

func refusalCases() []refusalCase {
	kcWith := func(edits ...func(*clientcmdapi.Config)) func(testing.TB, hubFiles) []byte {
		return func(t testing.TB, _ hubFiles) []byte { return memberKubeconfig(t, edits...) }
	}
	withFiles := func(edit func(hubFiles) func(*clientcmdapi.Config)) func(testing.TB, hubFiles) []byte {
		return func(t testing.TB, f hubFiles) []byte { return memberKubeconfig(t, edit(f)) }
	}
	return []refusalCase{
		{
			name:    "empty",
			data:    func(testing.TB, hubFiles) []byte { return nil },
			subject: "the kubeconfig", field: "current-context", reason: "has no current context",
		},
		{
			name:    "not a kubeconfig",
			data:    func(testing.TB, hubFiles) []byte { return []byte("token: " + secretToken + "\n  bad: [") },
			subject: "the kubeconfig", reason: "cannot be parsed",
		},
		{
			name:    "no current context",
			data:    kcWith(func(kc *clientcmdapi.Config) { kc.CurrentContext = "" }),
			subject: "the kubeconfig", field: "current-context", reason: "has no current context",
		},
		{
			name:    "current context not defined",
			data:    kcWith(func(kc *clientcmdapi.Config) { kc.CurrentContext = "elsewhere" }),
			subject: `context "elsewhere"`, field: "contexts[]", reason: "is not defined",
		},
		{
			name:    "cluster not defined",
			data:    kcWith(func(kc *clientcmdapi.Config) { kc.Contexts["member"].Cluster = "gone" }),
			subject: `context "member"`, field: "contexts[].context.cluster", reason: `names cluster "gone", which is not defined`,
		},
		{
			name:    "user not defined",
			data:    kcWith(func(kc *clientcmdapi.Config) { kc.Contexts["member"].AuthInfo = "gone" }),
			subject: `context "member"`, field: "contexts[].context.user", reason: `names user "gone", which is not defined`,
			anonymous: true,
		},
		{
			name:    "no server",
			data:    kcWith(editCluster(func(c *clientcmdapi.Cluster) { c.Server = "" })),
			subject: `cluster "gke-west"`, field: "clusters[].cluster.server", reason: "has no server",
		},
		{
			name:    "plain http",
			data:    kcWith(editCluster(func(c *clientcmdapi.Cluster) { c.Server = "http://member.example:8080" })),
			subject: `cluster "gke-west"`, field: "clusters[].cluster.server", reason: `scheme "http"`,
		},
		{
			name:    "plain http on loopback",
			data:    kcWith(editCluster(func(c *clientcmdapi.Cluster) { c.Server = "http://127.0.0.1:8080" })),
			subject: `cluster "gke-west"`, field: "clusters[].cluster.server", reason: `scheme "http"`,
		},
		{
			name:    "server without a scheme",
			data:    kcWith(editCluster(func(c *clientcmdapi.Cluster) { c.Server = "member.example:6443" })),
			subject: `cluster "gke-west"`, field: "clusters[].cluster.server", reason: "scheme",
		},
		{
			name:    "server without a host",
			data:    kcWith(editCluster(func(c *clientcmdapi.Cluster) { c.Server = "https:///api" })),
			subject: `cluster "gke-west"`, field: "clusters[].cluster.server", reason: "without a host",
		},
		{
			name:    "password in the server URL",
			data:    kcWith(editCluster(func(c *clientcmdapi.Cluster) { c.Server = "https://admin:" + secretPassword + "@member.example:6443" })),
			subject: `cluster "gke-west"`, field: "clusters[].cluster.server", reason: "user name or password",
		},
		{
			name: "insecure TLS",
			data: kcWith(editCluster(func(c *clientcmdapi.Cluster) {
				c.CertificateAuthorityData = nil
				c.InsecureSkipTLSVerify = true
			})),
			subject: `cluster "gke-west"`, field: "clusters[].cluster.insecure-skip-tls-verify", reason: "skips TLS verification",
		},
		{
			name: "CA file",
			data: withFiles(func(f hubFiles) func(*clientcmdapi.Config) {
				return editCluster(func(c *clientcmdapi.Cluster) {
					c.CertificateAuthorityData = nil
					c.CertificateAuthority = f.ca
				})
			}),
			subject: `cluster "gke-west"`, field: "clusters[].cluster.certificate-authority", reason: "CA certificate from a file",
		},
		{
			name:    "proxy",
			data:    kcWith(editCluster(func(c *clientcmdapi.Cluster) { c.ProxyURL = "socks5://proxy.example:1080" })),
			subject: `cluster "gke-west"`, field: "clusters[].cluster.proxy-url", reason: "through a proxy",
		},
		{
			name: "exec plugin",
			data: kcWith(editUser(func(u *clientcmdapi.AuthInfo) {
				u.Token = ""
				u.Exec = &clientcmdapi.ExecConfig{
					APIVersion:      "client.authentication.k8s.io/v1",
					Command:         "gke-gcloud-auth-plugin",
					InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
				}
			})),
			subject: `user "fluxfed-hub"`, field: "users[].user.exec", reason: "exec plugin",
		},
		{
			name: "auth-provider plugin",
			data: kcWith(editUser(func(u *clientcmdapi.AuthInfo) {
				u.Token = ""
				u.AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc", Config: map[string]string{"id-token": secretToken}}
			})),
			subject: `user "fluxfed-hub"`, field: "users[].user.auth-provider", reason: "auth-provider plugin",
		},
		{
			name: "token file",
			data: withFiles(func(f hubFiles) func(*clientcmdapi.Config) {
				return editUser(func(u *clientcmdapi.AuthInfo) {
					u.Token = ""
					u.TokenFile = f.token
				})
			}),
			subject: `user "fluxfed-hub"`, field: "users[].user.tokenFile", reason: "token from a file",
		},
		{
			// clientcmd prefers the inline token but client-go re-reads the file later.
			name: "token file beside an inline token",
			data: withFiles(func(f hubFiles) func(*clientcmdapi.Config) {
				return editUser(func(u *clientcmdapi.AuthInfo) { u.TokenFile = f.token })
			}),
			subject: `user "fluxfed-hub"`, field: "users[].user.tokenFile", reason: "token from a file",
		},
		{
			name: "client certificate file",
			data: withFiles(func(f hubFiles) func(*clientcmdapi.Config) {
				return editUser(func(u *clientcmdapi.AuthInfo) {
					clientCertData(u)
					u.ClientCertificateData = nil
					u.ClientCertificate = f.cert
				})
			}),
			subject: `user "fluxfed-hub"`, field: "users[].user.client-certificate", reason: "client certificate from a file",
		},
		{
			name: "client key file",
			data: withFiles(func(f hubFiles) func(*clientcmdapi.Config) {
				return editUser(func(u *clientcmdapi.AuthInfo) {
					clientCertData(u)
					u.ClientKeyData = nil
					u.ClientKey = f.key
				})
			}),
			subject: `user "fluxfed-hub"`, field: "users[].user.client-key", reason: "client key from a file",
		},
		{
			name: "client key file without a certificate",
			data: withFiles(func(f hubFiles) func(*clientcmdapi.Config) {
				return editUser(func(u *clientcmdapi.AuthInfo) {
					u.Token = ""
					u.ClientKey = f.key
				})
			}),
			subject: `user "fluxfed-hub"`, field: "users[].user.client-key", reason: "client key from a file",
			anonymous: true,
		},
		{
			name: "basic auth",
			data: kcWith(editUser(func(u *clientcmdapi.AuthInfo) {
				u.Token = ""
				u.Username, u.Password = "admin", secretPassword
			})),
			subject: `user "fluxfed-hub"`, field: "users[].user.username", reason: "basic authentication",
		},
		{
			name: "password alone",
			data: kcWith(editUser(func(u *clientcmdapi.AuthInfo) {
				u.Token = ""
				u.Password = secretPassword
			})),
			subject: `user "fluxfed-hub"`, field: "users[].user.password", reason: "basic authentication",
		},
		{
			name: "client certificate without its key",
			data: kcWith(editUser(func(u *clientcmdapi.AuthInfo) {
				clientCertData(u)
				u.ClientKeyData = nil
			})),
			subject: "the kubeconfig", reason: "is not usable",
		},
	}
}

func TestCheckRefuses(t *testing.T) {
	for _, tc := range refusalCases() {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Check(tc.data(t, newHubFiles(t)))
			require.Nil(t, cfg)
			var refused *RefusedError
			require.ErrorAs(t, err, &refused)
			require.Equal(t, tc.subject, refused.Subject)
			require.Equal(t, tc.field, refused.Field)
			require.Contains(t, refused.Reason, tc.reason)
			require.NotEmpty(t, refused.Hint)
			msg := err.Error()
			require.True(t, strings.HasPrefix(msg, "kubeconfig refused: "+tc.subject+" "), msg)
			for _, s := range secrets {
				require.NotContains(t, msg, s, "the message carries a credential")
			}
		})
	}
}

func TestRefusedErrorMessage(t *testing.T) {
	_, err := Check(memberKubeconfig(t, editUser(func(u *clientcmdapi.AuthInfo) {
		u.Token = ""
		u.Exec = &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: "aws", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
	})))
	require.EqualError(t, err, `kubeconfig refused: user "fluxfed-hub" uses an exec plugin (users[].user.exec); `+
		`give the hub a token or a client certificate inline (token, or client-certificate-data and client-key-data)`)

	_, err = Check([]byte("users: 42"))
	var refused *RefusedError
	require.ErrorAs(t, err, &refused)
	require.Error(t, errors.Unwrap(err), "a parse error keeps its cause")
	require.Contains(t, err.Error(), "kubeconfig refused: the kubeconfig cannot be parsed: ")
}

// TestCheckRESTConfigRefusesWhatCheckRefuses is the backstop's contract: whatever Check refuses,
// the provider refuses too, either because clientcmd.RESTConfigFromKubeConfig fails (as it does in
// the provider) or because CheckRESTConfig refuses what clientcmd built, for the same field.
func TestCheckRESTConfigRefusesWhatCheckRefuses(t *testing.T) {
	for _, tc := range refusalCases() {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := clientcmd.RESTConfigFromKubeConfig(tc.data(t, newHubFiles(t)))
			if err != nil {
				t.Logf("clientcmd refuses it itself: %v", err)
				return
			}
			err = CheckRESTConfig(cfg)
			if tc.anonymous {
				require.NoError(t, err)
				require.Empty(t, cfg.BearerToken)
				require.Empty(t, cfg.CertData)
				require.Empty(t, cfg.KeyFile)
				return
			}
			var refused *RefusedError
			require.ErrorAs(t, err, &refused)
			require.Equal(t, tc.field, refused.Field)
			require.Contains(t, refused.Reason, tc.reason)
			for _, s := range secrets {
				require.NotContains(t, err.Error(), s, "the message carries a credential")
			}
		})
	}
}

func TestCheckRESTConfigAfterLimits(t *testing.T) {
	require.Error(t, CheckRESTConfig(nil))
	cfg, err := Check(memberKubeconfig(t))
	require.NoError(t, err)
	require.NoError(t, Limits(10, 20, time.Second)(cfg))
	require.NoError(t, CheckRESTConfig(cfg), "the order of RESTOptions does not matter")
}

func TestCheckAccepts(t *testing.T) {
	cases := []struct {
		name  string
		data  []byte
		check func(*testing.T, *rest.Config)
	}{
		{
			name: "inline token and CA",
			data: memberKubeconfig(t),
			check: func(t *testing.T, cfg *rest.Config) {
				require.Equal(t, "https://member.example:6443", cfg.Host)
				require.Equal(t, secretToken, cfg.BearerToken)
				require.Equal(t, []byte("member-ca"), cfg.CAData)
			},
		},
		{
			name: "inline client certificate",
			data: memberKubeconfig(t, editUser(clientCertData)),
			check: func(t *testing.T, cfg *rest.Config) {
				require.Empty(t, cfg.BearerToken)
				require.Equal(t, []byte(secretCert), cfg.CertData)
				require.Equal(t, []byte(secretKey), cfg.KeyData)
			},
		},
		{
			name: "inline client certificate and token",
			data: memberKubeconfig(t, editUser(func(u *clientcmdapi.AuthInfo) {
				clientCertData(u)
				u.Token = secretToken
			})),
			check: func(t *testing.T, cfg *rest.Config) {
				require.Equal(t, secretToken, cfg.BearerToken)
				require.Equal(t, []byte(secretCert), cfg.CertData)
			},
		},
		{
			name: "system CA pool and a TLS server name",
			data: memberKubeconfig(t, editCluster(func(c *clientcmdapi.Cluster) {
				c.CertificateAuthorityData = nil
				c.TLSServerName = "kubernetes.default"
			})),
			check: func(t *testing.T, cfg *rest.Config) {
				require.Empty(t, cfg.CAData)
				require.Equal(t, "kubernetes.default", cfg.ServerName)
			},
		},
		{
			name: "server behind a path",
			data: memberKubeconfig(t, editCluster(func(c *clientcmdapi.Cluster) { c.Server = "https://rancher.example/k8s/clusters/c-m-abc" })),
			check: func(t *testing.T, cfg *rest.Config) {
				require.Equal(t, "https://rancher.example/k8s/clusters/c-m-abc", cfg.Host)
			},
		},
		{
			name: "impersonation",
			data: memberKubeconfig(t, editUser(func(u *clientcmdapi.AuthInfo) {
				u.Impersonate = "system:serviceaccount:fluxfed-system:fluxfed-hub"
				u.ImpersonateGroups = []string{"fluxfed:hubs"}
			})),
			check: func(t *testing.T, cfg *rest.Config) {
				require.Equal(t, "system:serviceaccount:fluxfed-system:fluxfed-hub", cfg.Impersonate.UserName)
				require.Equal(t, []string{"fluxfed:hubs"}, cfg.Impersonate.Groups)
			},
		},
		{
			name: "anonymous",
			data: memberKubeconfig(t, func(kc *clientcmdapi.Config) { kc.Contexts["member"].AuthInfo = "" }),
			check: func(t *testing.T, cfg *rest.Config) {
				require.Empty(t, cfg.BearerToken)
				require.Empty(t, cfg.CertData)
			},
		},
		{
			// clientcmd never reads the other entries, so neither does the check.
			name: "refused entries outside the current context",
			data: memberKubeconfig(t, func(kc *clientcmdapi.Config) {
				kc.Clusters["laptop"] = &clientcmdapi.Cluster{Server: "http://127.0.0.1:8080", InsecureSkipTLSVerify: true, CertificateAuthority: "/etc/ca.crt"}
				kc.AuthInfos["me"] = &clientcmdapi.AuthInfo{
					TokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token",
					Exec:      &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: "aws", InteractiveMode: clientcmdapi.NeverExecInteractiveMode},
				}
				kc.Contexts["laptop"] = &clientcmdapi.Context{Cluster: "laptop", AuthInfo: "me"}
			}),
			check: func(t *testing.T, cfg *rest.Config) {
				require.Equal(t, "https://member.example:6443", cfg.Host)
				require.Nil(t, cfg.ExecProvider)
			},
		},
		{
			name: "JSON",
			data: []byte(`{"apiVersion":"v1","kind":"Config","current-context":"c",` +
				`"contexts":[{"name":"c","context":{"cluster":"k","user":"u"}}],` +
				`"clusters":[{"name":"k","cluster":{"server":"https://10.0.0.1:6443"}}],` +
				`"users":[{"name":"u","user":{"token":"` + secretToken + `"}}]}`),
			check: func(t *testing.T, cfg *rest.Config) {
				require.Equal(t, "https://10.0.0.1:6443", cfg.Host)
				require.Equal(t, secretToken, cfg.BearerToken)
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Check(tc.data)
			require.NoError(t, err)
			tc.check(t, cfg)

			// The provider builds the same rest.Config from the same bytes, and its backstop lets
			// it through.
			fromProvider, err := clientcmd.RESTConfigFromKubeConfig(tc.data)
			require.NoError(t, err)
			require.NoError(t, CheckRESTConfig(fromProvider))
			require.Empty(t, cmp.Diff(fromProvider, cfg))
		})
	}
}

func FuzzCheck(f *testing.F) {
	files := newHubFiles(f)
	for _, tc := range refusalCases() {
		f.Add(tc.data(f, files))
	}
	f.Add(memberKubeconfig(f))
	f.Add(memberKubeconfig(f, editUser(clientCertData)))
	f.Add([]byte("{}"))
	f.Add([]byte("null"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Check(data)
		if err != nil {
			require.Nil(t, cfg)
			var refused *RefusedError
			require.ErrorAs(t, err, &refused)
			require.NotEmpty(t, err.Error())
			return
		}
		require.NotNil(t, cfg)
		require.NoError(t, CheckRESTConfig(cfg))
		u, err := url.Parse(cfg.Host)
		require.NoError(t, err)
		require.Equal(t, "https", u.Scheme, "Go reads a scheme in any case")
		require.NotEmpty(t, u.Host)
		require.Nil(t, u.User)
	})
}

func TestRefusalsFitInAConditionMessage(t *testing.T) {
	long := strings.Repeat("n", 1<<20)
	for _, data := range [][]byte{
		memberKubeconfig(t, func(kc *clientcmdapi.Config) { kc.CurrentContext = long }),
		memberKubeconfig(t, func(kc *clientcmdapi.Config) { kc.Contexts["member"].Cluster = long }),
		memberKubeconfig(t, func(kc *clientcmdapi.Config) {
			kc.AuthInfos[long] = &clientcmdapi.AuthInfo{Password: secretPassword}
			kc.Contexts["member"].AuthInfo = long
		}),
		memberKubeconfig(t, editCluster(func(c *clientcmdapi.Cluster) { c.Server = long + "://member.example" })),
		[]byte("current-context: [" + long),
	} {
		_, err := Check(data)
		var refused *RefusedError
		require.ErrorAs(t, err, &refused)
		require.Less(t, len(err.Error()), 1024, "an event note holds at most 1 kB: %.200s", err)
		require.True(t, utf8.ValidString(err.Error()))
	}
}

// TestRefusalsCutALongCause: a refusal quotes at most 512 bytes of its cause, cut on a rune
// boundary and marked with "...".
func TestRefusalsCutALongCause(t *testing.T) {
	for _, tt := range []struct{ name, cause, want string }{
		{name: "short", cause: "yaml: line 3: did not find expected key", want: "yaml: line 3: did not find expected key"},
		{name: "ascii", cause: strings.Repeat("x", 600), want: strings.Repeat("x", 512) + "..."},
		{name: "a three-byte rune across the cut", cause: strings.Repeat("€", 200), want: strings.Repeat("€", 170) + "..."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := &RefusedError{Subject: "the kubeconfig", Reason: "is not valid YAML", Err: errors.New(tt.cause)}
			require.Equal(t, "kubeconfig refused: the kubeconfig is not valid YAML: "+tt.want, err.Error())
		})
	}
}
