package gateway

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// AuthenticationConfigMap is where an API server publishes how it identifies the users of the
// requests it forwards to an aggregated API (kube-system/extension-apiserver-authentication).
const (
	AuthenticationNamespace = "kube-system"
	AuthenticationConfigMap = "extension-apiserver-authentication"
)

// User is who made a request, as the hub's API server vouched for them.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// FrontProxy identifies the user of a request that the hub's API server forwarded: it trusts
// the user headers only on a connection whose client certificate the API server's front-proxy
// CA signed, for one of the names the API server publishes. Anything else is anonymous and
// refused: the gateway serves nobody the API server did not authenticate.
type FrontProxy struct {
	roots         *x509.CertPool
	allowedNames  []string
	userHeaders   []string
	uidHeaders    []string
	groupHeaders  []string
	extraPrefixes []string
}

// errNoFrontProxy says the API server forwards no identity: it was started without
// --requestheader-client-ca-file, so it cannot serve aggregated APIs.
var errNoFrontProxy = errors.New("the hub's API server publishes no front-proxy CA (kube-apiserver --requestheader-client-ca-file): it cannot forward requests to the gateway")

// ParseFrontProxy reads the front-proxy settings of the data of the configmap
// kube-system/extension-apiserver-authentication.
func ParseFrontProxy(data map[string]string) (*FrontProxy, error) {
	ca := data["requestheader-client-ca-file"]
	if ca == "" {
		return nil, errNoFrontProxy
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(ca)) {
		return nil, fmt.Errorf("%s/%s: requestheader-client-ca-file holds no PEM certificate", AuthenticationNamespace, AuthenticationConfigMap)
	}
	f := &FrontProxy{roots: roots}
	for _, field := range []struct {
		key string
		to  *[]string
	}{
		{"requestheader-allowed-names", &f.allowedNames},
		{"requestheader-username-headers", &f.userHeaders},
		{"requestheader-uid-headers", &f.uidHeaders},
		{"requestheader-group-headers", &f.groupHeaders},
		{"requestheader-extra-headers-prefix", &f.extraPrefixes},
	} {
		raw := data[field.key]
		if raw == "" {
			continue
		}
		if err := json.Unmarshal([]byte(raw), field.to); err != nil {
			return nil, fmt.Errorf("%s/%s: %s is not a JSON list of strings: %w", AuthenticationNamespace, AuthenticationConfigMap, field.key, err)
		}
	}
	if len(f.userHeaders) == 0 {
		return nil, fmt.Errorf("%s/%s names no requestheader-username-headers", AuthenticationNamespace, AuthenticationConfigMap)
	}
	return f, nil
}

// LoadFrontProxy reads the front-proxy settings from the hub's API server.
func LoadFrontProxy(ctx context.Context, cs kubernetes.Interface) (*FrontProxy, error) {
	cm, err := cs.CoreV1().ConfigMaps(AuthenticationNamespace).Get(ctx, AuthenticationConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, errNoFrontProxy
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s/%s: %w", AuthenticationNamespace, AuthenticationConfigMap, err)
	}
	return ParseFrontProxy(cm.Data)
}

// Authenticate returns the user of r, or an error when r did not come from the API server.
func (f *FrontProxy) Authenticate(r *http.Request) (*User, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil, errors.New("no client certificate: the gateway answers only the hub's API server")
	}
	leaf := r.TLS.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range r.TLS.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: f.roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, fmt.Errorf("client certificate not signed by the API server's front-proxy CA: %w", err)
	}
	if len(f.allowedNames) > 0 && !slices.Contains(f.allowedNames, leaf.Subject.CommonName) {
		return nil, fmt.Errorf("client certificate of %q, which is not one of the API server's front-proxy names", leaf.Subject.CommonName)
	}
	u := &User{Name: first(r.Header, f.userHeaders), UID: first(r.Header, f.uidHeaders)}
	if u.Name == "" {
		return nil, errors.New("the API server forwarded no user")
	}
	for _, h := range f.groupHeaders {
		u.Groups = append(u.Groups, r.Header.Values(h)...)
	}
	for name, values := range r.Header {
		for _, prefix := range f.extraPrefixes {
			if len(name) > len(prefix) && strings.EqualFold(name[:len(prefix)], prefix) {
				if u.Extra == nil {
					u.Extra = map[string][]string{}
				}
				key := unescapeExtraKey(strings.ToLower(name[len(prefix):]))
				u.Extra[key] = append(u.Extra[key], values...)
			}
		}
	}
	return u, nil
}

// Strip removes every header that carries an identity, so that nothing the caller sent reaches
// another server as if the hub vouched for it.
func (f *FrontProxy) Strip(h http.Header) {
	for _, name := range slices.Concat(f.userHeaders, f.uidHeaders, f.groupHeaders) {
		h.Del(name)
	}
	for name := range h {
		for _, prefix := range f.extraPrefixes {
			if len(name) >= len(prefix) && strings.EqualFold(name[:len(prefix)], prefix) {
				h.Del(name)
			}
		}
	}
	h.Del("Authorization")
	for name := range h {
		if strings.HasPrefix(strings.ToLower(name), "impersonate-") {
			h.Del(name)
		}
	}
}

func first(h http.Header, names []string) string {
	for _, name := range names {
		if v := h.Get(name); v != "" {
			return v
		}
	}
	return ""
}

// unescapeExtraKey undoes the percent-encoding the API server applies to extra keys in header
// names; a key that does not decode is kept as sent.
func unescapeExtraKey(s string) string {
	if k, err := url.PathUnescape(s); err == nil {
		return k
	}
	return s
}

// refreshEvery is how often the gateway reads the front-proxy settings again, so that a
// rotated front-proxy CA is trusted without a restart.
const refreshEvery = 5 * time.Minute

// liveFrontProxy is a FrontProxy read again from the API server every refreshEvery.
type liveFrontProxy struct {
	cs   kubernetes.Interface
	mu   sync.Mutex
	fp   *FrontProxy
	read time.Time
	now  func() time.Time
}

func (l *liveFrontProxy) get(ctx context.Context) (*FrontProxy, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fp != nil && l.now().Sub(l.read) < refreshEvery {
		return l.fp, nil
	}
	fp, err := LoadFrontProxy(ctx, l.cs)
	if err != nil {
		if l.fp != nil {
			return l.fp, nil // keep what worked until the API server answers again
		}
		return nil, err
	}
	l.fp, l.read = fp, l.now()
	return fp, nil
}
