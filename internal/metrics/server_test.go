package metrics_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fluxfed/fluxfed/internal/metrics"
	"github.com/fluxfed/fluxfed/internal/testenv"
)

// serve runs the metrics server of opts as the manager does, with cfg, and returns its address.
func serve(t *testing.T, opts metricsserver.Options, cfg *rest.Config) string {
	t.Helper()
	httpClient, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	opts.BindAddress = "127.0.0.1:0"
	srv, err := metricsserver.NewServer(opts, cfg, httpClient)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	bound, ok := srv.(interface{ GetBindAddr() string })
	require.True(t, ok)
	var addr string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		addr = bound.GetBindAddr()
		require.NotEmpty(c, addr)
	}, 10*time.Second, 10*time.Millisecond)
	return addr
}

// scrape gets url with token (none when empty) and returns the status code and body.
func scrape(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, http.NoBody)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// The server's certificate is self-signed, as in a cluster without one mounted.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// TestTheMetricsEndpointServesOnlyAuthorizedScrapers runs the metrics server as the deployed
// manager does (its ServiceAccount, with deploy/default's permissions): a scrape without a
// token, or with the token of a ServiceAccount not bound to fluxfed-metrics-reader, is refused;
// one with a bound ServiceAccount's token gets fluxfed's series.
func TestTheMetricsEndpointServesOnlyAuthorizedScrapers(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fluxfed-system"}}))
	require.NoError(t, env.ApplyDeploy(ctx, "default"))
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}))
	token := func(name string) string {
		_, err := cs.CoreV1().ServiceAccounts("monitoring").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
		tr, err := cs.CoreV1().ServiceAccounts("monitoring").CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		return tr.Status.Token
	}
	scraper, stranger := token("prometheus"), token("stranger")
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "fluxfed-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "monitoring", Name: "prometheus"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The authorizer learns of the binding from a watch: wait until it has, so that the server
	// never caches a refusal of the scraper.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:monitoring:prometheus", NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
		}}, metav1.CreateOptions{})
		require.NoError(c, err)
		require.True(c, r.Status.Allowed)
	}, 10*time.Second, 50*time.Millisecond)

	metrics.SetMember("member-x", metrics.HealthReady, 0)
	t.Cleanup(func() { metrics.ForgetMember("member-x") })

	// The manager as deployed: its ServiceAccount, with deploy/default's ClusterRole.
	asManager := rest.CopyConfig(env.Config)
	asManager.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:fluxfed-system:fluxfed-manager",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:fluxfed-system", "system:authenticated"}}
	url := "https://" + serve(t, metrics.ServerOptions("", true), asManager) + "/metrics"

	code, _ := scrape(t, url, "")
	require.Equal(t, http.StatusUnauthorized, code, "no token")
	code, _ = scrape(t, url, stranger)
	require.Equal(t, http.StatusForbidden, code, "a ServiceAccount not bound to fluxfed-metrics-reader")
	code, body := scrape(t, url, scraper)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `fluxfed_member_health{health="Ready",member="member-x"} 1`)
}

// TestTheMetricsEndpointServesPlainHTTPWhenNotSecure: --metrics-secure=false serves anyone over
// HTTP, for a manager run by hand; "0" serves nothing.
func TestTheMetricsEndpointServesPlainHTTPWhenNotSecure(t *testing.T) {
	opts := metrics.ServerOptions("", false)
	require.False(t, opts.SecureServing)
	require.Nil(t, opts.FilterProvider)
	addr := serve(t, opts, &rest.Config{Host: "https://127.0.0.1:1"})
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	srv, err := metricsserver.NewServer(metrics.ServerOptions("0", true), &rest.Config{}, http.DefaultClient)
	require.NoError(t, err)
	require.Nil(t, srv, "disabled")
}
