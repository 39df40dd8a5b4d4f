package realkv

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// Real virt-controller live-migrates a VMI whose hot-plug nobody wants,
// the emulated virt-handler playing the source and the target node. While
// the migration runs (the copy held from converging) tether reports the
// orphan held by VMIMigrating and fix changes nothing; once virt-controller
// reports it Succeeded and the VMI runs on the target node, fix removes
// the orphan and nothing else.
func TestReal_migratingVMI_heldThenFixedOnTheTarget(t *testing.T) {
	migrationHold(t, testenv.Get(t))
}

// The same on KubeVirt v1.7 (hot-plug through the VMI route needs
// HotplugVolumes there).
func TestRealV17_migratingVMI_heldThenFixedOnTheTarget(t *testing.T) {
	migrationHold(t, startV17(t, "HotplugVolumes"))
}

func migrationHold(t *testing.T, env *testenv.Env) {
	if env.Real == nil || len(env.Real.Nodes()) < 2 {
		t.Fatal("a migration needs real KubeVirt with two nodes")
	}
	w := newWorldIn(t, env)
	w.sharedClaims("pvc-orphan")
	w.standaloneVMI("mover")
	w.hotplug(virtapi.VMI, "mover", "pvc-orphan")
	scope := tenant(t, env, w.NS, "mover", "pvc-orphan")
	before, err := w.vmi("mover")
	if err != nil {
		t.Fatal(err)
	}
	source := before.Status.NodeName

	env.Real.Handler.HoldMigration(w.NS, "mover", true)
	defer env.Real.Handler.HoldMigration(w.NS, "mover", false)
	mig := &kubevirtv1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{Name: "mover-away", Namespace: w.NS},
		Spec:       kubevirtv1.VirtualMachineInstanceMigrationSpec{VMIName: "mover"},
	}
	if err := w.C.Create(context.Background(), mig); err != nil {
		t.Fatalf("creating the migration: %v", err)
	}
	testenv.Eventually(t, 90*time.Second, "virt-controller runs the migration", func() (bool, error) {
		vmi, err := w.vmi("mover")
		if err != nil {
			return false, err
		}
		ms := vmi.Status.MigrationState
		return w.migrationPhase("mover-away") == kubevirtv1.MigrationRunning &&
			ms != nil && ms.StartTimestamp != nil && ms.TargetNode != "" && ms.TargetNode != source, nil
	})
	during, err := w.vmi("mover")
	if err != nil {
		t.Fatal(err)
	}
	target := during.Status.MigrationState.TargetNode

	f := only(t, audit(t, env, scope), "OrphanHotplugVolume", "pvc-orphan")
	if f.Action.Safe || f.Action.BlockedBy != "VMIMigrating" {
		t.Fatalf("while migrating: want the orphan held by VMIMigrating, got action %+v", f.Action)
	}
	if !contains(f.Evidence, source) || !contains(f.Evidence, target) {
		t.Fatalf("the evidence should name the source %s and the target %s: %q", source, target, f.Evidence)
	}
	r := tether(t, env, append([]string{"fix", "--apply"}, scope...)...)
	if strings.Contains(r.Stdout, "Applied") {
		t.Fatalf("fix acted on a migrating VMI: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	after, err := w.vmi("mover")
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(after.Spec, during.Spec) || after.Status.NodeName != source || w.Phase("mover", "pvc-orphan") != kubevirtv1.VolumeReady {
		t.Fatalf("fix changed the migrating VMI: node %s, orphan %s, spec volumes %v", after.Status.NodeName, w.Phase("mover", "pvc-orphan"), names(after.Spec.Volumes))
	}
	if p := w.migrationPhase("mover-away"); p != kubevirtv1.MigrationRunning {
		t.Fatalf("the held migration left Running: %s", p)
	}

	env.Real.Handler.HoldMigration(w.NS, "mover", false)
	testenv.Eventually(t, 90*time.Second, "the migration succeeds and the VMI runs on "+target, func() (bool, error) {
		vmi, err := w.vmi("mover")
		if err != nil {
			return false, err
		}
		_, labelled := vmi.Labels[kubevirtv1.MigrationTargetNodeNameLabel]
		ms := vmi.Status.MigrationState
		return w.migrationPhase("mover-away") == kubevirtv1.MigrationSucceeded && vmi.Status.NodeName == target &&
			ms != nil && ms.Completed && !labelled && vmi.Status.Phase == kubevirtv1.Running, nil
	})
	moved, err := w.vmi("mover")
	if err != nil {
		t.Fatal(err)
	}

	f = only(t, audit(t, env, scope), "OrphanHotplugVolume", "pvc-orphan")
	if !f.Action.Safe || f.Action.Type != "VMIRemoveVolume" {
		t.Fatalf("after the migration: want a safe VMIRemoveVolume, got action %+v", f.Action)
	}
	r = tether(t, env, append([]string{"fix", "--apply"}, scope...)...)
	if r.Code != 0 || !strings.Contains(r.Stdout, "Applied") {
		t.Fatalf("fix --apply after the migration: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	testenv.Eventually(t, 60*time.Second, "the orphan's status entry gone", func() (bool, error) {
		return w.Phase("mover", "pvc-orphan") == "", nil
	})
	final, err := w.vmi("mover")
	if err != nil {
		t.Fatal(err)
	}
	// Only the orphan left the spec; the VMI stays where it moved.
	want := moved.Spec.DeepCopy()
	want.Volumes = slices.DeleteFunc(want.Volumes, func(v kubevirtv1.Volume) bool { return v.Name == "pvc-orphan" })
	want.Domain.Devices.Disks = slices.DeleteFunc(want.Domain.Devices.Disks, func(d kubevirtv1.Disk) bool { return d.Name == "pvc-orphan" })
	if !equality.Semantic.DeepEqual(final.Spec, *want) {
		t.Fatalf("fix changed more than the orphan: volumes %v, want %v", names(final.Spec.Volumes), names(want.Volumes))
	}
	if final.Status.NodeName != target || final.Status.Phase != kubevirtv1.Running || final.Status.MigrationState.MigrationUID != moved.Status.MigrationState.MigrationUID {
		t.Fatalf("after fix: node %s phase %s migration %+v", final.Status.NodeName, final.Status.Phase, final.Status.MigrationState)
	}
	if fs := audit(t, env, scope); len(fs) != 0 {
		t.Fatalf("audit after fix: %+v", fs)
	}
}

func (w *world) migrationPhase(name string) kubevirtv1.VirtualMachineInstanceMigrationPhase {
	var m kubevirtv1.VirtualMachineInstanceMigration
	if err := w.C.Get(context.Background(), client.ObjectKey{Namespace: w.NS, Name: name}, &m); err != nil {
		return ""
	}
	return m.Status.Phase
}

func names(vols []kubevirtv1.Volume) []string {
	out := make([]string, 0, len(vols))
	for _, v := range vols {
		out = append(out, v.Name)
	}
	return out
}
