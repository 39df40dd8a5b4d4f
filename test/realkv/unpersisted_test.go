package realkv

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// The prediction, on real virt-api and virt-controller v1.9: with
// HotplugVolumes listed, a running VM has a VMI-level hot-plug (as a
// hand-made `virtctl addvolume` without --persist, or a tenant's CSI driver
// through the VMI route, makes it), a second one, and a VM-level one.
// tether reports the two VMI-level ones as UnpersistedHotplug and `tether
// doctor` names them; the second is then persisted with the finding's own
// remedy (the kubectl patch it prints, and the disk beside it). The gate
// goes (v1.9's defaults: the declarative hot-plug sync in effect): real
// virt-controller takes exactly the hot-plug tether still reported from the
// VMI, and keeps the VM-level and the persisted one.
func TestReal_unpersistedHotplug_predictsWhatTheGateChangeUnplugs(t *testing.T) {
	w := newWorld(t)
	setGates(t, w.c, []string{"HotplugVolumes"}, nil)
	w.claims("pvc-vmi", "pvc-keep", "pvc-vm")
	w.vm("owned")
	// virt-api reads the gates through its informer: the VMI route opens
	// for VM-owned VMIs once it has seen HotplugVolumes.
	testenv.Eventually(t, 60*time.Second, "the VMI-level route open for a VM-owned VMI", func() (bool, error) {
		sub, err := virtapi.NewSubresourceClient(w.env.Config)
		if err != nil {
			return false, err
		}
		return virtapi.AddVolume(context.Background(), sub, virtapi.VMI, w.ns, "owned", fixture.AddVolumeOptions("pvc-vmi")) == nil, nil
	})
	w.waitPhase("owned", "pvc-vmi", kubevirtv1.VolumeReady)
	w.hotplug(virtapi.VMI, "owned", "pvc-keep")
	w.hotplug(virtapi.VM, "owned", "pvc-vm")
	scope := []string{"-n", w.ns, "--checks", "UnpersistedHotplug"}

	fs := audit(t, w.env, scope)
	if len(fs) != 2 {
		t.Fatalf("want the two VMI-level hot-plugs reported, got %+v", fs)
	}
	for _, vol := range []string{"pvc-vmi", "pvc-keep"} {
		f := only(t, fs, "UnpersistedHotplug", vol)
		if f.Severity != "warning" || f.Action.BlockedBy != "KeptByHotplugVolumesGate" || !contains(f.Evidence, "HotplugVolumes on") {
			t.Fatalf("%s: %+v", vol, f)
		}
	}
	_, lines := doctor(t, w.env, "-n", w.ns)
	l, ok := lineOf(lines, "hotplug.unpersisted", "")
	if !ok || l.Status != "WARN" || !strings.Contains(l.Why, "volume pvc-vmi") || !strings.Contains(l.Why, "volume pvc-keep") || strings.Contains(l.Why, "volume pvc-vm ") {
		t.Fatalf("doctor's hotplug.unpersisted line: %+v", l)
	}

	// Persist pvc-keep as the remedy says: its patch of the VM spec, then
	// the VMI's disk beside it.
	keep := only(t, fs, "UnpersistedHotplug", "pvc-keep")
	m := regexp.MustCompile(`kubectl patch vm (\S+) -n (\S+) --type=json -p '(\[.*?\])'`).FindStringSubmatch(keep.Action.Remedy)
	if m == nil {
		t.Fatalf("remedy has no kubectl patch: %s", keep.Action.Remedy)
	}
	if out, err := w.env.Kubectl(t, "patch", "vm", m[1], "-n", m[2], "--type=json", "-p", m[3]); err != nil {
		t.Fatalf("the remedy's patch: %v\n%s", err, out)
	}
	vmi, err := w.vmi("owned")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range vmi.Spec.Domain.Devices.Disks {
		if d.Name == "pvc-keep" {
			disk, _ := json.Marshal(d)
			if out, err := w.env.Kubectl(t, "patch", "vm", "owned", "-n", w.ns, "--type=json", "-p", `[{"op":"add","path":"/spec/template/spec/domain/devices/disks/-","value":`+string(disk)+`}]`); err != nil {
				t.Fatalf("the disk's patch: %v\n%s", err, out)
			}
		}
	}
	testenv.Eventually(t, 30*time.Second, "only pvc-vmi reported once pvc-keep is persisted", func() (bool, error) {
		fs := audit(t, w.env, scope)
		return len(fs) == 1 && fs[0].Volume == "pvc-vmi", nil
	})

	// The gate goes: KubeVirt v1.9's defaults. A gate change alone wakes no
	// VM sync in virt-controller (its KubeVirt handler requeues the VMs
	// only for changed CBT selectors, vm.go handleKubeVirtUpdate); an
	// upgrade restarts it and syncs every VM. A touch of the VM's labels
	// stands for that sync.
	setGates(t, w.c, nil, nil)
	touched := 0
	testenv.Eventually(t, 90*time.Second, "virt-controller unplugs pvc-vmi", func() (bool, error) {
		touched++
		if touched%40 == 1 { // every 2 s
			w.patchVM("owned", fmt.Sprintf(`{"metadata":{"labels":{"tether.dev/test-sync":"%d"}}}`, touched))
		}
		v, err := w.vmi("owned")
		if err != nil {
			return false, err
		}
		for _, vol := range v.Spec.Volumes {
			if vol.Name == "pvc-vmi" {
				return false, nil
			}
		}
		return true, nil
	})
	time.Sleep(5 * time.Second)
	for _, vol := range []string{"pvc-keep", "pvc-vm"} {
		if p := w.phase("owned", vol); p != kubevirtv1.VolumeReady {
			t.Fatalf("the declarative sync took %s too (phase %q): the prediction was wrong", vol, p)
		}
	}
	if fs := audit(t, w.env, scope); len(fs) != 0 {
		t.Fatalf("after the gate change: %+v", fs)
	}
}
