package emulator_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	virtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/emulator"
)

// attached waits until volume is hot-plugged into the VMI: Ready status with
// an attachment pod that exists, mounts claim, runs on the VMI's node and is
// controlled by the VMI's launcher pod.
func (e *testEnv) attached(t *testing.T, ns, vmiName, volume, claim string) (*virtv1.VirtualMachineInstance, *corev1.Pod) {
	t.Helper()
	var vmi *virtv1.VirtualMachineInstance
	var pod *corev1.Pod
	eventually(t, 5*time.Second, func() error {
		vmi = e.getVMI(t, ns, vmiName)
		st := hotplugStatus(vmi, volume)
		if st == nil || st.HotplugVolume == nil || st.HotplugVolume.AttachPodName == "" || st.Phase != virtv1.VolumeReady {
			return fmt.Errorf("volume status %+v", st)
		}
		pod = &corev1.Pod{}
		if err := e.cl.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: st.HotplugVolume.AttachPodName}, pod); err != nil {
			return err
		}
		if pod.UID != st.HotplugVolume.AttachPodUID {
			return fmt.Errorf("attach pod UID %s, status says %s", pod.UID, st.HotplugVolume.AttachPodUID)
		}
		if pod.Spec.NodeName != vmi.Status.NodeName {
			return fmt.Errorf("attach pod %s on %q, VMI on %q", pod.Name, pod.Spec.NodeName, vmi.Status.NodeName)
		}
		for _, v := range pod.Spec.Volumes {
			if v.Name == volume && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
				return nil
			}
		}
		return fmt.Errorf("attach pod %s does not mount %s", pod.Name, claim)
	})
	if pod.Labels["kubevirt.io"] != "hotplug-disk" || len(pod.Name) != len("hp-volume-")+5 {
		t.Errorf("attachment pod %s labels %v node %q", pod.Name, pod.Labels, pod.Spec.NodeName)
	}
	owner := metav1.GetControllerOf(pod)
	launcher := &corev1.Pod{}
	if owner == nil || owner.Kind != "Pod" {
		t.Fatalf("attachment pod owner %+v, want the launcher pod", owner)
	}
	if err := e.cl.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: owner.Name}, launcher); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(launcher, vmi) || launcher.Labels["kubevirt.io"] != "virt-launcher" {
		t.Errorf("launcher %s not controlled by the VMI", launcher.Name)
	}
	return vmi, pod
}

// detached waits until volume is gone from VMI spec and status and no
// attachment pod of the namespace mounts it.
func (e *testEnv) detached(t *testing.T, ns, vmiName, volume string) {
	t.Helper()
	eventually(t, 5*time.Second, func() error {
		vmi := e.getVMI(t, ns, vmiName)
		for _, v := range vmi.Spec.Volumes {
			if v.Name == volume {
				return fmt.Errorf("%s still in VMI spec", volume)
			}
		}
		if st := hotplugStatus(vmi, volume); st != nil {
			return fmt.Errorf("%s still in VMI status: %+v", volume, st)
		}
		for _, p := range e.attachmentPods(t, ns) {
			for _, v := range p.Spec.Volumes {
				if v.Name == volume && p.DeletionTimestamp == nil {
					return fmt.Errorf("attachment pod %s still mounts %s", p.Name, volume)
				}
			}
		}
		return nil
	})
}

func vmHasVolume(vm *virtv1.VirtualMachine, name string) (hot, found bool) {
	for _, v := range vm.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.Hotpluggable, true
		}
	}
	return false, false
}

