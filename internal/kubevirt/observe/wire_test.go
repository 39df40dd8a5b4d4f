package observe_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// exchange is what one request asked for and what the server answered.
type exchange struct{ accept, contentType string }

// recordingWire returns cfg whose requests are recorded by path.
func recordingWire(cfg *rest.Config) (*rest.Config, func() map[string]exchange) {
	var mu sync.Mutex
	got := map[string]exchange{}
	out := rest.CopyConfig(cfg)
	out.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTrip(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if err == nil && r.Method == http.MethodGet {
				mu.Lock()
				got[r.URL.Path] = exchange{accept: r.Header.Get("Accept"), contentType: resp.Header.Get("Content-Type")}
				mu.Unlock()
			}
			return resp, err
		})
	}
	return out, func() map[string]exchange {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// An audit's read asks for the built-in kinds in protobuf, with any other
// type (JSON) accepted where a server cannot, and gets protobuf; the
// custom resources (VMIs, VMs, DataVolumes, the KubeVirt CR) in JSON,
// which is all a server offers for them by default. It fails if the
// client's content type is set to JSON (controller-runtime then asks for
// JSON for every kind).
func TestObserve_builtinKindsInProtobuf(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	admin, err := clients.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	vm := fixture.VM("vm-w", fixture.InNamespace(ns))
	createPaused(t, admin, vm, fixture.VMI("vm-w", fixture.InNamespace(ns), fixture.OwnedBy(vm)), fixture.UserPod("app-w", fixture.InNamespace(ns)))
	cfg, got := recordingWire(env.Config)
	c, err := clients.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pages, err := observe.NewPageReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := observe.Observe(ctx, c, observe.Options{Pages: pages, Lean: true}); err != nil {
		t.Fatal(err)
	}
	const proto = "application/vnd.kubernetes.protobuf"
	seen := got()
	for _, path := range []string{"/api/v1/pods", "/api/v1/persistentvolumeclaims", "/api/v1/nodes", "/api/v1/persistentvolumes",
		"/apis/storage.k8s.io/v1/volumeattachments", "/apis/storage.k8s.io/v1/csidrivers"} {
		x, ok := seen[path]
		switch {
		case !ok:
			t.Errorf("%s was not read: %v", path, seen)
		case !strings.HasPrefix(x.accept, proto) || !strings.Contains(x.accept, "*/*"):
			t.Errorf("%s asked for %q, want protobuf with any other type as the fallback", path, x.accept)
		case !strings.HasPrefix(x.contentType, proto):
			t.Errorf("%s came as %q, want protobuf", path, x.contentType)
		}
	}
	for _, path := range []string{"/apis/kubevirt.io/v1/virtualmachineinstances", "/apis/kubevirt.io/v1/virtualmachines", "/apis/kubevirt.io/v1/kubevirts"} {
		if x, ok := seen[path]; !ok || !strings.HasPrefix(x.contentType, "application/json") {
			t.Errorf("%s: read %v as %q, want JSON", path, ok, x.contentType)
		}
	}
}
