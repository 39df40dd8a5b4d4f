package realkv

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/realkubevirt"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// A volume migration cut short (kubevirt/kubevirt#12864, #13655;
// kubevirt/user-guide#840: "if for any reasons the VMI disappears, then the
// volume migration isn't retried anymore"): a running VM with
// updateVolumesStrategy Migration has its disk's claim changed from src to
// dst; real virt-controller records the migrated volume in the VM status,
// sets VolumesChange and its workload updater starts the migration (the
// KubeVirt CR allows LiveMigrate, as a volume migration needs); the
// emulated virt-handler holds the copy from converging; then the VM is
// stopped. Real virt-controller sets ManualRecoveryRequired
// (syncVolumeMigration, pkg/virt-controller/watch/vm/vm.go:1637-1645) and
// virt-api refuses to start the VM. tether reports InterruptedVolumeMigration
// naming src as the claim that holds the data, fix --apply changes
// nothing, and the patch tether's remedy gives is what real virt-controller
// takes to clear the condition.
func TestReal_interruptedVolumeMigration_namesTheSourceClaim(t *testing.T) {
	w := newWorld(t)
	w.liveMigrateWorkloads()
	w.claims("pvc-src", "pvc-dst")
	w.vmWithClaim("mover", "pvc-src", kubevirtv1.RunStrategyAlways)
	w.PatchVM("mover", `{"spec":{"updateVolumesStrategy":"Migration"}}`)
	w.running("mover")
	w.Env.Real.Handler.HoldMigration(w.NS, "mover", true)
	defer w.Env.Real.Handler.HoldMigration(w.NS, "mover", false)

	w.PatchVM("mover", `{"spec":{"template":{"spec":{"volumes":[{"name":"data","persistentVolumeClaim":{"claimName":"pvc-dst"}}]}}}}`)
	testenv.Eventually(t, 90*time.Second, "virt-controller migrates the volume of mover", func() (bool, error) {
		vmi, err := w.vmi("mover")
		if err != nil {
			return false, err
		}
		ms := vmi.Status.MigrationState
		return len(vmi.Status.MigratedVolumes) == 1 && ms != nil && ms.StartTimestamp != nil && !ms.Completed, nil
	})
	if vm := w.getVM("mover"); !vmConditionTrue(vm, kubevirtv1.VirtualMachineConditionType(kubevirtv1.VirtualMachineInstanceVolumesChange)) {
		t.Fatalf("setup: the VM should have VolumesChange True while its volume migrates: %+v", vm.Status.Conditions)
	}
	var migs kubevirtv1.VirtualMachineInstanceMigrationList
	if err := w.C.List(context.Background(), &migs, client.InNamespace(w.NS), client.MatchingLabels{kubevirtv1.VolumesUpdateMigration: "mover"}); err != nil || len(migs.Items) != 1 {
		t.Fatalf("setup: want the workload updater's one volume-update migration, got %d (%v)", len(migs.Items), err)
	}

	w.PatchVM("mover", `{"spec":{"runStrategy":"Halted"}}`)
	testenv.Eventually(t, 90*time.Second, "the VMI gone and ManualRecoveryRequired set", func() (bool, error) {
		_, err := w.vmi("mover")
		return err != nil && vmConditionTrue(w.getVM("mover"), kubevirtv1.VirtualMachineManualRecoveryRequired), nil
	})

	sub, err := virtapi.NewSubresourceClient(w.Env.Config)
	if err != nil {
		t.Fatal(err)
	}
	start := sub.Put().Namespace(w.NS).Resource("virtualmachines").Name("mover").SubResource("start").Body([]byte(`{}`)).Do(context.Background()).Error()
	if !apierrors.IsConflict(start) || !strings.Contains(start.Error(), "recovery required") {
		t.Fatalf("virt-api should refuse to start the VM with 409 recovery required, got %v", start)
	}

	scope := []string{"-n", w.NS}
	f := only(t, audit(t, w.Env, scope), check.InterruptedVolumeMigration, "")
	if f.Severity != "critical" || f.Object.Kind != "VirtualMachine" || f.Object.Name != "mover" || f.Action.Type != "None" {
		t.Fatalf("want a critical report-only finding on VM mover, got %+v", f)
	}
	if !contains(f.Evidence, "volume data: source claim pvc-src (exists) holds the consistent data; destination claim pvc-dst (exists) may be partly copied; the VM spec names pvc-dst") {
		t.Fatalf("the evidence should name pvc-src as the claim that holds the data: %q", f.Evidence)
	}

	gen := w.generation("mover")
	claims := w.claimVersions("pvc-src", "pvc-dst")
	fixChangesNothing(t, w.Env, scope)
	if w.generation("mover") != gen || w.claimVersions("pvc-src", "pvc-dst") != claims {
		t.Fatalf("fix --apply changed the VM or a claim")
	}
	if !vmConditionTrue(w.getVM("mover"), kubevirtv1.VirtualMachineManualRecoveryRequired) {
		t.Fatalf("ManualRecoveryRequired cleared after fix --apply")
	}

	// The remedy's patch, as an operator would apply it: real
	// virt-controller then clears the condition.
	m := regexp.MustCompile(`--type=json -p '([^']+)'`).FindStringSubmatch(f.Action.Remedy)
	if m == nil || !json.Valid([]byte(m[1])) {
		t.Fatalf("the remedy gives no JSON patch: %q", f.Action.Remedy)
	}
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "mover", Namespace: w.NS}}
	if err := w.C.Patch(context.Background(), vm, client.RawPatch(types.JSONPatchType, []byte(m[1]))); err != nil {
		t.Fatalf("the remedy's patch %s: %v", m[1], err)
	}
	testenv.Eventually(t, 30*time.Second, "virt-controller clears ManualRecoveryRequired", func() (bool, error) {
		return !vmConditionTrue(w.getVM("mover"), kubevirtv1.VirtualMachineManualRecoveryRequired), nil
	})
	noFinding(t, audit(t, w.Env, scope), "")
}

