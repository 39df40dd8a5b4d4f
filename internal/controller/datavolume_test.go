package controller_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// The hot-plug loop decides as `tether audit` does on one world, for the
// one fact OrphanHotplugVolume reads of DataVolumes: a DataVolume of the
// VM's dataVolumeTemplates that is not ready stops virt-controller's VM
// sync before its hot-plug step (vm.go:3284-3295), so a VMI-only hot-plug
// the declarative sync should remove stays, and the finding is a warning
// that says why. The controller's record must say what the audit says.
// Once the DataVolume is ready again, the sync goes on and the hot-plug
// goes.
func TestController_hotplugLoopReadsTheTemplateDataVolumes_asTheAuditDoes(t *testing.T) {
	w := newWorld(t)
	dv := fixture.DataVolume("root-dv", fixture.InNamespace(w.ns))
	dv.UID = ""
	if err := w.c.Create(w.ctx, dv); err != nil {
		t.Fatal(err)
	}
	setDVPhase := func(p cdiv1.DataVolumePhase) {
		t.Helper()
		var cur cdiv1.DataVolume
		if err := w.c.Get(w.ctx, client.ObjectKeyFromObject(dv), &cur); err != nil {
			t.Fatal(err)
		}
		cur.Status.Phase = p
		if err := w.c.Status().Update(w.ctx, &cur); err != nil {
			t.Fatal(err)
		}
	}
	setDVPhase(cdiv1.Succeeded)
	vm := fixture.VM("vm-dv", fixture.Running(), fixture.InNamespace(w.ns), fixture.WithDataVolumeTemplate("root-dv"))
	vm.UID = ""
	if err := w.c.Create(w.ctx, vm); err != nil {
		t.Fatal(err)
	}
	w.waitVMI("vm-dv", "running", func(v *kubevirtv1.VirtualMachineInstance) bool { return v.Status.Phase == kubevirtv1.Running })
	w.orphan("vm-dv", "pvc-dv") // a VMI-only hot-plug
	// The DataVolume is being rebuilt; then HotplugVolumes goes, and the
	// declarative sync should remove the hot-plug, but the VM's sync stops.
	setDVPhase(cdiv1.ImportInProgress)
	w.declarativeOnly()

	cfg := w.cfg(time.Hour)
	w.start(cfg)
	policy, err := cfg.Policy()
	if err != nil {
		t.Fatal(err)
	}
	auditSays := func() drift.Finding {
		t.Helper()
		snap, err := observe.Observe(w.ctx, w.c, observe.Options{Namespace: w.ns})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range check.Run(snap, policy, time.Now()) {
			if f.Check == check.OrphanHotplugVolume && f.Volume == "pvc-dv" {
				return f
			}
		}
		t.Fatal("the audit has no OrphanHotplugVolume finding for pvc-dv")
		return drift.Finding{}
	}
	agree := func(what string) {
		t.Helper()
		// The audit is asked again each time: both must agree on the world
		// as it is at one moment (the emulator may still settle it).
		testenv.Eventually(t, 30*time.Second, "the controller's record says what the audit says: "+what, func() (bool, error) {
			want := auditSays()
			rec := w.finding("vm-dv", "pvc-dv")
			if rec == nil {
				return false, fmt.Errorf("no record; the audit says %s %s: %s", want.Severity, want.Action.BlockedBy, want.Message)
			}
			if rec.Status.Severity != string(want.Severity) || rec.Status.Action.BlockedBy != string(want.Action.BlockedBy) || rec.Status.Message != want.Message {
				return false, fmt.Errorf("the record says %s %s: %s; the audit says %s %s: %s", rec.Status.Severity, rec.Status.Action.BlockedBy, rec.Status.Message,
					want.Severity, want.Action.BlockedBy, want.Message)
			}
			return true, nil
		})
	}
	if f := auditSays(); f.Severity != drift.SeverityWarning || !strings.Contains(f.Message, "DataVolume "+w.ns+"/root-dv") {
		t.Fatalf("setup: the audit should warn of the DataVolume that stops the sync: %+v", f)
	}
	agree("a DataVolume of the VM's templates not ready (warning)")

	setDVPhase(cdiv1.Succeeded)
	testenv.Eventually(t, 30*time.Second, "the emulated virt-controller syncs and removes the hot-plug", func() (bool, error) {
		return !lists(w.vmi("vm-dv"), "pvc-dv"), nil
	})
}
