// Package metricsauth guards the controller's metrics endpoint: a request
// needs a bearer token that the API server authenticates (TokenReview) and
// allows to read the path (SubjectAccessReview, a non-resource URL with the
// request's method as the verb, "get" for a scrape). The shipped
// ClusterRole tether-metrics-reader grants exactly that on /metrics.
//
// It asks the API server the same two questions, with the same fields, as
// controller-runtime's filters.WithAuthenticationAndAuthorization, so the
// same RBAC applies; it does without k8s.io/apiserver, which that filter
// links into the binary (44 of its 98 MB). Its answers differ in one
// place: a token the API server rejects is 401 here, where that filter
// answered 500.
//
//   - no bearer token, or one the API server does not authenticate: 401;
//   - an authenticated account the API server does not allow: 403;
//   - the API server does not answer: 500 (nothing of it is remembered).
//
// Answers are remembered briefly and in bounded caches: tokens (by their
// SHA-256, never the token itself) for TokenTTL when authenticated and
// RejectTTL when not; access decisions for AllowTTL and DenyTTL.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// ReaderRole is the ClusterRole that lets an account read the metrics.
const ReaderRole = "tether-metrics-reader"

// allAuthenticated is the group every authenticated user belongs to; the
// API server's authenticators add it, and so does this filter.
const allAuthenticated = "system:authenticated"

// Options tune the caches and the reviews; the zero value gives the
// defaults, which are controller-runtime's where it has one.
type Options struct {
	// TokenTTL: how long an authenticated token is trusted (default 1m).
	TokenTTL time.Duration
	// RejectTTL: how long a rejected token is refused without asking
	// again (default 30s).
	RejectTTL time.Duration
	// AllowTTL and DenyTTL: how long an access decision holds (default 5m
	// and 30s): a removed binding stops working within AllowTTL, a new one
	// works within DenyTTL.
	AllowTTL, DenyTTL time.Duration
	// MaxEntries bounds each cache (default 1024).
	MaxEntries int
	// Timeout bounds one review (default 10s).
	Timeout time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.TokenTTL, time.Minute)
	def(&o.RejectTTL, 30*time.Second)
	def(&o.AllowTTL, 5*time.Minute)
	def(&o.DenyTTL, 30*time.Second)
	def(&o.Timeout, 10*time.Second)
	if o.MaxEntries == 0 {
		o.MaxEntries = 1024
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Provider returns a metricsserver.Options.FilterProvider that guards the
// metrics handler with a Guard.
func Provider(o Options) func(*rest.Config, *http.Client) (metricsserver.Filter, error) {
	return func(cfg *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
		g, err := New(cfg, hc, o)
		if err != nil {
			return nil, err
		}
		return func(log logr.Logger, h http.Handler) (http.Handler, error) {
			return g.Wrap(log, h), nil
		}, nil
	}
}

// Guard asks the API server about each request's bearer token.
type Guard struct {
	o      Options
	tokens authenticationclient.TokenReviewInterface
	access authorizationclient.SubjectAccessReviewInterface
	users  *answers[*authenticationv1.UserInfo] // nil: rejected
	allows *answers[bool]
}

// New returns a Guard that sends its reviews with cfg through hc (nil: a
// client of cfg's own).
func New(cfg *rest.Config, hc *http.Client, o Options) (*Guard, error) {
	if hc == nil {
		var err error
		if hc, err = rest.HTTPClientFor(cfg); err != nil {
			return nil, fmt.Errorf("metrics authentication: %w", err)
		}
	}
	authn, err := authenticationclient.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("metrics authentication: %w", err)
	}
	authz, err := authorizationclient.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("metrics authorization: %w", err)
	}
	o = o.withDefaults()
	return &Guard{
		o:      o,
		tokens: authn.TokenReviews(),
		access: authz.SubjectAccessReviews(),
		users:  newAnswers[*authenticationv1.UserInfo](o.MaxEntries),
		allows: newAnswers[bool](o.MaxEntries),
	}, nil
}