// liveMigrateWorkloads lets virt-controller's workload updater migrate
// VMIs (the KubeVirt CR's workloadUpdateStrategy, empty by default: "an
// empty list defaults to no automated workload updating"), which is what
// starts a volume migration, until the test ends.
func (w *world) liveMigrateWorkloads() {
	kv := &unstructured.Unstructured{}
	kv.SetAPIVersion("kubevirt.io/v1")
	kv.SetKind("KubeVirt")
	kv.SetNamespace(realkubevirt.Namespace)
	kv.SetName("kubevirt")
	patch := func(methods string) {
		p := `{"spec":{"workloadUpdateStrategy":{"workloadUpdateMethods":` + methods + `}}}`
		if err := w.C.Patch(context.Background(), kv, client.RawPatch(types.MergePatchType, []byte(p))); err != nil {
			w.T.Fatal(err)
		}
	}
	patch(`["LiveMigrate"]`)
	w.T.Cleanup(func() { patch(`null`) })
}

func (w *world) getVM(name string) *kubevirtv1.VirtualMachine {
	w.T.Helper()
	var vm kubevirtv1.VirtualMachine
	if err := w.C.Get(context.Background(), client.ObjectKey{Namespace: w.NS, Name: name}, &vm); err != nil {
		w.T.Fatal(err)
	}
	return &vm
}

func vmConditionTrue(vm *kubevirtv1.VirtualMachine, t kubevirtv1.VirtualMachineConditionType) bool {
	for _, c := range vm.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// claimVersions is the claims' resourceVersions, joined.
func (w *world) claimVersions(names ...string) string {
	w.T.Helper()
	out := ""
	for _, n := range names {
		var pvc corev1.PersistentVolumeClaim
		if err := w.C.Get(context.Background(), client.ObjectKey{Namespace: w.NS, Name: n}, &pvc); err != nil {
			w.T.Fatal(err)
		}
		out += n + "=" + pvc.ResourceVersion + " "
	}
	return out
}
