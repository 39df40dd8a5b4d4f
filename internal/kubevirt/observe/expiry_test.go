package observe_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/testing/controlplane"
	"github.com/tether-dev/tether/internal/testing/emulator"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// A read that outlives its continue token, on a real API server: the
// server compacts etcd every second here (--etcd-compaction-interval; five
// minutes by default), and the VMIs' second page is held back until the
// server answers its token 410 Expired. The read then starts again from the
// beginning and says so: every VMI and VM is read once, among them a VM and
// its VMI created while the first read waited, so that the VMIs and VMs
// are again of one moment, not the VMIs of the first read and the VMs of
// the second.
func TestObserve_readsAgainWhenTheServerExpiresAToken(t *testing.T) {
	ctx := context.Background()
	cp, err := controlplane.Start(ctx, controlplane.Options{ExtraAPIServerArgs: []string{"--etcd-compaction-interval=1s"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	if err := emulator.InstallCRDs(ctx, cp.Config); err != nil {
		t.Fatal(err)
	}
	admin, err := clients.New(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "expiry"
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	pair := func(name string) {
		vm := fixture.VM(name, fixture.InNamespace(ns))
		createPaused(t, admin, vm, fixture.VMI(name, fixture.InNamespace(ns), fixture.OwnedBy(vm)))
	}
	for i := 0; i < 5; i++ {
		pair(fmt.Sprintf("vm-%d", i))
	}

	plain, err := rest.HTTPClientFor(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	// expire holds the first continued VMI page back until the server
	// answers its token 410, writing meanwhile so that revisions pass.
	var once sync.Once
	var held time.Duration
	expire := func(req *http.Request) {
		t0 := time.Now()
		for i := 0; time.Since(t0) < time.Minute; i++ {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("tick-%d", i), Namespace: ns}}
			if err := admin.Create(ctx, cm); err != nil {
				t.Error(err)
				return
			}
			if i == 3 {
				pair("late")
			}
			resp, err := plain.Get(req.URL.String())
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusGone {
				held = time.Since(t0)
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
		t.Error("the server never expired the continue token")
	}
	cfg := rest.CopyConfig(cp.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if strings.HasSuffix(req.URL.Path, "/virtualmachineinstances") && req.URL.Query().Get("continue") != "" {
				once.Do(func() { expire(req) })
			}
			return rt.RoundTrip(req)
		})
	})
	pages, err := observe.NewPageReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var relisted []error
	snap, err := observe.Observe(ctx, admin, observe.Options{
		Namespace: ns, PageSize: 2, Pages: pages, Kinds: snapshot.KindVMIs | snapshot.KindVMs,
		Relisted: func(err error) { relisted = append(relisted, err) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the token expired after %s", held.Round(100*time.Millisecond))
	if len(relisted) != 1 || !apierrors.IsResourceExpired(relisted[0]) {
		t.Fatalf("told of %d reads again (%v), want one, for the expiry", len(relisted), relisted)
	}
	want := "[late vm-0 vm-1 vm-2 vm-3 vm-4]"
	if got := names(snap.VMIs); got != want {
		t.Errorf("VMIs %s, want %s", got, want)
	}
	if got := names(snap.VMs); got != want {
		t.Errorf("VMs %s, want %s", got, want)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func names[T any, P interface {
	*T
	GetName() string
}](items []T) string {
	var out []string
	for i := range items {
		out = append(out, P(&items[i]).GetName())
	}
	sort.Strings(out)
	return fmt.Sprint(out)
}
