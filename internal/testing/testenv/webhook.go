package testenv

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"

	"github.com/tether-dev/tether/internal/protect"
)

// Webhook is where a test serves tether's admission webhook: a free port
// on 127.0.0.1 and a directory holding a self-signed serving certificate
// for that address (tls.crt, tls.key).
type Webhook struct {
	Host    string
	Port    int
	CertDir string
	// CA is the PEM bundle the API server must trust (the certificate and
	// its self-signed CA).
	CA []byte
}

// NewWebhook picks a port and writes a certificate for it.
func NewWebhook(t testing.TB) *Webhook {
	t.Helper()
	wh := &Webhook{Host: "127.0.0.1", CertDir: t.TempDir()}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(wh.Host, []net.IP{net.ParseIP(wh.Host)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(wh.CertDir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	wh.CA = certPEM
	l, err := net.Listen("tcp", wh.Host+":0")
	if err != nil {
		t.Fatal(err)
	}
	wh.Port = l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return wh
}

// Addr is the webhook's host:port.
func (wh *Webhook) Addr() string { return net.JoinHostPort(wh.Host, strconv.Itoa(wh.Port)) }

// Register registers protect.WebhookConfiguration with the API server for
// namespace ns only, pointing at wh, with a 2s timeout; it is removed when
// the test ends.
func (wh *Webhook) Register(t testing.TB, e *Env, ns string) {
	t.Helper()
	url := "https://" + wh.Addr() + protect.WebhookPath
	cfg := protect.WebhookConfiguration(admissionv1.WebhookClientConfig{URL: &url, CABundle: wh.CA})
	cfg.Name = ns + "." + protect.WebhookName
	timeout := int32(2)
	cfg.Webhooks[0].TimeoutSeconds = &timeout
	cfg.Webhooks[0].NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	vwcs := e.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := vwcs.Create(context.Background(), cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vwcs.Delete(context.Background(), cfg.Name, metav1.DeleteOptions{}) })
}
