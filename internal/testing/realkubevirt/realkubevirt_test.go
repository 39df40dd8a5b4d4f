package realkubevirt_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/testing/controlplane"
	"github.com/tether-dev/tether/internal/testing/realkubevirt"
)

var (
	world *realkubevirt.KubeVirt
	cp    *controlplane.ControlPlane
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if testing.Short() {
		return m.Run()
	}
	ctx := context.Background()
	var err error
	cp, err = controlplane.Start(ctx, controlplane.Options{
		ControllerManager: true, ServiceAccountAdmission: true,
		Controllers: append(controlplane.DefaultControllers, "persistentvolume-binder-controller"),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cp.Stop()
	dir := os.Getenv("REALKUBEVIRT_TEST_DIR") // kept for reading logs after a failure
	if dir == "" {
		dir, _ = os.MkdirTemp("", "realkubevirt-")
		defer os.RemoveAll(dir)
	}
	world, err = realkubevirt.Start(ctx, realkubevirt.Options{Config: cp.Config, Dir: dir, Nodes: []string{"node-1", "node-2"}, LogVerbosity: 3})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer world.Stop()
	return m.Run()
}

var vmGVR = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}
var vmiGVR = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}

func TestVMRunsAndHotplugFollowsTheLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cp.Config)
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	ns := "smoke"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "default service account", func() bool {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}, nil)
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vm := map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": "vm1", "namespace": ns},
		"spec": map[string]any{
			"runStrategy": "Always",
			"template": map[string]any{"spec": map[string]any{
				"domain": map[string]any{
					"devices": map[string]any{"disks": []any{map[string]any{"name": "data", "disk": map[string]any{"bus": "scsi"}}}},
					"memory":  map[string]any{"guest": "64Mi"},
				},
				"volumes": []any{map[string]any{"name": "data", "persistentVolumeClaim": map[string]any{"claimName": "data", "hotpluggable": true}}},
			}},
		},
	}
	if _, err := dyn.Resource(vmGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: vm}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last string
	eventually(t, 90*time.Second, "VMI Running with the hot-plug Ready", func() bool {
		u, err := dyn.Resource(vmiGVR).Namespace(ns).Get(ctx, "vm1", metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false
		}
		vmi := &kubevirtv1.VirtualMachineInstance{}
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, vmi)
		last = fmt.Sprintf("phase %s volumes %+v conditions %+v", vmi.Status.Phase, vmi.Status.VolumeStatus, vmi.Status.Conditions)
		if pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
			for _, p := range pods.Items {
				var vols []string
				for _, v := range p.Spec.Volumes {
					vols = append(vols, v.Name)
				}
				var cs []string
				for _, c := range p.Status.ContainerStatuses {
					cs = append(cs, fmt.Sprintf("%s ready=%v running=%v", c.Name, c.Ready, c.State.Running != nil))
				}
				last += fmt.Sprintf("\npod %s node=%q phase=%s volumes=%v containers=%v", p.Name, p.Spec.NodeName, p.Status.Phase, vols, cs)
			}
		}
		if evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
			for _, e := range evs.Items {
				last += fmt.Sprintf("\nevent %s %s: %s", e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
		for _, s := range vmi.Status.VolumeStatus {
			if s.Name == "data" && s.Phase == kubevirtv1.VolumeReady {
				return vmi.Status.Phase == kubevirtv1.Running
			}
		}
		return false
	}, func() string { return last })
	t.Log(last)
}

func eventually(t *testing.T, d time.Duration, what string, f func() bool, state func() string) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if f() {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	if state != nil {
		t.Fatalf("timed out waiting for %s; last seen: %s", what, state())
	}
	t.Fatalf("timed out waiting for %s", what)
}
