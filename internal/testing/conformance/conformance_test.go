package conformance

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/localenv"
)

// handlerSwitch is what both worlds offer to stop virt-handler on a node.
type handlerSwitch interface{ SetHandlerDown(node string, down bool) }

// kvWorld is one running world: a control plane with the emulator or with
// real KubeVirt.
type kvWorld struct {
	name    string
	env     *localenv.Env
	c       client.Client
	cs      kubernetes.Interface
	sub     *rest.RESTClient
	handler handlerSwitch
}

var worlds []*kvWorld

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if testing.Short() {
		return m.Run()
	}
	for _, kind := range []string{localenv.KubeVirtEmulator, localenv.KubeVirtReal} {
		w, err := start(kind)
		if err != nil {
			fmt.Fprintf(os.Stderr, "conformance: %s world: %v\n", kind, err)
			return 1
		}
		defer w.env.Stop()
		worlds = append(worlds, w)
	}
	return m.Run()
}

func start(kind string) (*kvWorld, error) {
	env, err := localenv.Start(context.Background(), localenv.Options{KubeVirt: kind, ControllerManager: true})
	if err != nil {
		return nil, err
	}
	w := &kvWorld{name: kind, env: env}
	if w.c, err = clients.New(env.Config()); err != nil {
		return w, err
	}
	if w.cs, err = kubernetes.NewForConfig(env.Config()); err != nil {
		return w, err
	}
	if w.sub, err = virtapi.NewSubresourceClient(env.Config()); err != nil {
		return w, err
	}
	if env.Real != nil {
		w.handler = env.Real
	} else {
		w.handler = env.Emulator
	}
	return w, nil
}

// both runs scenario in each world and returns the outcomes by world.
func both(t *testing.T, scenario func(t *testing.T, w *kvWorld, ns string) string) map[string]string {
	t.Helper()
	if testing.Short() {
		t.Skip("conformance: starts two worlds")
	}
	out := map[string]string{}
	for _, w := range worlds {
		t.Run(w.name, func(t *testing.T) {
			out[w.name] = scenario(t, w, w.namespace(t))
		})
	}
	return out
}

// same fails unless every world had the same outcome.
func same(t *testing.T, outcomes map[string]string) {
	t.Helper()
	var first string
	for i, w := range worlds {
		if i == 0 {
			first = outcomes[w.name]
			continue
		}
		if outcomes[w.name] != first {
			t.Fatalf("the emulator and real KubeVirt disagree:\n%s: %s\n%s: %s", worlds[0].name, first, w.name, outcomes[w.name])
		}
	}
	t.Logf("both worlds: %s", first)
}

func (w *kvWorld) namespace(t *testing.T) string {
	ns := "c-" + strings.ToLower(rand.String(6))
	ctx := context.Background()
	if _, err := w.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	if w.env.Real != nil {
		eventually(t, 30*time.Second, "default service account", func() bool {
			_, err := w.cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err == nil
		})
	}
	return ns
}

// claim makes a PVC bound to a PV by hand (both statuses Bound), the same
// in both worlds.
func (w *kvWorld) claim(t *testing.T, ns, name string) {
	ctx := context.Background()
	pv := fixture.PV(ns+"-"+name, ns+"-"+name)
	pv.UID = ""
	pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: name}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeName:  pv.Name,
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if err := w.c.Create(ctx, pv); err != nil {
		t.Fatal(err)
	}
	if err := w.c.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	pv.Status.Phase = corev1.VolumeBound
	pvc.Status.Phase = corev1.ClaimBound
	_ = w.c.Status().Update(ctx, pv)
	_ = w.c.Status().Update(ctx, pvc)
	eventually(t, 20*time.Second, "claim bound", func() bool {
		var got corev1.PersistentVolumeClaim
		return w.c.Get(ctx, client.ObjectKeyFromObject(pvc), &got) == nil && got.Status.Phase == corev1.ClaimBound
	})
}

func guestSpec() kubevirtv1.VirtualMachineInstanceSpec {
	guest := resource.MustParse("64Mi")
	return kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{Memory: &kubevirtv1.Memory{Guest: &guest}}}
}

func (w *kvWorld) vm(t *testing.T, ns, name string) {
	strategy := kubevirtv1.RunStrategyAlways
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       kubevirtv1.VirtualMachineSpec{RunStrategy: &strategy, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: guestSpec()}},
	}
	if err := w.c.Create(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	w.running(t, ns, name)
}

func (w *kvWorld) standalone(t *testing.T, ns, name string) {
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: guestSpec()}
	if err := w.c.Create(context.Background(), vmi); err != nil {
		t.Fatal(err)
	}
	w.running(t, ns, name)
}

func (w *kvWorld) running(t *testing.T, ns, name string) {
	eventually(t, 90*time.Second, "VMI running", func() bool {
		vmi, err := w.vmi(ns, name)
		return err == nil && vmi.Status.Phase == kubevirtv1.Running
	})
}

func (w *kvWorld) vmi(ns, name string) (*kubevirtv1.VirtualMachineInstance, error) {
	var vmi kubevirtv1.VirtualMachineInstance
	err := w.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &vmi)
	return &vmi, err
}

func (w *kvWorld) status(ns, name, vol string) *kubevirtv1.VolumeStatus {
	vmi, err := w.vmi(ns, name)
	if err != nil {
		return nil
	}
	for i := range vmi.Status.VolumeStatus {
		if vmi.Status.VolumeStatus[i].Name == vol {
			return &vmi.Status.VolumeStatus[i]
		}
	}
	return nil
}

// answer is the HTTP status virt-api (or the emulator) gave, "202" on success.
func answer(err error) string {
	if err == nil {
		return "202"
	}
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return fmt.Sprint(se.Status().Code)
	}
	return "error: " + err.Error()
}

func eventually(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if f() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", d, what)
}