func TestVMAddRemoveVolumeDeclarative(t *testing.T) {
	e := needEnv(t)
	ns := e.namespace(t)
	ctx := context.Background()
	e.vm(t, ns, "vm1")
	e.pvc(t, ns, "data1")
	e.runningVMI(t, ns, "vm1")

	start := time.Now()
	if err := virtapi.AddVolume(ctx, e.sub, virtapi.VM, ns, "vm1", addOpts("data1", "data1")); err != nil {
		t.Fatal(err)
	}
	if hot, found := vmHasVolume(e.getVM(t, ns, "vm1"), "data1"); !found || !hot {
		t.Fatalf("VM template: data1 found=%v hotpluggable=%v, want it there at once (declarative)", found, hot)
	}
	vmi, pod := e.attached(t, ns, "vm1", "data1", "data1")
	t.Logf("addvolume -> attachment pod and Ready status in %s", time.Since(start).Round(time.Millisecond))
	if st := hotplugStatus(vmi, "data1"); st.Target != "sda" || st.PersistentVolumeClaimInfo == nil {
		t.Errorf("hot-plug status %+v", st)
	}
	if root := hotplugStatus(vmi, "rootdisk"); root == nil || root.HotplugVolume != nil {
		t.Errorf("boot volume status %+v must not be hot-plugged", root)
	}

	start = time.Now()
	if err := virtapi.RemoveVolume(ctx, e.sub, virtapi.VM, ns, "vm1", &virtv1.RemoveVolumeOptions{Name: "data1"}); err != nil {
		t.Fatal(err)
	}
	e.detached(t, ns, "vm1", "data1")
	t.Logf("removevolume -> detached in %s", time.Since(start).Round(time.Millisecond))
	if _, found := vmHasVolume(e.getVM(t, ns, "vm1"), "data1"); found {
		t.Error("data1 still in VM template")
	}
	eventually(t, 2*time.Second, func() error {
		err := e.cl.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("attachment pod %s still there: %v", pod.Name, err)
		}
		return nil
	})
}

func TestVMAddRemoveVolumeWithHotplugGate(t *testing.T) {
	e := needEnv(t)
	ctx := context.Background()
	if err := e.emu.SetFeatureGates(ctx, emulator.GateHotplugVolumes); err != nil {
		t.Fatal(err)
	}
	ns := e.namespace(t)
	e.vm(t, ns, "vm1")
	e.pvc(t, ns, "data1")
	e.pvc(t, ns, "data2")
	e.runningVMI(t, ns, "vm1")

	if err := virtapi.AddVolume(ctx, e.sub, virtapi.VM, ns, "vm1", addOpts("data1", "data1")); err != nil {
		t.Fatal(err)
	}
	_, pod1 := e.attached(t, ns, "vm1", "data1", "data1")
	if err := virtapi.AddVolume(ctx, e.sub, virtapi.VM, ns, "vm1", addOpts("data2", "data2")); err != nil {
		t.Fatal(err)
	}
	vmi, pod2 := e.attached(t, ns, "vm1", "data2", "data2")
	// As in KubeVirt, one attachment pod holds all hot-plugged volumes and is
	// replaced when the set changes.
	eventually(t, 2*time.Second, func() error {
		vmi = e.getVMI(t, ns, "vm1")
		a, b := hotplugStatus(vmi, "data1"), hotplugStatus(vmi, "data2")
		if a == nil || b == nil || a.HotplugVolume == nil || a.HotplugVolume.AttachPodName != b.HotplugVolume.AttachPodName || a.Target == b.Target {
			return fmt.Errorf("statuses %+v %+v", a, b)
		}
		if pods := e.attachmentPods(t, ns); len(pods) != 1 || pods[0].Name != pod2.Name || pod2.Name == pod1.Name {
			return fmt.Errorf("attachment pods %d, want only %s", len(pods), pod2.Name)
		}
		return nil
	})
	eventually(t, 2*time.Second, func() error {
		vm := e.getVM(t, ns, "vm1")
		if len(vm.Status.VolumeRequests) != 0 {
			return fmt.Errorf("volume requests still pending: %+v", vm.Status.VolumeRequests)
		}
		if _, found := vmHasVolume(vm, "data2"); !found {
			return fmt.Errorf("data2 not in VM template")
		}
		return nil
	})

	if err := virtapi.RemoveVolume(ctx, e.sub, virtapi.VM, ns, "vm1", &virtv1.RemoveVolumeOptions{Name: "data1"}); err != nil {
		t.Fatal(err)
	}
	e.detached(t, ns, "vm1", "data1")
	e.attached(t, ns, "vm1", "data2", "data2")
}

