// Package clients builds the Kubernetes clients tether uses: one scheme with
// the core, storage, KubeVirt and CDI types, controller-runtime clients that
// read without a cache, and a transport wrapper that counts requests so
// benchmarks can prove "one LIST per kind".
package clients

import (
	"net/http"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
)

// Scheme returns the scheme that knows every type tether reads or writes.
// It is built on first use (about half a megabyte in 3,000 allocations), so
// a command that makes no client, such as tether version, does not pay for
// it.
var Scheme = sync.OnceValue(newScheme)

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kubevirtv1.AddToScheme, cdiv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err) // programming error: the schemes are static
		}
	}
	return s
}

// New returns an uncached controller-runtime client for cfg.
func New(cfg *rest.Config) (client.Client, error) {
	return client.New(cfg, client.Options{Scheme: Scheme()})
}

// Counter counts HTTP requests by method and path kind.
type Counter struct {
	total atomic.Int64
	mu    sync.Mutex
	byKey map[string]int
}

// Total is the number of requests sent so far.
func (c *Counter) Total() int { return int(c.total.Load()) }

// By returns a copy of the counts keyed by "METHOD path".
func (c *Counter) By() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.byKey))
	for k, v := range c.byKey {
		out[k] = v
	}
	return out
}

// Wrap returns a copy of cfg whose requests are counted by c.
func (c *Counter) Wrap(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	prev := out.WrapTransport
	out.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			c.total.Add(1)
			c.mu.Lock()
			if c.byKey == nil {
				c.byKey = map[string]int{}
			}
			c.byKey[r.Method+" "+r.URL.Path]++
			c.mu.Unlock()
			return rt.RoundTrip(r)
		})
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
