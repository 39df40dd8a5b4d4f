package emulator_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	virtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/controlplane"
	"github.com/tether-dev/tether/internal/testing/emulator"
)

// env is the control plane and emulator shared by the package's integration
// tests; nil when they cannot run.
var env *testEnv

type testEnv struct {
	cp  *controlplane.ControlPlane
	emu *emulator.Emulator
	cs  kubernetes.Interface
	cl  client.Client
	sub rest.Interface // subresources.kubevirt.io/v1 as admin
}

const migrationDuration = time.Second

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	code, err := runWithEnv(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "emulator tests:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func runWithEnv(m *testing.M) (int, error) {
	ctx := context.Background()
	start := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Options{ControllerManager: true})
	if err != nil {
		if strings.Contains(err.Error(), "make controlplane") {
			fmt.Fprintln(os.Stderr, "emulator tests: no control plane binaries, integration tests skip:", err)
			return m.Run(), nil
		}
		return 0, err
	}
	defer cp.Stop()
	log := logr.Discard()
	if os.Getenv("EMULATOR_TEST_LOG") != "" {
		log = logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.Level(-2)}))
	}
	emu, err := emulator.Start(ctx, emulator.Options{Config: cp.Config, MigrationDuration: migrationDuration, Log: log})
	if err != nil {
		return 0, err
	}
	defer emu.Stop()
	fmt.Fprintf(os.Stderr, "emulator tests: control plane and emulator up in %s\n", time.Since(start).Round(time.Millisecond))
	e := &testEnv{cp: cp, emu: emu}
	if e.cs, err = kubernetes.NewForConfig(cp.Config); err != nil {
		return 0, err
	}
	scheme, err := emulator.Scheme()
	if err != nil {
		return 0, err
	}
	if e.cl, err = client.New(cp.Config, client.Options{Scheme: scheme}); err != nil {
		return 0, err
	}
	if e.sub, err = virtapi.NewSubresourceClient(cp.Config); err != nil {
		return 0, err
	}
	env = e
	return m.Run(), nil
}

// needEnv skips integration tests in -short mode or without a control plane.
func needEnv(t *testing.T) *testEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs the control plane (skipped with -short)")
	}
	if env == nil {
		t.Skip("integration test: control plane binaries not available")
	}
	// Every test starts from KubeVirt's defaults and no pending faults.
	ctx := context.Background()
	if err := env.emu.SetFeatureGates(ctx); err != nil {
		t.Fatal(err)
	}
	if err := env.emu.SetDisabledFeatureGates(ctx); err != nil {
		t.Fatal(err)
	}
	if err := env.emu.SetIgnoreDryRun(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := env.emu.SetKubeVirtVersion(ctx, emulator.DefaultKubeVirtVersion); err != nil {
		t.Fatal(err)
	}
	env.emu.ClearFaults()
	for _, n := range env.emu.HandlersDown() {
		env.emu.SetHandlerDown(n, false)
	}
	return env
}

var nsSeq atomic.Int32

// namespace creates a fresh namespace for one test.
func (e *testEnv) namespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("t%d-%s", nsSeq.Add(1), strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())))
	if len(name) > 60 {
		name = name[:60]
	}
	name = strings.TrimRight(name, "-")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := e.cl.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return name
}

func (e *testEnv) pvc(t *testing.T, ns, name string) {
	t.Helper()
	p := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if err := e.cl.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// vm creates a running VM with a PVC boot disk "rootdisk" (claim name-root).
func (e *testEnv) vm(t *testing.T, ns, name string, mutate ...func(*virtv1.VirtualMachine)) *virtv1.VirtualMachine {
	t.Helper()
	e.pvc(t, ns, name+"-root")
	always := virtv1.RunStrategyAlways
	vm := &virtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: virtv1.VirtualMachineSpec{
			RunStrategy: &always,
			Template: &virtv1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: virtv1.VirtualMachineInstanceSpec{
					Domain: virtv1.DomainSpec{Devices: virtv1.Devices{Disks: []virtv1.Disk{{
						Name: "rootdisk", DiskDevice: virtv1.DiskDevice{Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusVirtio}},
					}}}},
					Volumes: []virtv1.Volume{{Name: "rootdisk", VolumeSource: virtv1.VolumeSource{
						PersistentVolumeClaim: &virtv1.PersistentVolumeClaimVolumeSource{
							PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: name + "-root"},
						},
					}}},
				},
			},
		},
	}
	for _, m := range mutate {
		m(vm)
	}
	if err := e.cl.Create(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	return vm
}

// runningVMI waits until the VMI of that name runs and returns it.
func (e *testEnv) runningVMI(t *testing.T, ns, name string) *virtv1.VirtualMachineInstance {
	t.Helper()
	var vmi *virtv1.VirtualMachineInstance
	eventually(t, 5*time.Second, func() error {
		vmi = &virtv1.VirtualMachineInstance{}
		if err := e.cl.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, vmi); err != nil {
			return err
		}
		if vmi.Status.Phase != virtv1.Running {
			return fmt.Errorf("VMI phase %q", vmi.Status.Phase)
		}
		return nil
	})
	return vmi
}

func (e *testEnv) getVM(t *testing.T, ns, name string) *virtv1.VirtualMachine {
	t.Helper()
	vm := &virtv1.VirtualMachine{}
	if err := e.cl.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, vm); err != nil {
		t.Fatal(err)
	}
	return vm
}

func (e *testEnv) getVMI(t *testing.T, ns, name string) *virtv1.VirtualMachineInstance {
	t.Helper()
	vmi := &virtv1.VirtualMachineInstance{}
	if err := e.cl.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, vmi); err != nil {
		t.Fatal(err)
	}
	return vmi
}

// eventually retries check every 20ms until it passes or timeout elapses.
func eventually(t *testing.T, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not reached within %s: %v", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// consistently fails if check ever fails during d.
func consistently(t *testing.T, d time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := check(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func addOpts(name, claim string) *virtv1.AddVolumeOptions {
	return &virtv1.AddVolumeOptions{
		Name: name,
		Disk: &virtv1.Disk{DiskDevice: virtv1.DiskDevice{Disk: &virtv1.DiskTarget{Bus: virtv1.DiskBusSCSI}}},
		VolumeSource: &virtv1.HotplugVolumeSource{PersistentVolumeClaim: &virtv1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
		}},
	}
}

// attachmentPods lists the hp-volume pods of a namespace.
func (e *testEnv) attachmentPods(t *testing.T, ns string) []corev1.Pod {
	t.Helper()
	list := &corev1.PodList{}
	if err := e.cl.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{"kubevirt.io": "hotplug-disk"}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func hotplugStatus(vmi *virtv1.VirtualMachineInstance, volume string) *virtv1.VolumeStatus {
	for i := range vmi.Status.VolumeStatus {
		if s := &vmi.Status.VolumeStatus[i]; s.Name == volume {
			return s
		}
	}
	return nil
}
