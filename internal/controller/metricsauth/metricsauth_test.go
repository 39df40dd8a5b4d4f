package metricsauth_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tether-dev/tether/internal/controller/metricsauth"
	"github.com/tether-dev/tether/internal/testing/controlplane"
)

// controllerUser is the identity config/rbac gives the controller; the
// guard's reviews are sent as this user, so only the shipped RBAC lets
// them through.
const controllerUser = "system:serviceaccount:tether-system:tether-controller"

var (
	cp    *controlplane.ControlPlane
	cpErr error
	admin kubernetes.Interface
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if !testing.Short() {
		cp, cpErr = controlplane.Start(context.Background(), controlplane.Options{})
		if cpErr == nil {
			defer cp.Stop()
			admin, cpErr = cp.Clientset()
		}
		if cpErr == nil {
			cpErr = applyShippedRBAC(context.Background(), admin)
		}
	}
	return m.Run()
}

func world(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test on the local control plane: skipped with -short")
	}
	if cpErr != nil {
		t.Fatalf("control plane: %v", cpErr)
	}
}

// applyShippedRBAC creates the ClusterRoles and bindings of the two files
// in config/rbac/common that the metrics endpoint depends on, as shipped.
func applyShippedRBAC(ctx context.Context, c kubernetes.Interface) error {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "config", "rbac", "common")
	for _, name := range []string{"metrics_auth_role.yaml", "metrics_reader_role.yaml"} {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		for {
			var obj struct {
				Kind string `json:"kind"`
				rbacv1.ClusterRoleBinding
				Rules []rbacv1.PolicyRule `json:"rules"`
			}
			if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			switch obj.Kind {
			case "ClusterRole":
				_, err = c.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: obj.ObjectMeta, Rules: obj.Rules}, metav1.CreateOptions{})
			case "ClusterRoleBinding":
				_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, &obj.ClusterRoleBinding, metav1.CreateOptions{})
			default:
				err = fmt.Errorf("unexpected kind %q", obj.Kind)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	return nil
}

// account creates a ServiceAccount (bound to tether-metrics-reader when
// reader) and returns a token of it.
func account(t *testing.T, name string, reader bool) string {
	t.Helper()
	ctx := context.Background()
	ns := "default"
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.CoreV1().ServiceAccounts(ns).Delete(ctx, name, metav1.DeleteOptions{}) })
	if reader {
		bindReader(t, name)
	}
	exp := int64(600)
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// bindReader binds the ServiceAccount default/name to tether-metrics-reader
// and returns a function that removes the binding.
func bindReader(t *testing.T, name string) (unbind func()) {
	t.Helper()
	ctx := context.Background()
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "read-metrics-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: metricsauth.ReaderRole},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: "default"}},
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	unbind = func() {
		if err := admin.RbacV1().ClusterRoleBindings().Delete(ctx, b.Name, metav1.DeleteOptions{}); err == nil {
			waitRBAC(t, name, false)
		}
	}
	t.Cleanup(unbind)
	waitRBAC(t, name, true)
	return unbind
}

// waitRBAC waits until the API server's authorizer, which reads the
// bindings from a cache of its own, says whether default/name may read the
// metrics.
func waitRBAC(t *testing.T, name string, allowed bool) {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:                  "system:serviceaccount:default:" + name,
		Groups:                []string{"system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"},
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
	}}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := admin.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Allowed == allowed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API server still answers allowed=%v for %s after 10s", got.Status.Allowed, name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// reviews counts the reviews a guard sends.
type reviews struct {
	next          http.RoundTripper
	tokens, sars  atomic.Int32
	authorization atomic.Value // the Authorization header the handler saw
}

func (r *reviews) RoundTrip(req *http.Request) (*http.Response, error) {
	switch {
	case strings.HasSuffix(req.URL.Path, "/tokenreviews"):
		r.tokens.Add(1)
	case strings.HasSuffix(req.URL.Path, "/subjectaccessreviews"):
		r.sars.Add(1)
	}
	return r.next.RoundTrip(req)
}

func (r *reviews) counts() string {
	return fmt.Sprintf("%d TokenReviews, %d SubjectAccessReviews", r.tokens.Load(), r.sars.Load())
}

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// serve runs a guarded handler that answers "tether_up 1", with the
// guard's reviews sent as cfg's user (the controller's by default).
func serve(t *testing.T, cfg *rest.Config, o metricsauth.Options) (string, *reviews) {
	t.Helper()
	if cfg == nil {
		var err error
		if cfg, err = cp.UserConfig(controllerUser); err != nil {
			t.Fatal(err)
		}
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rv := &reviews{next: hc.Transport}
	hc.Transport = rv
	g, err := metricsauth.New(cfg, hc, o)
	if err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rv.authorization.Store(req.Header.Get("Authorization"))
		_, _ = io.WriteString(w, "tether_up 1\n")
	})
	srv := httptest.NewServer(g.Wrap(logr.Discard(), h))
	t.Cleanup(srv.Close)
	return srv.URL, rv
}

