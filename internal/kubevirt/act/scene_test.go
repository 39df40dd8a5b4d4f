package act_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// scene is one test's namespace in the shared environment.
type scene struct {
	t   *testing.T
	env *testenv.Env
	ns  string
	c   client.Client
	sub rest.Interface
	ctx context.Context
}

func newScene(t *testing.T) *scene {
	env := testenv.Get(t)
	c, err := clients.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := virtapi.NewSubresourceClient(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	s := &scene{t: t, env: env, ns: env.Namespace(t), c: c, sub: sub, ctx: context.Background()}
	s.gates(kubevirtv1HotplugVolumes)
	return s
}

const kubevirtv1HotplugVolumes = "HotplugVolumes"

func (s *scene) gates(g ...string) {
	s.t.Helper()
	if err := s.env.Emulator.SetFeatureGates(s.ctx, g...); err != nil {
		s.t.Fatal(err)
	}
}

func (s *scene) create(objs ...client.Object) {
	s.t.Helper()
	for _, o := range objs {
		o.SetNamespace(s.ns)
		o.SetUID("")
		o.SetResourceVersion("")
		if err := s.c.Create(s.ctx, o); err != nil {
			s.t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// runningVM creates a running VM and waits for its VMI to run.
func (s *scene) runningVM(name string, opts ...fixture.Option) *kubevirtv1.VirtualMachine {
	s.t.Helper()
	vm := fixture.VM(name, append([]fixture.Option{fixture.Running()}, opts...)...)
	s.create(vm)
	s.tenantNode(name)
	s.waitVMI(name, "VMI running", func(vmi *kubevirtv1.VirtualMachineInstance) bool {
		return vmi.Status.Phase == kubevirtv1.Running
	})
	return vm
}

func (s *scene) vmi(name string) *kubevirtv1.VirtualMachineInstance { return s.env.VMI(s.ns, name) }

func (s *scene) waitVMI(name, what string, cond func(*kubevirtv1.VirtualMachineInstance) bool) {
	s.t.Helper()
	s.env.WaitVMI(s.t, s.ns, name, what, cond)
}

func hasHotplug(vmi *kubevirtv1.VirtualMachineInstance, volume string) bool {
	for _, vs := range vmi.Status.VolumeStatus {
		if vs.Name == volume && vs.HotplugVolume != nil && vs.Phase == kubevirtv1.VolumeReady {
			return true
		}
	}
	return false
}

func lists(vmi *kubevirtv1.VirtualMachineInstance, volume string) bool {
	for _, vs := range vmi.Status.VolumeStatus {
		if vs.Name == volume {
			return true
		}
	}
	return false
}

func waitVMSpecLists(s *scene, name, volume string) {
	s.t.Helper()
	testenv.Eventually(s.t, 20*time.Second, "VM spec lists "+volume, func() (bool, error) {
		var vm kubevirtv1.VirtualMachine
		if err := s.c.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: name}, &vm); err != nil {
			return false, err
		}
		for _, v := range vm.Spec.Template.Spec.Volumes {
			if v.Name == volume {
				return true, nil
			}
		}
		return false, nil
	})
}

// hotplug adds a claim-backed volume at VM or VMI level and waits until the
// VMI reports it Ready.
func (s *scene) hotplug(kind virtapi.Kind, name, volume string) {
	s.t.Helper()
	s.create(fixture.PVC(volume))
	s.tenantVolume(volume)
	if err := virtapi.AddVolume(s.ctx, s.sub, kind, s.ns, name, fixture.AddVolumeOptions(volume)); err != nil {
		s.t.Fatalf("addvolume %s: %v", volume, err)
	}
	s.waitVMI(name, "hot-plug "+volume+" ready", func(vmi *kubevirtv1.VirtualMachineInstance) bool { return hasHotplug(vmi, volume) })
}

// tenant returns the observe options with the shared tenant cluster as
// evidence for this scene's namespace.
func (s *scene) tenant() observe.Options {
	return observe.Options{Tenants: []observe.TenantSource{{Name: "guest", Namespace: s.ns, Config: s.env.Tenants["guest"].Config}}}
}

// plan observes the namespace and returns the finding for vmi/volume.
func (s *scene) plan(p check.Policy, o observe.Options, vmi, volume string) drift.Finding {
	s.t.Helper()
	o.Namespace = s.ns
	snap, err := observe.Observe(s.ctx, s.c, o)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, f := range check.Run(snap, p, time.Now()) {
		if f.Object.Name == vmi && f.Volume == volume && f.Check == check.OrphanHotplugVolume {
			return f
		}
	}
	s.t.Fatalf("no OrphanHotplugVolume finding for %s/%s volume %s", s.ns, vmi, volume)
	return drift.Finding{}
}

func (s *scene) executor(p check.Policy, o observe.Options) *act.Executor {
	ex, err := act.NewExecutor(s.env.Config, p, o)
	if err != nil {
		s.t.Fatal(err)
	}
	ex.WaitTimeout = 20 * time.Second
	return ex
}

func (s *scene) events(findingID string) []corev1.Event {
	var evs corev1.EventList
	if err := s.c.List(s.ctx, &evs, client.InNamespace(s.ns), client.MatchingLabels{"tether.dev/finding": findingID}); err != nil {
		s.t.Fatal(err)
	}
	return evs.Items
}

func policy() check.Policy {
	p := check.DefaultPolicy()
	return p
}

// refusedUntouched asserts that r is a refusal naming reason and that the
// VMI still has the volume hot-plugged and Ready.
func (s *scene) refusedUntouched(r drift.Result, reason drift.BlockReason, vmi, volume string) {
	s.t.Helper()
	if r.Outcome != drift.Refused || !strings.Contains(r.Message, string(reason)) {
		s.t.Fatalf("want Refused by %s, got %s: %s", reason, r.Outcome, r.Message)
	}
	if !hasHotplug(s.vmi(vmi), volume) {
		s.t.Fatal("the volume was touched")
	}
}

// tenantNode gives the tenant cluster a Node for the VM, as Cluster API's
// KubeVirt provider leaves it (a node name of its own, providerID
// kubevirt://<vm>, the cluster-namespace annotation), and the KubeVirt CSI
// driver's CSIDriver object.
func (s *scene) tenantNode(name string) {
	s.t.Helper()
	tc, err := clients.New(s.env.Tenants["guest"].Config)
	if err != nil {
		s.t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-" + s.ns + "-" + name,
		Annotations: map[string]string{snapshot.ClusterNamespaceAnnotation: s.ns}}}
	node.Spec.ProviderID = snapshot.ProviderIDPrefix + name
	drv := fixture.CSIDriver(snapshot.DefaultCSIDriver, true)
	drv.UID = ""
	for _, o := range []client.Object{node, drv} {
		if err := tc.Create(s.ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			s.t.Fatal(err)
		}
	}
	// One tenant cluster serves one infra namespace: other tests'
	// namespaces must not see this one's node once it is done.
	s.t.Cleanup(func() { _ = tc.Delete(context.Background(), node) })
}

// tenantNodeName is the tenant Node tenantNode made for VM name.
func (s *scene) tenantNodeName(name string) string { return "worker-" + s.ns + "-" + name }

// tenantVolume gives the tenant cluster a PV of the KubeVirt CSI driver
// with this volume handle: the infra volume is one of the tenant's.
func (s *scene) tenantVolume(handle string) {
	s.t.Helper()
	tc, err := clients.New(s.env.Tenants["guest"].Config)
	if err != nil {
		s.t.Fatal(err)
	}
	pv := fixture.PV("tpv-"+s.ns+"-"+handle, handle)
	pv.UID = ""
	if err := tc.Create(s.ctx, pv); err != nil && !apierrors.IsAlreadyExists(err) {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = tc.Delete(context.Background(), pv) })
}