// Wrap serves h to the requests the API server authenticates and allows.
func (g *Guard) Wrap(log logr.Logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		token, ok := bearer(req)
		if !ok {
			unauthorized(w, "no bearer token")
			return
		}
		u, err := g.authenticate(req.Context(), token)
		if err != nil {
			log.Error(err, "Metrics: the TokenReview failed")
			http.Error(w, "Authentication failed: the API server did not answer the TokenReview", http.StatusInternalServerError)
			return
		}
		if u == nil {
			log.V(4).Info("Metrics: the API server rejected a token")
			unauthorized(w, "the API server does not accept this token")
			return
		}
		verb, path := strings.ToLower(req.Method), req.URL.Path
		allowed, err := g.authorize(req.Context(), u, verb, path)
		if err != nil {
			log.Error(err, "Metrics: the SubjectAccessReview failed", "user", u.Username)
			http.Error(w, fmt.Sprintf("Authorization for user %s failed: the API server did not answer the SubjectAccessReview", u.Username), http.StatusInternalServerError)
			return
		}
		if !allowed {
			log.V(4).Info("Metrics: access denied", "user", u.Username, "verb", verb, "path", path)
			http.Error(w, fmt.Sprintf("Forbidden: user %s may not %s %s (bind it to ClusterRole %s)", u.Username, verb, path, ReaderRole), http.StatusForbidden)
			return
		}
		// Nothing behind this filter needs the token.
		req.Header.Del("Authorization")
		h.ServeHTTP(w, req)
	})
}

func unauthorized(w http.ResponseWriter, why string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="tether metrics"`)
	http.Error(w, fmt.Sprintf("Unauthorized: %s; send the token of an account bound to ClusterRole %s", why, ReaderRole), http.StatusUnauthorized)
}

// bearer reads the token of an "Authorization: Bearer <token>" header, as
// the API server does (the scheme in any case, surrounding space ignored,
// an empty token is none).
func bearer(req *http.Request) (string, bool) {
	h := strings.TrimSpace(req.Header.Get("Authorization"))
	parts := strings.SplitN(h, " ", 3)
	if len(parts) < 2 || !strings.EqualFold(parts[0], "bearer") || parts[1] == "" {
		return "", false
	}
	return parts[1], true
}

// authenticate returns who token belongs to, or nil when the API server
// rejects it.
func (g *Guard) authenticate(ctx context.Context, token string) (*authenticationv1.UserInfo, error) {
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:])
	if u, ok := g.users.get(key, g.o.Now()); ok {
		return u, nil
	}
	ctx, cancel := context.WithTimeout(ctx, g.o.Timeout)
	defer cancel()
	// No audiences: the API server checks the token against its own, as
	// controller-runtime's filter has it do.
	tr, err := g.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	if !tr.Status.Authenticated {
		g.users.put(key, nil, g.o.RejectTTL, g.o.Now())
		return nil, nil
	}
	u := tr.Status.User
	if u.Username != "system:anonymous" && !slices.Contains(u.Groups, allAuthenticated) && !slices.Contains(u.Groups, "system:unauthenticated") {
		u.Groups = append(slices.Clip(u.Groups), allAuthenticated)
	}
	g.users.put(key, &u, g.o.TokenTTL, g.o.Now())
	return &u, nil
}

// authorize asks whether u may verb the non-resource path.
func (g *Guard) authorize(ctx context.Context, u *authenticationv1.UserInfo, verb, path string) (bool, error) {
	spec := authorizationv1.SubjectAccessReviewSpec{
		User:                  u.Username,
		UID:                   u.UID,
		Groups:                u.Groups,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}
	if len(u.Extra) > 0 {
		spec.Extra = make(map[string]authorizationv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			spec.Extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return false, err
	}
	key := string(raw)
	if allowed, ok := g.allows.get(key, g.o.Now()); ok {
		return allowed, nil
	}
	ctx, cancel := context.WithTimeout(ctx, g.o.Timeout)
	defer cancel()
	sar, err := g.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	allowed := sar.Status.Allowed && !sar.Status.Denied
	ttl := g.o.DenyTTL
	if allowed {
		ttl = g.o.AllowTTL
	}
	g.allows.put(key, allowed, ttl, g.o.Now())
	return allowed, nil
}
