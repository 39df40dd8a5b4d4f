package controller_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-dev/tether/internal/controller"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// freeAddr returns a loopback address with a port nobody listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// token returns a bearer token of a new ServiceAccount in ns, bound to
// clusterRole unless that is empty.
func token(t *testing.T, env *testenv.Env, ns, name, clusterRole string) string {
	t.Helper()
	ctx := context.Background()
	bindAccountNamed(t, env, ns, name, clusterRole)
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(600))}}
	tr, err := env.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

func ptr[T any](v T) *T { return &v }

// scrape GETs url with the bearer token (none if empty) and returns the
// status code and body; a connection refused (not listening yet) is 0.
func scrape(t *testing.T, url, bearer string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		// The endpoint serves a self-signed certificate.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // test of a self-signed endpoint
	}}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// The metrics endpoint, by default, serves HTTPS and asks the API server
// about every request: a token bound to tether-metrics-reader gets the
// metrics, another token 403, no token or a token the API server rejects
// 401. The controller runs as the
// config/rbac ServiceAccount, whose TokenReview and SubjectAccessReview
// rights this relies on.
func TestController_metricsNeedAnAuthorizedToken(t *testing.T) {
	w := newWorld(t)
	addr := freeAddr(t)
	w.start(w.cfg(time.Hour), func(o *controller.Options) { o.MetricsAddr = addr })
	reader := token(t, w.env, w.ns, "scraper", "tether-metrics-reader")
	nobody := token(t, w.env, w.ns, "nobody", "")
	url := "https://" + addr + "/metrics"

	var code int
	var body string
	testenv.Eventually(t, 30*time.Second, "the metrics endpoint to answer the reader", func() (bool, error) {
		code, body = scrape(t, url, reader)
		return code == http.StatusOK, nil
	})
	if !strings.Contains(body, "controller_runtime_") {
		t.Errorf("the reader got no metrics:\n%.300s", body)
	}
	if code, body := scrape(t, url, nobody); code != http.StatusForbidden {
		t.Errorf("a token without tether-metrics-reader: %d %q, want 403", code, body)
	}
	if code, body := scrape(t, url, ""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d %q, want 401", code, body)
	}
	// A token the API server rejects is unauthorized, not a server error.
	if code, body := scrape(t, url, "not-a-token"); code != http.StatusUnauthorized {
		t.Errorf("a bad token: %d %q, want 401", code, body)
	}
	if code, _ := scrape(t, "http://"+addr+"/metrics", ""); code == http.StatusOK {
		t.Error("plain HTTP served the metrics")
	}
}

// MetricsInsecure (--metrics-secure=false) serves plain HTTP to anyone.
func TestController_metricsInsecureOptOut(t *testing.T) {
	w := newWorld(t)
	addr := freeAddr(t)
	w.start(w.cfg(time.Hour), func(o *controller.Options) { o.MetricsAddr, o.MetricsInsecure = addr, true })
	testenv.Eventually(t, 30*time.Second, "plain HTTP metrics without a token", func() (bool, error) {
		code, _ := scrape(t, "http://"+addr+"/metrics", "")
		return code == http.StatusOK, nil
	})
}
