package emulator_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	virtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/testing/emulator"
)

func TestCRDsAndAPIServiceInstalled(t *testing.T) {
	e := needEnv(t)
	disc := e.cs.Discovery()
	want := map[string][]string{
		"kubevirt.io/v1":              {"virtualmachines", "virtualmachineinstances", "virtualmachineinstancemigrations", "kubevirts"},
		"cdi.kubevirt.io/v1beta1":     {"datavolumes"},
		"subresources.kubevirt.io/v1": {"virtualmachines/addvolume", "virtualmachines/removevolume", "virtualmachineinstances/addvolume", "virtualmachineinstances/removevolume"},
	}
	shortNames := map[string][]string{"virtualmachines": {"vm", "vms"}, "virtualmachineinstances": {"vmi", "vmis"},
		"virtualmachineinstancemigrations": {"vmim", "vmims"}, "datavolumes": {"dv", "dvs"}}
	for gv, resources := range want {
		list, err := disc.ServerResourcesForGroupVersion(gv)
		if err != nil {
			t.Fatalf("discovery of %s: %v", gv, err)
		}
		got := map[string]metav1.APIResource{}
		for _, r := range list.APIResources {
			got[r.Name] = r
		}
		for _, r := range resources {
			res, ok := got[r]
			if !ok {
				t.Errorf("%s: resource %s missing (have %v)", gv, r, got)
				continue
			}
			if sn := shortNames[r]; sn != nil && !slices.Equal(res.ShortNames, sn) {
				t.Errorf("%s: short names %v, want %v", r, res.ShortNames, sn)
			}
			if gv == "subresources.kubevirt.io/v1" && !slices.Equal(res.Verbs, []string{"update"}) {
				t.Errorf("%s: verbs %v, want [update]", r, res.Verbs)
			}
		}
	}
	as := &unstructured.Unstructured{}
	as.SetAPIVersion("apiregistration.k8s.io/v1")
	as.SetKind("APIService")
	if err := e.cl.Get(context.Background(), client.ObjectKey{Name: emulator.APIServiceName}, as); err != nil {
		t.Fatal(err)
	}
	svc, _, _ := unstructured.NestedString(as.Object, "spec", "service", "name")
	if svc != "virt-api" {
		t.Errorf("APIService service %q, want virt-api", svc)
	}
	kv := &virtv1.KubeVirt{}
	if err := e.cl.Get(context.Background(), client.ObjectKey{Namespace: "kubevirt", Name: "kubevirt"}, kv); err != nil {
		t.Fatalf("KubeVirt object: %v", err)
	}
	if kv.Status.Phase != virtv1.KubeVirtPhaseDeployed {
		t.Errorf("KubeVirt phase %q, want Deployed", kv.Status.Phase)
	}
}

func TestVMRunStrategyStartsAndStopsVMI(t *testing.T) {
	e := needEnv(t)
	ns := e.namespace(t)
	ctx := context.Background()
	start := time.Now()
	vm := e.vm(t, ns, "vm1")
	vmi := e.runningVMI(t, ns, "vm1")
	t.Logf("VM created -> VMI Running in %s", time.Since(start).Round(time.Millisecond))

	if ref := metav1.GetControllerOf(vmi); ref == nil || ref.UID != vm.UID || ref.Kind != "VirtualMachine" {
		t.Errorf("VMI controller ref %+v, want the VM", ref)
	}
	if vmi.Status.NodeName != "node-1" || vmi.Labels["app"] != "vm1" || vmi.Labels[virtv1.NodeNameLabel] != "node-1" {
		t.Errorf("VMI node %q labels %v", vmi.Status.NodeName, vmi.Labels)
	}
	root := hotplugStatus(vmi, "rootdisk")
	eventually(t, 2*time.Second, func() error {
		vmi = e.getVMI(t, ns, "vm1")
		if root = hotplugStatus(vmi, "rootdisk"); root == nil || root.Target == "" {
			return fmt.Errorf("volume status %+v", vmi.Status.VolumeStatus)
		}
		return nil
	})
	if root.HotplugVolume != nil || root.Target != "vda" || root.PersistentVolumeClaimInfo == nil || root.PersistentVolumeClaimInfo.ClaimName != "vm1-root" {
		t.Errorf("boot volume status %+v", root)
	}
	pods := &corev1.PodList{}
	if err := e.cl.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"kubevirt.io": "virt-launcher"}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 || !metav1.IsControlledBy(&pods.Items[0], vmi) || pods.Items[0].Spec.NodeName != "node-1" ||
		pods.Items[0].Status.Phase != corev1.PodRunning {
		t.Fatalf("launcher pods %+v", pods.Items)
	}
	eventually(t, 2*time.Second, func() error {
		got := e.getVM(t, ns, "vm1")
		if !got.Status.Ready || !got.Status.Created || got.Status.PrintableStatus != virtv1.VirtualMachineStatusRunning {
			return fmt.Errorf("VM status %+v", got.Status)
		}
		return nil
	})

	halted := virtv1.RunStrategyHalted
	patch := client.MergeFrom(vm.DeepCopy())
	vm.Spec.RunStrategy = &halted
	if err := e.cl.Patch(ctx, vm, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() error {
		err := e.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vm1"}, &virtv1.VirtualMachineInstance{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("VMI still there (%v)", err)
		}
		got := e.getVM(t, ns, "vm1")
		if got.Status.Ready || got.Status.Created || got.Status.PrintableStatus != virtv1.VirtualMachineStatusStopped {
			return fmt.Errorf("VM status %+v", got.Status)
		}
		return nil
	})
}
