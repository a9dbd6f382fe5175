package metrics

import (
	"context"
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
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

	"github.com/fluxfed/fluxfed/internal/testenv"
)

// counted counts the reviews a reviewer asks the API server for.
type counted struct {
	next http.RoundTripper

	mu      sync.Mutex
	reviews map[string]int // by resource: tokenreviews, subjectaccessreviews
}

func (c *counted) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.reviews[req.URL.Path[strings.LastIndex(req.URL.Path, "/")+1:]]++
	c.mu.Unlock()
	return c.next.RoundTrip(req)
}

// asked returns how many TokenReviews and SubjectAccessReviews were sent.
func (c *counted) asked() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reviews["tokenreviews"], c.reviews["subjectaccessreviews"]
}

// clock is a time that the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// reviewedBy returns the filter of Reviews on cfg with the test's clock, what it asks counted, in
// front of a handler that answers "scraped".
func reviewedBy(t *testing.T, cfg *rest.Config, now func() time.Time) (http.Handler, *counted) {
	t.Helper()
	httpClient, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	count := &counted{next: httpClient.Transport, reviews: map[string]int{}}
	httpClient.Transport = count
	cs, err := kubernetes.NewForConfigAndClient(cfg, httpClient)
	require.NoError(t, err)
	r := newReviewer(cs.AuthenticationV1().TokenReviews(), cs.AuthorizationV1().SubjectAccessReviews(), now)
	h, err := r.filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("scraped"))
	}))
	require.NoError(t, err)
	return h, count
}

// scrapeWith sends method /metrics with the Authorization header auth (none when empty) and
// returns the status code and body.
func scrapeWith(h http.Handler, method, auth string) (int, string) {
	req := httptest.NewRequestWithContext(context.Background(), method, "/metrics", http.NoBody)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, strings.TrimSpace(rec.Body.String())
}

// monitoring makes env a cluster with fluxfed's deploy/default (ClusterRole
// fluxfed-metrics-reader) and a namespace monitoring. It returns how to make a ServiceAccount
// there and a token of it, and how to bind one to fluxfed-metrics-reader, which waits until the
// API server's authorizer knows of the binding (it learns of it from a watch).
func monitoring(t *testing.T, env *testenv.Env) (token func(name string) string, bind func(name string)) {
	t.Helper()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fluxfed-system"}}))
	require.NoError(t, env.ApplyDeploy(ctx, "default"))
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}))
	token = func(name string) string {
		_, err := cs.CoreV1().ServiceAccounts("monitoring").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
		tr, err := cs.CoreV1().ServiceAccounts("monitoring").CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		return tr.Status.Token
	}
	bind = func(name string) {
		_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "metrics-" + name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "fluxfed-metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "monitoring", Name: name}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: "system:serviceaccount:monitoring:" + name, NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
			}}, metav1.CreateOptions{})
			require.NoError(c, err)
			require.True(c, r.Status.Allowed)
		}, 30*time.Second, 50*time.Millisecond)
	}
	return token, bind
}

// TestReviewsKeepTheAPIServersAnswers: against a real API server, a scraper is reviewed once a
// minute and authorized once in 5 minutes however often it scrapes; a refusal is asked about
// again after 30 s, so a binding made for it counts then; tokens the server does not know and
// headers that carry no bearer token are refused, the latter without asking.
func TestReviewsKeepTheAPIServersAnswers(t *testing.T) {
	env := testenv.Start(t)
	token, bind := monitoring(t, env)
	scraper, stranger := token("prometheus"), token("stranger")
	bind("prometheus")

	clk := &clock{t: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)}
	h, count := reviewedBy(t, env.Config, clk.now)
	expect := func(method, auth string, code int, body string, tokenReviews, accessReviews int) {
		t.Helper()
		gotCode, gotBody := scrapeWith(h, method, auth)
		require.Equal(t, code, gotCode, "%s with %.40q", method, auth)
		require.Equal(t, body, gotBody)
		tr, sar := count.asked()
		require.Equal(t, [2]int{tokenReviews, accessReviews}, [2]int{tr, sar}, "TokenReviews and SubjectAccessReviews so far")
	}
	const strangerDenied = "Authorization denied for user system:serviceaccount:monitoring:stranger"

	for range 3 {
		expect(http.MethodGet, "Bearer "+scraper, http.StatusOK, "scraped", 1, 1)
	}
	// The scheme in any case, words after the token ignored, as the API server reads the header.
	expect(http.MethodGet, "bearer "+scraper, http.StatusOK, "scraped", 1, 1)
	expect(http.MethodGet, "  BEARER "+scraper+" and more", http.StatusOK, "scraped", 1, 1)
	// The verb is the request's: the reader may get /metrics, not post to it.
	expect(http.MethodPost, "Bearer "+scraper, http.StatusForbidden, "Authorization denied for user system:serviceaccount:monitoring:prometheus", 1, 2)

	expect(http.MethodGet, "Bearer "+stranger, http.StatusForbidden, strangerDenied, 2, 3)
	expect(http.MethodGet, "Bearer "+stranger, http.StatusForbidden, strangerDenied, 2, 3)
	bind("stranger")
	clk.advance(refusedTTL - time.Second)
	expect(http.MethodGet, "Bearer "+stranger, http.StatusForbidden, strangerDenied, 2, 3)
	clk.advance(time.Second)
	expect(http.MethodGet, "Bearer "+stranger, http.StatusOK, "scraped", 2, 4)

	// Tokens the API server does not know: refused, and asked about once in 30 s.
	expect(http.MethodGet, "Bearer not-a-token", http.StatusUnauthorized, "Unauthorized", 3, 4)
	expect(http.MethodGet, "Bearer not-a-token", http.StatusUnauthorized, "Unauthorized", 3, 4)
	expect(http.MethodGet, "Bearer "+strings.Repeat("x", 64<<10), http.StatusUnauthorized, "Unauthorized", 4, 4)
	// No bearer token: refused without asking.
	for _, auth := range []string{"", "Bearer", "Bearer ", "Bearer    ", "Basic cHJvbWV0aGV1czpzZWNyZXQ=", "Token " + scraper, scraper, "Bearer\t" + scraper} {
		expect(http.MethodGet, auth, http.StatusUnauthorized, "Unauthorized", 4, 4)
	}

	// A minute on, the scraper's token is reviewed again; its grant is kept for 5 minutes.
	clk.advance(authenticatedTTL)
	expect(http.MethodGet, "Bearer "+scraper, http.StatusOK, "scraped", 5, 4)
	clk.advance(allowedTTL)
	expect(http.MethodGet, "Bearer "+scraper, http.StatusOK, "scraped", 6, 5)
}

