package emulator_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	virtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/emulator"
)

func (e *testEnv) kubeVirt(t *testing.T) *virtv1.KubeVirt {
	t.Helper()
	kv := &virtv1.KubeVirt{}
	if err := e.cl.Get(context.Background(), client.ObjectKey{Namespace: "kubevirt", Name: "kubevirt"}, kv); err != nil {
		t.Fatal(err)
	}
	return kv
}

// The KubeVirt object reports the version the emulator plays, as
// virt-operator reports the version it deployed; a test can change it.
func TestKubeVirtReportsItsVersion(t *testing.T) {
	e := needEnv(t)
	if kv := e.kubeVirt(t); kv.Status.ObservedKubeVirtVersion != emulator.DefaultKubeVirtVersion || kv.Status.TargetKubeVirtVersion != emulator.DefaultKubeVirtVersion {
		t.Fatalf("observed %q, target %q, want %s", kv.Status.ObservedKubeVirtVersion, kv.Status.TargetKubeVirtVersion, emulator.DefaultKubeVirtVersion)
	}
	ctx := context.Background()
	if err := e.emu.SetKubeVirtVersion(ctx, "v0.48.0"); err != nil {
		t.Fatal(err)
	}
	if kv := e.kubeVirt(t); kv.Status.ObservedKubeVirtVersion != "v0.48.0" || kv.Status.Phase != virtv1.KubeVirtPhaseDeployed {
		t.Fatalf("observed %q phase %q, want v0.48.0 Deployed", kv.Status.ObservedKubeVirtVersion, kv.Status.Phase)
	}
	if err := e.emu.SetKubeVirtVersion(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if v := e.kubeVirt(t).Status.ObservedKubeVirtVersion; v != "" {
		t.Fatalf("observed %q after clearing", v)
	}
}

// The fault mode plays virt-api before v0.49 (KubeVirt PR 6931), whose
// volume options had no dryRun field: a "dry run" really adds or removes
// the volume, at VM and at VMI level, and any dryRun value is accepted.
func TestIgnoreDryRunAppliesTheDryRun(t *testing.T) {
	e := needEnv(t)
	ctx := context.Background()
	if err := e.emu.SetFeatureGates(ctx, emulator.GateHotplugVolumes); err != nil {
		t.Fatal(err)
	}
	if err := e.emu.SetIgnoreDryRun(ctx, true); err != nil {
		t.Fatal(err)
	}
	if e.kubeVirt(t).Annotations[emulator.IgnoreDryRunAnnotation] != "true" {
		t.Fatal("the fault mode is not shown on the KubeVirt object")
	}
	ns := e.namespace(t)
	e.vm(t, ns, "vm1")
	e.pvc(t, ns, "data1")
	e.pvc(t, ns, "data2")
	e.runningVMI(t, ns, "vm1")

	// VM-level "dry run" addvolume, then "dry run" removevolume.
	o := addOpts("data1", "data1")
	o.DryRun = virtapi.DryRunAll
	if err := virtapi.AddVolume(ctx, e.sub, virtapi.VM, ns, "vm1", o); err != nil {
		t.Fatal(err)
	}
	e.attached(t, ns, "vm1", "data1", "data1")
	if _, found := vmHasVolume(e.getVM(t, ns, "vm1"), "data1"); !found {
		t.Fatal("VM-level dry-run addvolume did not reach the VM spec")
	}
	if err := virtapi.RemoveVolume(ctx, e.sub, virtapi.VM, ns, "vm1", &virtv1.RemoveVolumeOptions{Name: "data1", DryRun: []string{"Some"}}); err != nil {
		t.Fatalf("an unknown dryRun value is dropped unread: %v", err)
	}
	e.detached(t, ns, "vm1", "data1")

	// VMI-level "dry run" addvolume, then "dry run" removevolume.
	o = addOpts("data2", "data2")
	o.DryRun = virtapi.DryRunAll
	if err := virtapi.AddVolume(ctx, e.sub, virtapi.VMI, ns, "vm1", o); err != nil {
		t.Fatal(err)
	}
	e.attached(t, ns, "vm1", "data2", "data2")
	if err := virtapi.RemoveVolume(ctx, e.sub, virtapi.VMI, ns, "vm1", &virtv1.RemoveVolumeOptions{Name: "data2", DryRun: virtapi.DryRunAll}); err != nil {
		t.Fatal(err)
	}
	e.detached(t, ns, "vm1", "data2")

	// Off again: a dry run changes nothing.
	if err := e.emu.SetIgnoreDryRun(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := virtapi.AddVolume(ctx, e.sub, virtapi.VMI, ns, "vm1", o); err != nil {
		t.Fatal(err)
	}
	consistently(t, 300*time.Millisecond, func() error {
		if st := hotplugStatus(e.getVMI(t, ns, "vm1"), "data2"); st != nil {
			return fmt.Errorf("a honoured dry run attached data2: %+v", st)
		}
		return nil
	})
}
