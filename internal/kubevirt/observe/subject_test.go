package observe_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// ForVolume reads the tenants (each may take up to its timeout) and the
// gates first, and the VMI and its VM last: the state an action writes
// against is the freshest it read.
func TestForVolume_readsTheVMIAndVMLast(t *testing.T) {
	var mu sync.Mutex
	var order []string
	note := func(what string) {
		mu.Lock()
		defer mu.Unlock()
		if len(order) == 0 || order[len(order)-1] != what {
			order = append(order, what)
		}
	}
	tenant := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		note("tenant")
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer tenant.Close()

	vm := fixture.VM("vm-a", fixture.InNamespace("ns"))
	vmi := fixture.VMI("vm-a", fixture.InNamespace("ns"), fixture.OwnedBy(vm), fixture.Running())
	c := fake.NewClientBuilder().WithScheme(clients.Scheme()).WithObjects(vm, vmi).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			switch obj.(type) {
			case *kubevirtv1.VirtualMachineInstance:
				note("vmi")
			case *kubevirtv1.VirtualMachine:
				note("vm")
			default:
				note("other")
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*kubevirtv1.KubeVirtList); ok {
				note("gates")
			} else {
				note("other")
			}
			return c.List(ctx, list, opts...)
		},
	}).Build()
	o := observe.Options{Tenants: []observe.TenantSource{
		{Name: "a", Config: &rest.Config{Host: tenant.URL}},
		{Name: "b", Namespace: "ns", Config: &rest.Config{Host: tenant.URL}},
	}}
	s, err := observe.ForVolume(context.Background(), c, o, "ns", "vm-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.VMIs) != 1 || len(s.VMs) != 1 || len(s.Tenants) != 2 {
		t.Fatalf("want the VMI, its VM and both tenants, got %d VMIs, %d VMs, %d tenants", len(s.VMIs), len(s.VMs), len(s.Tenants))
	}
	if want := []string{"tenant", "gates", "vmi", "vm"}; !slices.Equal(order, want) {
		t.Fatalf("read order %v, want %v", order, want)
	}
}