// TestAFailedReviewIsNotKept: when the API server cannot be asked, the scrape gets 500 and the
// next one asks again.
func TestAFailedReviewIsNotKept(t *testing.T) {
	// Nothing listens on port 1 of loopback: every review fails at once.
	h, count := reviewedBy(t, &rest.Config{Host: "https://127.0.0.1:1", Timeout: 5 * time.Second}, time.Now)
	for i := range 2 {
		code, body := scrapeWith(h, http.MethodGet, "Bearer some-token")
		require.Equal(t, http.StatusInternalServerError, code)
		require.Equal(t, "Authentication failed", body)
		tr, sar := count.asked()
		require.Equal(t, [2]int{i + 1, 0}, [2]int{tr, sar})
	}
}

func TestBearerToken(t *testing.T) {
	for _, tc := range []struct {
		header string
		token  string
	}{
		{"Bearer abc", "abc"},
		{"bearer abc", "abc"},
		{"BEARER abc", "abc"},
		{"  Bearer abc  ", "abc"},
		{"Bearer abc def", "abc"},
		{"Bearer  abc", ""}, // two spaces: the token is the empty word, as the API server reads it
		{"Bearer", ""},
		{"Bearer ", ""},
		{"Bearerabc", ""},
		{"Basic abc", ""},
		{"abc", ""},
		{"", ""},
	} {
		h := http.Header{}
		if tc.header != "" {
			h.Set("Authorization", tc.header)
		}
		token, ok := bearerToken(h)
		require.Equal(t, tc.token != "", ok, "%q", tc.header)
		require.Equal(t, tc.token, token, "%q", tc.header)
	}
}

func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer  x y", "Basic abc", "", "Bearer\x00a", "Bearer é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		token, ok := bearerToken(http.Header{"Authorization": {header}})
		if !ok {
			require.Empty(t, token)
			return
		}
		require.NotEmpty(t, token)
		require.NotContains(t, token, " ")
		require.Contains(t, header, token)
	})
}

// TestTheAnswersAreBounded: a flood of tokens never grows an answer map past cacheSize; what
// expired goes first, and the newest answer is always kept.
func TestTheAnswersAreBounded(t *testing.T) {
	now := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	a := answers[bool]{}
	key := func(i int) [sha256.Size]byte { return sha256.Sum256([]byte{byte(i), byte(i >> 8), byte(i >> 16)}) }

	// Half of a full map expired: only those go.
	for i := range cacheSize {
		ttl := time.Minute
		if i%2 == 0 {
			ttl = time.Second
		}
		a.put(key(i), true, now, ttl)
	}
	require.Len(t, a, cacheSize)
	a.put(key(cacheSize), true, now.Add(2*time.Second), time.Minute)
	require.Len(t, a, cacheSize/2+1)
	_, ok := a.get(key(1), now.Add(2*time.Second))
	require.True(t, ok, "an answer that had not expired is kept")

	// A full map of live answers is emptied, and keeps the new one.
	for i := range 3 * cacheSize {
		a.put(key(i), true, now, time.Hour)
		require.LessOrEqual(t, len(a), cacheSize)
		_, ok := a.get(key(i), now)
		require.True(t, ok)
	}
	_, ok = a.get(key(0), now.Add(time.Hour))
	require.False(t, ok, "an answer expires at its ttl")
}
