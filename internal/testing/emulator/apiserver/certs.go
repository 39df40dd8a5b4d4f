package apiserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ServingCerts is a self-signed CA and a serving certificate issued by it.
type ServingCerts struct {
	CAPEM []byte
	Cert  tls.Certificate
}

// NewServingCerts makes a CA and a certificate for the given DNS names and
// IPs, valid for a year.
func NewServingCerts(dnsNames []string, ips []net.IP) (*ServingCerts, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "kubevirt-emulator-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: dnsNames[0]},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	return &ServingCerts{
		CAPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		Cert:  tls.Certificate{Certificate: [][]byte{der, caDER}, PrivateKey: key},
	}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

// requestHeader authenticates the kube-aggregator the way an extension
// apiserver does: the client certificate must chain to the requestheader
// client CA (and carry an allowed common name, if names are configured); the
// user comes from the configured username headers.
type requestHeader struct {
	client client.Reader

	mu           sync.Mutex
	pool         *x509.CertPool
	allowedNames []string
	userHeaders  []string
	groupHeaders []string
	loadedAt     time.Time
}

const authConfigMap = "extension-apiserver-authentication"

// load reads kube-system/extension-apiserver-authentication.
func (a *requestHeader) load(ctx context.Context) error {
	cm := &corev1.ConfigMap{}
	if err := a.client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: authConfigMap}, cm); err != nil {
		return fmt.Errorf("read kube-system/%s: %w", authConfigMap, err)
	}
	caPEM := cm.Data["requestheader-client-ca-file"]
	if caPEM == "" {
		return fmt.Errorf("kube-system/%s has no requestheader-client-ca-file: start the apiserver with --requestheader-client-ca-file", authConfigMap)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(caPEM)) {
		return fmt.Errorf("kube-system/%s: requestheader-client-ca-file holds no certificate", authConfigMap)
	}
	list := func(key string, def ...string) []string {
		var out []string
		if raw := cm.Data[key]; raw != "" {
			_ = json.Unmarshal([]byte(raw), &out)
		}
		if len(out) == 0 {
			return def
		}
		return out
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pool = pool
	a.allowedNames = list("requestheader-allowed-names")
	a.userHeaders = list("requestheader-username-headers", "X-Remote-User")
	a.groupHeaders = list("requestheader-group-headers", "X-Remote-Group")
	a.loadedAt = time.Now()
	return nil
}

var errUnauthenticated = errors.New("client certificate is missing or not signed by the requestheader client CA")

// authenticate verifies the proxy's certificate and returns the user it
// speaks for ("" when no user header is set, as for discovery probes).
func (a *requestHeader) authenticate(r *http.Request) (user string, groups []string, err error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return "", nil, errUnauthenticated
	}
	if err := a.verify(r.TLS.PeerCertificates); err != nil {
		// The CA may have rotated: reload at most once a second and retry.
		a.mu.Lock()
		stale := time.Since(a.loadedAt) > time.Second
		a.mu.Unlock()
		if !stale || a.load(r.Context()) != nil {
			return "", nil, err
		}
		if err := a.verify(r.TLS.PeerCertificates); err != nil {
			return "", nil, err
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, h := range a.userHeaders {
		if v := r.Header.Get(h); v != "" {
			user = v
			break
		}
	}
	for _, h := range a.groupHeaders {
		groups = append(groups, r.Header.Values(h)...)
	}
	return user, groups, nil
}

func (a *requestHeader) verify(chain []*x509.Certificate) error {
	a.mu.Lock()
	pool, allowed := a.pool, a.allowedNames
	a.mu.Unlock()
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{
		Roots:         pool,
		Intermediates: inter,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return fmt.Errorf("%w: %v", errUnauthenticated, err)
	}
	if len(allowed) > 0 && !slices.Contains(allowed, chain[0].Subject.CommonName) {
		return fmt.Errorf("%w: common name %q is not in requestheader-allowed-names", errUnauthenticated, chain[0].Subject.CommonName)
	}
	return nil
}
