package metrics

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// How long the answers of the API server are kept. A scraper that comes every 15 s costs the
// server a TokenReview a minute and a SubjectAccessReview every 5 minutes; a refused one is asked
// about again after 30 s, so that a ClusterRoleBinding made for it takes effect within that. These
// are the times controller-runtime's filter keeps them.
const (
	authenticatedTTL = time.Minute
	allowedTTL       = 5 * time.Minute
	refusedTTL       = 30 * time.Second
	// reviewTimeout bounds one review, so that a slow API server does not hold scrapes forever.
	reviewTimeout = 10 * time.Second
	// cacheSize bounds each cache: a flood of made-up tokens cannot grow the manager's memory.
	cacheSize = 1024
)

// Reviews is the metrics server's filter: a scrape is served only when the API server
// authenticates its bearer token (a TokenReview) and authorizes the user to get the scraped path
// (a SubjectAccessReview on a non-resource URL). It asks the API server directly, with the typed
// clients the manager links anyway, where controller-runtime's filter of the same behaviour
// brings k8s.io/apiserver (and with it gRPC, OpenTelemetry and CEL) into the binary: about 8 MiB
// of the member operator's RSS (docs/performance.md).
//
// A scrape without a bearer token, or with one the API server does not authenticate, gets 401;
// one whose user may not get the path gets 403; a review that fails gets 500 and is not kept.
func Reviews(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	tokens, err := authenticationv1client.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("creating the TokenReview client: %w", err)
	}
	access, err := authorizationv1client.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("creating the SubjectAccessReview client: %w", err)
	}
	r := newReviewer(tokens.TokenReviews(), access.SubjectAccessReviews(), time.Now)
	return r.filter, nil
}

// reviewer asks the API server who a scraper is and what it may do, and keeps the answers.
type reviewer struct {
	tokens authenticationv1client.TokenReviewInterface
	access authorizationv1client.SubjectAccessReviewInterface
	now    func() time.Time

	mu     sync.Mutex
	users  answers[*authenticationv1.UserInfo] // by the token's digest; nil: not authenticated
	grants answers[bool]                       // by the review's digest
}

func newReviewer(tokens authenticationv1client.TokenReviewInterface, access authorizationv1client.SubjectAccessReviewInterface, now func() time.Time) *reviewer {
	return &reviewer{tokens: tokens, access: access, now: now,
		users: answers[*authenticationv1.UserInfo]{}, grants: answers[bool]{}}
}

func (r *reviewer) filter(log logr.Logger, next http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		token, ok := bearerToken(req.Header)
		if !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		user, err := r.authenticate(req.Context(), token)
		if err != nil {
			log.Error(err, "Reviewing a scraper's token failed")
			http.Error(w, "Authentication failed", http.StatusInternalServerError)
			return
		}
		if user == nil {
			log.V(4).Info("Refusing a scrape: its token is not authenticated")
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		allowed, err := r.authorize(req.Context(), user, strings.ToLower(req.Method), req.URL.Path)
		if err != nil {
			msg := fmt.Sprintf("Authorization for user %s failed", user.Username)
			log.Error(err, msg)
			http.Error(w, msg, http.StatusInternalServerError)
			return
		}
		if !allowed {
			msg := fmt.Sprintf("Authorization denied for user %s", user.Username)
			log.V(4).Info("Refusing a scrape", "user", user.Username, "path", req.URL.Path)
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, req)
	}), nil
}

// bearerToken is the token of an "Authorization: Bearer TOKEN" header, read as the API server
// reads it: the scheme in any case, the token the next word.
func bearerToken(h http.Header) (string, bool) {
	scheme, rest, _ := strings.Cut(strings.TrimSpace(h.Get("Authorization")), " ")
	token, _, _ := strings.Cut(rest, " ")
	if !strings.EqualFold(scheme, "bearer") || token == "" {
		return "", false
	}
	return token, true
}

// authenticate returns the user the API server says token belongs to, nil if it belongs to nobody.
func (r *reviewer) authenticate(ctx context.Context, token string) (*authenticationv1.UserInfo, error) {
	key := sha256.Sum256([]byte(token))
	if user, ok := recall(r, r.users, key); ok {
		return user, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	review, err := r.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating a TokenReview: %w", err)
	}
	user, ttl := (*authenticationv1.UserInfo)(nil), refusedTTL
	if review.Status.Authenticated {
		user, ttl = &review.Status.User, authenticatedTTL
	}
	keep(r, r.users, key, user, ttl)
	return user, nil
}

// authorize returns whether the API server lets user verb path.
func (r *reviewer) authorize(ctx context.Context, user *authenticationv1.UserInfo, verb, path string) (bool, error) {
	spec := authorizationv1.SubjectAccessReviewSpec{
		User:                  user.Username,
		UID:                   user.UID,
		Groups:                user.Groups,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}
	if len(user.Extra) > 0 {
		spec.Extra = make(map[string]authorizationv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			spec.Extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	// encoding/json writes the map's keys in order: one spec, one digest.
	data, err := json.Marshal(spec)
	if err != nil {
		return false, fmt.Errorf("encoding a SubjectAccessReview: %w", err)
	}
	key := sha256.Sum256(data)
	if allowed, ok := recall(r, r.grants, key); ok {
		return allowed, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	review, err := r.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("creating a SubjectAccessReview: %w", err)
	}
	allowed, ttl := review.Status.Allowed, refusedTTL
	if allowed {
		ttl = allowedTTL
	}
	keep(r, r.grants, key, allowed, ttl)
	return allowed, nil
}

// recall returns the answer a holds for key, under the reviewer's lock.
func recall[T any](r *reviewer, a answers[T], key [sha256.Size]byte) (T, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return a.get(key, r.now())
}

// keep puts an answer in a for ttl, under the reviewer's lock.
func keep[T any](r *reviewer, a answers[T], key [sha256.Size]byte, value T, ttl time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a.put(key, value, r.now(), ttl)
}

// answers are the API server's answers by digest, each until it expires.
type answers[T any] map[[sha256.Size]byte]answer[T]

type answer[T any] struct {
	value   T
	expires time.Time
}

func (a answers[T]) get(key [sha256.Size]byte, now time.Time) (T, bool) {
	got, ok := a[key]
	if !ok || !now.Before(got.expires) {
		var zero T
		return zero, false
	}
	return got.value, true
}

// put keeps value for ttl from now. When the map is full it drops what expired, and if that is
// not enough, everything: a bound, not an eviction policy, since a manager sees a handful of
// scrapers.
func (a answers[T]) put(key [sha256.Size]byte, value T, now time.Time, ttl time.Duration) {
	if len(a) >= cacheSize {
		for k, v := range a {
			if !now.Before(v.expires) {
				delete(a, k)
			}
		}
		if len(a) >= cacheSize {
			clear(a)
		}
	}
	a[key] = answer[T]{value: value, expires: now.Add(ttl)}
}
