package members

import (
	"net/url"
	"strconv"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fluxfed/fluxfed/internal/text"
)

// Where a refused setting lives in a kubeconfig, in kubeconfig (YAML) spelling.
const (
	fieldCurrentContext       = "current-context"
	fieldContexts             = "contexts[]"
	fieldContextCluster       = "contexts[].context.cluster"
	fieldContextUser          = "contexts[].context.user"
	fieldServer               = "clusters[].cluster.server"
	fieldInsecure             = "clusters[].cluster.insecure-skip-tls-verify"
	fieldCertificateAuthority = "clusters[].cluster.certificate-authority"
	fieldProxyURL             = "clusters[].cluster.proxy-url"
	fieldExec                 = "users[].user.exec"
	fieldAuthProvider         = "users[].user.auth-provider"
	fieldTokenFile            = "users[].user.tokenFile"
	fieldClientCertificate    = "users[].user.client-certificate"
	fieldClientKey            = "users[].user.client-key"
	fieldUsername             = "users[].user.username"
	fieldPassword             = "users[].user.password"
)

// Who is refused when the names are not known (CheckRESTConfig) or do not apply.
const (
	subjectKubeconfig = "the kubeconfig"
	subjectCluster    = "the cluster"
	subjectUser       = "the user"
)

// What is refused, shared by Check and CheckRESTConfig so that both say the same.
const (
	reasonExec                 = "uses an exec plugin"
	reasonAuthProvider         = "uses an auth-provider plugin"
	reasonTokenFile            = "reads its token from a file on the hub"
	reasonClientCertificate    = "reads its client certificate from a file on the hub"
	reasonClientKey            = "reads its client key from a file on the hub"
	reasonBasicAuth            = "uses basic authentication (username and password)"
	reasonInsecure             = "skips TLS verification"
	reasonCertificateAuthority = "reads its CA certificate from a file on the hub"
	reasonProxy                = "sends the hub's connections through a proxy"
)

// What to do instead.
const (
	hintInline      = "inline the file's content (kubectl config view --raw --flatten --minify)"
	hintCredentials = "give the hub a token or a client certificate inline (token, or client-certificate-data and client-key-data)"
	hintTLS         = "give the hub the member's CA inline (certificate-authority-data) instead"
	hintContext     = "set current-context to the context the hub should use"
	hintServer      = "use the member API server's https:// URL"
	hintHubEgress   = "remove it; a proxy for the hub is set by the hub's operator (HTTPS_PROXY on the hub)"
	hintFix         = "fix the kubeconfig"
)

// RefusedError says which part of a member kubeconfig the hub refuses to use, and why. It names
// contexts, clusters and users but never carries a credential, a file's content or a server URL's
// user information, so it is safe in events, conditions and logs.
type RefusedError struct {
	// Subject is the refused part, such as `user "alice"` or `cluster "gke-west"`.
	Subject string
	// Field is where in the kubeconfig the refused setting lives, such as users[].user.exec; empty
	// when the kubeconfig as a whole is unusable.
	Field string
	// Reason says what the subject does that the hub refuses.
	Reason string
	// Hint says what to do instead.
	Hint string
	// Err is the underlying error, when the refusal comes from parsing or validating.
	Err error
}

