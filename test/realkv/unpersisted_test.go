package realkv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
// HotplugVolumes listed, a running VM has three VMI-level hot-plugs (as a
// hand-made `virtctl addvolume` without --persist, or a tenant's CSI driver
// through the VMI route, makes them) and a VM-level one. tether reports the
// three as UnpersistedHotplug and `tether doctor` names them; fix --apply
// changes nothing without --persist-hotplugs; one is persisted by tether
// (a reviewed plan of --persist-hotplugs, cut to that hot-plug), one by
// hand with the finding's own remedy (the kubectl patch it prints, and the
// disk beside it). The gate goes (v1.9's defaults: the declarative hot-plug
// sync in effect): real virt-controller takes exactly the hot-plug tether
// still reported from the VMI, and keeps the VM-level and the two persisted.
func TestReal_unpersistedHotplug_predictsWhatTheGateChangeUnplugs(t *testing.T) {
	w := newWorld(t)
	setGates(t, w.C, []string{"HotplugVolumes"}, nil)
	w.claims("pvc-vmi", "pvc-keep", "pvc-hand", "pvc-vm")
	w.vm("owned")
	// virt-api reads the gates through its informer: the VMI route opens
	// for VM-owned VMIs once it has seen HotplugVolumes.
	testenv.Eventually(t, 60*time.Second, "the VMI-level route open for a VM-owned VMI", func() (bool, error) {
		sub, err := virtapi.NewSubresourceClient(w.Env.Config)
		if err != nil {
			return false, err
		}
		return virtapi.AddVolume(context.Background(), sub, virtapi.VMI, w.NS, "owned", fixture.AddVolumeOptions("pvc-vmi")) == nil, nil
	})
	w.WaitPhase("owned", "pvc-vmi", kubevirtv1.VolumeReady)
	w.hotplug(virtapi.VMI, "owned", "pvc-keep")
	w.hotplug(virtapi.VMI, "owned", "pvc-hand")
	w.hotplug(virtapi.VM, "owned", "pvc-vm")
	scope := []string{"-n", w.NS, "--checks", "UnpersistedHotplug"}

	fs := audit(t, w.Env, scope)
	if len(fs) != 3 {
		t.Fatalf("want the three VMI-level hot-plugs reported, got %+v", fs)
	}
	for _, vol := range []string{"pvc-vmi", "pvc-keep", "pvc-hand"} {
		f := only(t, fs, "UnpersistedHotplug", vol)
		if f.Severity != "warning" || f.Action.BlockedBy != "KeptByHotplugVolumesGate" || !contains(f.Evidence, "HotplugVolumes on") {
			t.Fatalf("%s: %+v", vol, f)
		}
	}
	_, lines := doctor(t, w.Env, "-n", w.NS)
	l, ok := lineOf(lines, "hotplug.unpersisted", "")
	if !ok || l.Status != "WARN" || !strings.Contains(l.Why, "volume pvc-vmi") || !strings.Contains(l.Why, "volume pvc-keep") || strings.Contains(l.Why, "volume pvc-vm ") {
		t.Fatalf("doctor's hotplug.unpersisted line: %+v", l)
	}

	// Without --persist-hotplugs, fix --apply changes nothing.
	if r := tether(t, w.Env, append([]string{"fix", "--apply"}, scope...)...); strings.Contains(r.Stdout, "Applied") || w.getVM("owned").Spec.Template.Spec.Volumes[len(w.getVM("owned").Spec.Template.Spec.Volumes)-1].Name != "pvc-vm" {
		t.Fatalf("fix --apply persisted without --persist-hotplugs:\n%s%s", r.Stdout, r.Stderr)
	}
	// pvc-keep is persisted by tether: the reviewed plan of
	// --persist-hotplugs, cut down to that one hot-plug, applied.
	r := tether(t, w.Env, append([]string{"fix", "-o", "json", "--persist-hotplugs"}, scope...)...)
	var plan map[string]any
	if err := json.Unmarshal([]byte(r.Stdout), &plan); err != nil {
		t.Fatalf("fix -o json: %v\n%s", err, r.Stdout)
	}
	var kept []any
	for _, it := range plan["items"].([]any) {
		if it.(map[string]any)["finding"].(map[string]any)["volume"] == "pvc-keep" {
			kept = append(kept, it)
		}
	}
	if len(kept) != 1 {
		t.Fatalf("the plan has no pvc-keep item: %s", r.Stdout)
	}
	plan["items"] = kept
	planFile := filepath.Join(t.TempDir(), "plan.json")
	data, _ := json.Marshal(plan)
	if err := os.WriteFile(planFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := tether(t, w.Env, append([]string{"fix", "--apply", "--persist-hotplugs", "--plan", planFile}, scope...)...); r.Code != 0 || !strings.Contains(r.Stdout, "Applied") {
		t.Fatalf("fix --apply --persist-hotplugs --plan: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// The same plan again: the live re-check finds it persisted, and refuses.
	if r := tether(t, w.Env, append([]string{"fix", "--apply", "--persist-hotplugs", "--plan", planFile}, scope...)...); strings.Contains(r.Stdout, "Applied") {
		t.Fatalf("a persisted hot-plug was persisted again:\n%s%s", r.Stdout, r.Stderr)
	}
	// pvc-hand is persisted by hand, as the finding's remedy says: its
	// patch of the VM spec, then the VMI's disk beside it.
	hand := only(t, fs, "UnpersistedHotplug", "pvc-hand")
	m := regexp.MustCompile(`kubectl patch vm (\S+) -n (\S+) --type=json -p '(\[.*?\])'`).FindStringSubmatch(hand.Action.Remedy)
	if m == nil {
		t.Fatalf("remedy has no kubectl patch: %s", hand.Action.Remedy)
	}
	if out, err := w.Env.Kubectl(t, "patch", "vm", m[1], "-n", m[2], "--type=json", "-p", m[3]); err != nil {
		t.Fatalf("the remedy's patch: %v\n%s", err, out)
	}
	vmi, err := w.vmi("owned")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range vmi.Spec.Domain.Devices.Disks {
		if d.Name == "pvc-hand" {
			disk, _ := json.Marshal(d)
			if out, err := w.Env.Kubectl(t, "patch", "vm", "owned", "-n", w.NS, "--type=json", "-p", `[{"op":"add","path":"/spec/template/spec/domain/devices/disks/-","value":`+string(disk)+`}]`); err != nil {
				t.Fatalf("the disk's patch: %v\n%s", err, out)
			}
		}
	}
	testenv.Eventually(t, 30*time.Second, "only pvc-vmi reported once the others are persisted", func() (bool, error) {
		fs := audit(t, w.Env, scope)
		return len(fs) == 1 && fs[0].Volume == "pvc-vmi", nil
	})

	// The gate goes: KubeVirt v1.9's defaults. A gate change alone wakes no
	// VM sync in virt-controller (its KubeVirt handler requeues the VMs
	// only for changed CBT selectors, vm.go handleKubeVirtUpdate); an
	// upgrade restarts it and syncs every VM. A touch of the VM's labels
	// stands for that sync.
	setGates(t, w.C, nil, nil)
	touched := 0
	testenv.Eventually(t, 90*time.Second, "virt-controller unplugs pvc-vmi", func() (bool, error) {
		touched++
		if touched%40 == 1 { // every 2 s
			w.PatchVM("owned", fmt.Sprintf(`{"metadata":{"labels":{"tether.dev/test-sync":"%d"}}}`, touched))
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
	for _, vol := range []string{"pvc-keep", "pvc-hand", "pvc-vm"} {
		if p := w.Phase("owned", vol); p != kubevirtv1.VolumeReady {
			t.Fatalf("the declarative sync took %s too (phase %q): the prediction was wrong", vol, p)
		}
	}
	if fs := audit(t, w.Env, scope); len(fs) != 0 {
		t.Fatalf("after the gate change: %+v", fs)
	}
}