func TestVMIRemoveVolumeOnVMOwnedVMINeedsHotplugGate(t *testing.T) {
	e := needEnv(t)
	ctx := context.Background()
	ns := e.namespace(t)
	e.vm(t, ns, "vm1")
	e.pvc(t, ns, "data1")
	e.runningVMI(t, ns, "vm1")
	if err := virtapi.AddVolume(ctx, e.sub, virtapi.VM, ns, "vm1", addOpts("data1", "data1")); err != nil {
		t.Fatal(err)
	}
	e.attached(t, ns, "vm1", "data1", "data1")

	err := virtapi.RemoveVolume(ctx, e.sub, virtapi.VMI, ns, "vm1", &virtv1.RemoveVolumeOptions{Name: "data1"})
	if !apierrors.IsBadRequest(err) || apierrors.ReasonForError(err) != metav1.StatusReasonBadRequest {
		t.Fatalf("VMI-level removevolume with the gate off: %v, want 400 BadRequest", err)
	}
	if want := fmt.Sprintf("VMI %s/vm1 is owned by a VM", ns); err.Error() != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}

	if err := e.emu.SetFeatureGates(ctx, emulator.GateHotplugVolumes); err != nil {
		t.Fatal(err)
	}
	if err := virtapi.RemoveVolume(ctx, e.sub, virtapi.VMI, ns, "vm1", &virtv1.RemoveVolumeOptions{Name: "data1"}); err != nil {
		t.Fatalf("VMI-level removevolume with HotplugVolumes on: %v", err)
	}
	e.detached(t, ns, "vm1", "data1")
	// The VM spec keeps the volume: this is the drift that tether reports.
	if _, found := vmHasVolume(e.getVM(t, ns, "vm1"), "data1"); !found {
		t.Error("VMI-level removevolume must not change the VM spec")
	}
}

func TestStandaloneVMIAddVolumeWithDefaultGates(t *testing.T) {
	e := needEnv(t)
	ctx := context.Background()
	ns := e.namespace(t)
	e.pvc(t, ns, "data1")
	vmi := &virtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "solo"},
		Spec: virtv1.VirtualMachineInstanceSpec{Volumes: []virtv1.Volume{{Name: "cloudinit", VolumeSource: virtv1.VolumeSource{
			CloudInitNoCloud: &virtv1.CloudInitNoCloudSource{UserData: "#cloud-config"},
		}}}},
	}
	if err := e.cl.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	e.runningVMI(t, ns, "solo")
	if err := virtapi.AddVolume(ctx, e.sub, virtapi.VMI, ns, "solo", addOpts("data1", "data1")); err != nil {
		t.Fatal(err)
	}
	e.attached(t, ns, "solo", "data1", "data1")
	if err := virtapi.RemoveVolume(ctx, e.sub, virtapi.VMI, ns, "solo", &virtv1.RemoveVolumeOptions{Name: "data1"}); err != nil {
		t.Fatal(err)
	}
	e.detached(t, ns, "solo", "data1")
}

func TestHotplugWaitsForPVC(t *testing.T) {
	e := needEnv(t)
	ctx := context.Background()
	ns := e.namespace(t)
	e.vm(t, ns, "vm1")
	e.runningVMI(t, ns, "vm1")
	if err := virtapi.AddVolume(ctx, e.sub, virtapi.VM, ns, "vm1", addOpts("late", "late-claim")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Second, func() error {
		st := hotplugStatus(e.getVMI(t, ns, "vm1"), "late")
		if st == nil || st.Phase != virtv1.VolumePending || st.Reason != "FailedPvcNotFound" || st.HotplugVolume == nil || st.HotplugVolume.AttachPodName != "" {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	if pods := e.attachmentPods(t, ns); len(pods) != 0 {
		t.Fatalf("attachment pod for a missing PVC: %v", pods[0].Name)
	}
	e.pvc(t, ns, "late-claim")
	e.attached(t, ns, "vm1", "late", "late-claim")
}

func TestVMStartedWithHotpluggableVolumeAttachesIt(t *testing.T) {
	e := needEnv(t)
	ns := e.namespace(t)
	e.pvc(t, ns, "data1")
	e.vm(t, ns, "vm1", func(vm *virtv1.VirtualMachine) {
		spec := &vm.Spec.Template.Spec
		spec.Volumes = append(spec.Volumes, virtv1.Volume{Name: "data1", VolumeSource: virtv1.VolumeSource{
			PersistentVolumeClaim: &virtv1.PersistentVolumeClaimVolumeSource{
				PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data1"}, Hotpluggable: true,
			},
		}})
		spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, virtv1.Disk{Name: "data1"})
	})
	e.runningVMI(t, ns, "vm1")
	vmi, _ := e.attached(t, ns, "vm1", "data1", "data1")
	if root := hotplugStatus(vmi, "rootdisk"); root == nil || root.HotplugVolume != nil {
		t.Errorf("boot volume status %+v", root)
	}
}
