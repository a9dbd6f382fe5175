package metrics

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

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
	token, bind := monitoring(t, env)
	scraper, stranger := token("prometheus"), token("stranger")
	// bind waits until the authorizer knows of the binding, so that the server never keeps a
	// refusal of the scraper.
	bind("prometheus")

	SetMember("member-x", HealthReady, 0)
	t.Cleanup(func() { ForgetMember("member-x") })

	// The manager as deployed: its ServiceAccount, with deploy/default's ClusterRole.
	asManager := rest.CopyConfig(env.Config)
	asManager.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:fluxfed-system:fluxfed-manager",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:fluxfed-system", "system:authenticated"}}
	url := "https://" + serve(t, ServerOptions("", true), asManager) + "/metrics"

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
	opts := ServerOptions("", false)
	require.False(t, opts.SecureServing)
	require.Nil(t, opts.FilterProvider)
	addr := serve(t, opts, &rest.Config{Host: "https://127.0.0.1:1"})
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	srv, err := metricsserver.NewServer(ServerOptions("0", true), &rest.Config{}, http.DefaultClient)
	require.NoError(t, err)
	require.Nil(t, srv, "disabled")
}