// do sends method url with the Authorization header auth (none if empty).
func do(t *testing.T, method, url, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// The guard answers as the shipped RBAC says: GET /metrics for an account
// bound to tether-metrics-reader, 401 without a token the API server
// accepts, 403 for an account without the role, another path or another
// verb.
func TestGuard_answersAsTheShippedRBACSays(t *testing.T) {
	world(t)
	url, rv := serve(t, nil, metricsauth.Options{})
	reader := account(t, "scraper", true)
	nobody := account(t, "nobody", false)
	for _, tc := range []struct {
		name, method, path, auth string
		want                     int
		body                     string
	}{
		{"a reader's token", "GET", "/metrics", "Bearer " + reader, 200, "tether_up 1"},
		{"the scheme in lower case", "GET", "/metrics", "bearer " + reader, 200, "tether_up 1"},
		{"no token", "GET", "/metrics", "", 401, "no bearer token"},
		{"an empty bearer token", "GET", "/metrics", "Bearer ", 401, "no bearer token"},
		{"another scheme", "GET", "/metrics", "Basic " + reader, 401, "no bearer token"},
		{"a token the API server rejects", "GET", "/metrics", "Bearer not-a-token", 401, "the API server does not accept this token"},
		{"a valid token without the role", "GET", "/metrics", "Bearer " + nobody, 403, "system:serviceaccount:default:nobody may not get /metrics (bind it to ClusterRole tether-metrics-reader)"},
		{"a reader on another path", "GET", "/debug/pprof", "Bearer " + reader, 403, "may not get /debug/pprof"},
		{"a reader with another verb", "POST", "/metrics", "Bearer " + reader, 403, "may not post /metrics"},
	} {
		code, body := do(t, tc.method, url+tc.path, tc.auth)
		if code != tc.want || !strings.Contains(body, tc.body) {
			t.Errorf("%s: %d %q, want %d with %q", tc.name, code, body, tc.want, tc.body)
		}
	}
	if got := rv.authorization.Load(); got != "" {
		t.Errorf("the handler saw the Authorization header %q; the guard should drop it", got)
	}
}

// Answers are remembered briefly: a scraper costs one TokenReview per
// TokenTTL and one SubjectAccessReview per AllowTTL; a rejected token is
// not asked about again within RejectTTL. A removed binding stops working
// once AllowTTL has passed, a new one works once DenyTTL has.
func TestGuard_remembersAnswersBriefly(t *testing.T) {
	world(t)
	clk := &clock{now: time.Now()}
	url, rv := serve(t, nil, metricsauth.Options{Now: clk.Now})
	reader := account(t, "cached-scraper", false)
	unbind := bindReader(t, "cached-scraper")
	nobody := account(t, "cached-nobody", false)
	want := func(step, auth string, code int, tokens, sars int32) {
		t.Helper()
		if got, body := do(t, "GET", url+"/metrics", auth); got != code {
			t.Fatalf("%s: %d %q, want %d", step, got, body, code)
		}
		if rv.tokens.Load() != tokens || rv.sars.Load() != sars {
			t.Fatalf("%s: %s, want %d and %d", step, rv.counts(), tokens, sars)
		}
	}
	want("first scrape", "Bearer "+reader, 200, 1, 1)
	want("second scrape", "Bearer "+reader, 200, 1, 1)
	want("a bad token", "Bearer not-a-token", 401, 2, 1)
	want("the bad token again", "Bearer not-a-token", 401, 2, 1)

	clk.add(61 * time.Second) // past TokenTTL and RejectTTL, within AllowTTL
	want("after TokenTTL", "Bearer "+reader, 200, 3, 1)
	want("the bad token after RejectTTL", "Bearer not-a-token", 401, 4, 1)

	want("an account without the role", "Bearer "+nobody, 403, 5, 2)
	bindReader(t, "cached-nobody")
	want("bound, within DenyTTL", "Bearer "+nobody, 403, 5, 2)
	clk.add(31 * time.Second)
	want("bound, after DenyTTL", "Bearer "+nobody, 200, 5, 3)

	// The reader's binding is removed: allowed until AllowTTL has passed.
	unbind()
	want("unbound, within AllowTTL", "Bearer "+reader, 200, 5, 3)
	clk.add(5 * time.Minute)
	want("unbound, after AllowTTL", "Bearer "+reader, 403, 6, 4)
}

// The guard's own account needs the shipped metrics-auth role: without it
// the reviews fail, the scraper gets 500, and nothing is remembered.
func TestGuard_cannotAskTheAPIServer(t *testing.T) {
	world(t)
	reader := account(t, "unserved-scraper", true)

	cfg, err := cp.UserConfig("someone-without-rights")
	if err != nil {
		t.Fatal(err)
	}
	url, rv := serve(t, cfg, metricsauth.Options{})
	for i := 0; i < 2; i++ {
		if code, body := do(t, "GET", url+"/metrics", "Bearer "+reader); code != 500 || !strings.Contains(body, "did not answer the TokenReview") {
			t.Errorf("reviews refused: %d %q, want 500 naming the TokenReview", code, body)
		}
	}
	if rv.tokens.Load() != 2 {
		t.Errorf("reviews refused: %s, want 2 TokenReviews (failures are not remembered)", rv.counts())
	}

	// An API server that does not listen.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := rest.CopyConfig(cfg)
	down.Host = "https://" + l.Addr().String()
	_ = l.Close()
	url, _ = serve(t, down, metricsauth.Options{Timeout: 2 * time.Second})
	if code, body := do(t, "GET", url+"/metrics", "Bearer "+reader); code != 500 {
		t.Errorf("API server down: %d %q, want 500", code, body)
	}
}