// Error returns a message such as `kubeconfig refused: user "x" uses an exec plugin
// (users[].user.exec); give the hub a token or client certificate inline`.
func (e *RefusedError) Error() string {
	msg := "kubeconfig refused: " + e.Subject + " " + e.Reason
	if e.Err != nil {
		msg += ": " + text.Truncate(e.Err.Error(), maxCause)
	}
	if e.Field != "" {
		msg += " (" + e.Field + ")"
	}
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

// Unwrap returns the underlying parse or validation error, if any.
func (e *RefusedError) Unwrap() error { return e.Err }

// Check parses a member kubeconfig (the kubeconfig key of the member's Secret) and returns the
// rest.Config that reaches the member, or a *RefusedError that says which part is refused and why,
// naming the context, cluster or user. It reads no file, runs no program and opens no connection.
// See the package documentation for what is refused.
func Check(data []byte) (*rest.Config, error) {
	kc, err := clientcmd.Load(data)
	if err != nil {
		return nil, &RefusedError{Subject: subjectKubeconfig, Reason: "cannot be parsed", Err: err, Hint: hintFix}
	}
	if err := checkCurrent(kc); err != nil {
		return nil, err
	}
	// Only the current context's entries reach clientcmd's validation, which opens the files it
	// names; checkCurrent has refused every file path in them.
	minified := kc.DeepCopy()
	if err := clientcmdapi.MinifyConfig(minified); err != nil {
		return nil, &RefusedError{Subject: subjectKubeconfig, Reason: "is not usable", Err: err, Hint: hintFix}
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*minified, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, &RefusedError{Subject: subjectKubeconfig, Reason: "is not usable", Err: err, Hint: hintFix}
	}
	// The same rules once more on what clientcmd built: it fills in what the kubeconfig left out.
	if err := CheckRESTConfig(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// checkCurrent applies the rules to the current context, its cluster and its user.
func checkCurrent(kc *clientcmdapi.Config) error {
	if kc.CurrentContext == "" {
		return &RefusedError{Subject: subjectKubeconfig, Field: fieldCurrentContext, Reason: "has no current context", Hint: hintContext}
	}
	contextSubject := "context " + quoteName(kc.CurrentContext)
	kctx, ok := kc.Contexts[kc.CurrentContext]
	if !ok || kctx == nil {
		return &RefusedError{Subject: contextSubject, Field: fieldContexts, Reason: "is the current context but is not defined", Hint: hintContext}
	}
	clusterEntry, ok := kc.Clusters[kctx.Cluster]
	if kctx.Cluster == "" || !ok || clusterEntry == nil {
		return &RefusedError{Subject: contextSubject, Field: fieldContextCluster, Reason: "names cluster " + quoteName(kctx.Cluster) + ", which is not defined", Hint: hintFix}
	}
	cluster := clusterSettings{
		server: clusterEntry.Server, insecure: clusterEntry.InsecureSkipTLSVerify,
		caFile: clusterEntry.CertificateAuthority, proxy: clusterEntry.ProxyURL != "",
	}
	if err := checkCluster("cluster "+quoteName(kctx.Cluster), cluster); err != nil {
		return err
	}
	if kctx.AuthInfo == "" {
		return nil // anonymous
	}
	user, ok := kc.AuthInfos[kctx.AuthInfo]
	if !ok || user == nil {
		return &RefusedError{Subject: contextSubject, Field: fieldContextUser, Reason: "names user " + quoteName(kctx.AuthInfo) + ", which is not defined", Hint: hintFix}
	}
	return checkUser("user "+quoteName(kctx.AuthInfo), userSettings{
		exec: user.Exec != nil, authProvider: user.AuthProvider != nil,
		tokenFile: user.TokenFile, certFile: user.ClientCertificate, keyFile: user.ClientKey,
		username: user.Username, password: user.Password,
	})
}

// maxName and maxCause bound what a message quotes from the kubeconfig, so that a refusal fits in
// an event and a condition message whatever the kubeconfig holds. maxCause counts the "..." that
// ends a cut cause: 512 bytes of the cause and the mark.
const (
	maxName  = 64
	maxCause = 512 + len("...")
)

// quoteName quotes a context, cluster or user name for a message, shortened to maxName bytes.
func quoteName(name string) string {
	if len(name) > maxName {
		return strconv.Quote(name[:maxName]) + "..."
	}
	return strconv.Quote(name)
}

// clusterSettings are the parts of a cluster the rules look at, read from a kubeconfig entry or
// from a rest.Config, so that Check and CheckRESTConfig apply one set of rules.
type clusterSettings struct {
	server   string
	insecure bool
	caFile   string
	proxy    bool
}

// userSettings are the parts of a user the rules look at; see clusterSettings.
type userSettings struct {
	exec, authProvider           bool
	tokenFile, certFile, keyFile string
	username, password           string
}

func checkCluster(subject string, c clusterSettings) error {
	if err := checkServer(subject, c.server); err != nil {
		return err
	}
	switch {
	case c.insecure:
		return &RefusedError{Subject: subject, Field: fieldInsecure, Reason: reasonInsecure, Hint: hintTLS}
	case c.caFile != "":
		return &RefusedError{Subject: subject, Field: fieldCertificateAuthority, Reason: reasonCertificateAuthority, Hint: hintInline}
	case c.proxy:
		return &RefusedError{Subject: subject, Field: fieldProxyURL, Reason: reasonProxy, Hint: hintHubEgress}
	}
	return nil
}

func checkUser(subject string, u userSettings) error {
	switch {
	case u.exec:
		return &RefusedError{Subject: subject, Field: fieldExec, Reason: reasonExec, Hint: hintCredentials}
	case u.authProvider:
		return &RefusedError{Subject: subject, Field: fieldAuthProvider, Reason: reasonAuthProvider, Hint: hintCredentials}
	case u.tokenFile != "":
		return &RefusedError{Subject: subject, Field: fieldTokenFile, Reason: reasonTokenFile, Hint: hintInline}
	case u.certFile != "":
		return &RefusedError{Subject: subject, Field: fieldClientCertificate, Reason: reasonClientCertificate, Hint: hintInline}
	case u.keyFile != "":
		return &RefusedError{Subject: subject, Field: fieldClientKey, Reason: reasonClientKey, Hint: hintInline}
	case u.username != "":
		return &RefusedError{Subject: subject, Field: fieldUsername, Reason: reasonBasicAuth, Hint: hintCredentials}
	case u.password != "":
		return &RefusedError{Subject: subject, Field: fieldPassword, Reason: reasonBasicAuth, Hint: hintCredentials}
	}
	return nil
}

// checkServer accepts only an absolute https URL with a host and no user information. The URL is
// never quoted back: only its scheme is, because user information may hold a password.
func checkServer(subject, server string) error {
	if server == "" {
		return &RefusedError{Subject: subject, Field: fieldServer, Reason: "has no server", Hint: hintServer}
	}
	u, err := url.Parse(server)
	if err != nil {
		return &RefusedError{Subject: subject, Field: fieldServer, Reason: "has a server that is not a URL", Hint: hintServer}
	}
	if u.User != nil {
		return &RefusedError{Subject: subject, Field: fieldServer, Reason: "has a server URL with a user name or password in it", Hint: hintCredentials}
	}
	if u.Scheme != "https" {
		return &RefusedError{Subject: subject, Field: fieldServer, Reason: "has a server URL with scheme " + quoteName(u.Scheme), Hint: hintServer}
	}
	if u.Host == "" {
		return &RefusedError{Subject: subject, Field: fieldServer, Reason: "has a server URL without a host", Hint: hintServer}
	}
	return nil
}

// CheckRESTConfig applies the same rules as Check to a rest.Config that clientcmd has already built
// from a member kubeconfig: Check's second pass, so that Check never accepts what clientcmd turned
// into something the rules refuse. The rest.Config no longer carries names, so its errors speak of
// "the cluster" and "the user".
func CheckRESTConfig(cfg *rest.Config) error {
	if cfg == nil {
		return &RefusedError{Subject: subjectKubeconfig, Reason: "gives no client configuration", Hint: hintFix}
	}
	cluster := clusterSettings{server: cfg.Host, insecure: cfg.Insecure, caFile: cfg.CAFile, proxy: cfg.Proxy != nil}
	if err := checkCluster(subjectCluster, cluster); err != nil {
		return err
	}
	return checkUser(subjectUser, userSettings{
		exec: cfg.ExecProvider != nil, authProvider: cfg.AuthProvider != nil,
		tokenFile: cfg.BearerTokenFile, certFile: cfg.CertFile, keyFile: cfg.KeyFile,
		username: cfg.Username, password: cfg.Password,
	})
}
