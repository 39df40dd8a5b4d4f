package controller_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller"
	"github.com/tether-dev/tether/internal/controller/records"
	"github.com/tether-dev/tether/internal/crdinstall"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/report/reportapi"
	"github.com/tether-dev/tether/internal/testing/emulator"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/reportcrds"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// namespaceCfg enables the namespace loop's checks (and only them) in this
// world's namespace, with acting allowed: no dry run, a grace period of 0.
func (w *world) namespaceCfg() *config.Config {
	c := config.Default()
	c.Checks = map[string]config.CheckConfig{}
	for _, name := range check.InLoop(check.LoopNamespace) {
		c.Checks[name] = config.CheckConfig{Enabled: true}
	}
	c.Scope.Namespaces = []string{w.ns}
	return &c
}

// recordOf returns the record of check in this world's namespace, or nil.
func (w *world) recordOf(name string) *v1alpha1.Finding {
	w.t.Helper()
	var list v1alpha1.FindingList
	if err := w.c.List(w.ctx, &list, client.InNamespace(w.ns), client.MatchingLabels{v1alpha1.LabelCheck: name}); err != nil {
		w.t.Fatal(err)
	}
	if len(list.Items) > 1 {
		w.t.Fatalf("%d records of %s, want at most one", len(list.Items), name)
	}
	if len(list.Items) == 0 {
		return nil
	}
	return &list.Items[0]
}

func (w *world) waitRecordOf(name string, phase v1alpha1.Phase, reason string) *v1alpha1.Finding {
	w.t.Helper()
	var got *v1alpha1.Finding
	testenv.Eventually(w.t, 30*time.Second, fmt.Sprintf("record of %s %s %s", name, phase, reason), func() (bool, error) {
		got = w.recordOf(name)
		return got != nil && got.Status.Phase == phase && got.Status.Reason == reason, nil
	})
	return got
}

// pausedObj marks an object for the emulator to leave alone, so that the
// state the test writes stays.
func pausedObj[T client.Object](o T) T {
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[emulator.PausedAnnotation] = "true"
	o.SetAnnotations(a)
	return o
}

// metricLines scrapes the controller's metrics and returns the lines of
// metric whose labels hold every one of labels.
func metricLines(t *testing.T, addr, metric string, labels ...string) []string {
	t.Helper()
	code, body := scrape(t, "http://"+addr+"/metrics", "")
	if code != 200 {
		return nil
	}
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if !strings.HasPrefix(l, metric+"{") {
			continue
		}
		if !slices.ContainsFunc(labels, func(want string) bool { return !strings.Contains(l, want) }) {
			out = append(out, l)
		}
	}
	return out
}

// rulesIn lists the rule (check) of each result of a policy report.
func rulesIn(r *unstructured.Unstructured) []string {
	results, _, _ := unstructured.NestedSlice(r.Object, "results")
	var out []string
	for _, res := range results {
		rule, _, _ := unstructured.NestedString(res.(map[string]any), "rule")
		out = append(out, rule)
	}
	slices.Sort(out)
	return out
}

// The namespace loop, running as the config/rbac ServiceAccount: a VM that
// an interrupted volume migration left needing manual recovery (no VMI), a
// claim two VMs reference, and a running VMI whose unplugged volume stays
// Ready each get a Finding record under their subject, a TetherFindingObserved
// Event, a tether_findings series by check and severity and a PolicyReport
// result; acting is allowed (no dry run, grace 0) and the controller still
// acts on none of them. When the drift goes, the records are resolved and
// the results leave the report.
func TestController_namespaceLoop_reportsResolvesAndNeverActs(t *testing.T) {
	w := newWorld(t)
	w.env.InstallController(t, "rbac/policyreports")
	if err := crdinstall.Install(w.ctx, w.env.Config, reportcrds.For(reportapi.WGPolicy)...); err != nil {
		t.Fatal(err)
	}
	ns := fixture.InNamespace(w.ns)
	// InterruptedVolumeMigration: the VM as virt-controller leaves it once
	// its VMI went while the volumes were migrating.
	mig := kubevirtv1.UpdateVolumesStrategyMigration
	stopped := pausedObj(fixture.VM("stopped", ns, fixture.WithVolume("d", fixture.PVC("dst"))))
	stopped.Spec.UpdateVolumesStrategy = &mig
	// SharedClaimConflict: two stopped VMs on one ReadWriteOnce claim.
	first := pausedObj(fixture.VM("first", ns, fixture.WithVolume("data", fixture.PVC("shared"))))
	copied := pausedObj(fixture.VM("copy", ns, fixture.WithVolume("data", fixture.PVC("shared"))))
	// StuckHotplugPhase: a running VMI whose spec no longer lists hot-plug
	// v1 while its status keeps it Ready (virt-handler never unmounted it),
	// with its attachment pod still running: stuck for an unknown time.
	stuck := pausedObj(fixture.VMI("stuck", ns, fixture.Running(), fixture.OnNode("node-1"),
		fixture.WithHotplug("v1", fixture.StatusOnly(), fixture.Claim("scratch"), fixture.AttachPod("hp-volume-stuck"), fixture.VolumePhase(kubevirtv1.VolumeReady))))
	pod := fixture.AttachmentPod("hp-volume-stuck", ns, fixture.Claims("scratch"))
	w.create(fixture.PVC("src", ns), fixture.PVC("dst", ns), fixture.PVC("shared", ns), fixture.PVC("scratch", ns), stopped, first, copied, stuck, pod)
	vm := w.getVM("stopped")
	vm.Status.VolumeUpdateState = &kubevirtv1.VolumeUpdateState{VolumeMigrationState: &kubevirtv1.VolumeMigrationState{
		MigratedVolumes: []kubevirtv1.StorageMigratedVolumeInfo{{VolumeName: "d",
			SourcePVCInfo: &kubevirtv1.PersistentVolumeClaimInfo{ClaimName: "src"}, DestinationPVCInfo: &kubevirtv1.PersistentVolumeClaimInfo{ClaimName: "dst"}}}}}
	vm.Status.Conditions = []kubevirtv1.VirtualMachineCondition{{Type: kubevirtv1.VirtualMachineManualRecoveryRequired, Status: corev1.ConditionTrue,
		Reason: "VMI was removed or was final during the volume migration"}}
	if err := w.c.Status().Update(w.ctx, vm); err != nil {
		t.Fatal(err)
	}
	// What each object was before the controller started.
	objects := map[string]client.Object{
		"vm/stopped": &kubevirtv1.VirtualMachine{}, "vm/first": &kubevirtv1.VirtualMachine{}, "vm/copy": &kubevirtv1.VirtualMachine{},
		"vmi/stuck": &kubevirtv1.VirtualMachineInstance{}, "pod/hp-volume-stuck": &corev1.Pod{}, "pvc/shared": &corev1.PersistentVolumeClaim{},
		"pvc/src": &corev1.PersistentVolumeClaim{}, "pvc/dst": &corev1.PersistentVolumeClaim{}, "pvc/scratch": &corev1.PersistentVolumeClaim{},
	}
	read := func() map[string]string {
		out := map[string]string{}
		for key, o := range objects {
			_, name, _ := strings.Cut(key, "/")
			if err := w.c.Get(w.ctx, client.ObjectKey{Namespace: w.ns, Name: name}, o); err != nil {
				t.Fatal(err)
			}
			out[key] = o.GetResourceVersion()
		}
		return out
	}
	versions := read()

	addr := freeAddr(t)
	w.start(reportsOn(w.namespaceCfg(), reportapi.WGPolicy), func(o *controller.Options) { o.MetricsAddr, o.MetricsInsecure = addr, true })

	want := []struct {
		check, kind, subject, volume, severity string
		reason                                 drift.BlockReason
	}{
		{check.InterruptedVolumeMigration, "VirtualMachine", "stopped", "", "critical", check.ManualRecoveryRequired},
		{check.SharedClaimConflict, "PersistentVolumeClaim", "shared", "shared", "warning", check.ClaimReferencedTwice},
		{check.StuckHotplugPhase, "VirtualMachineInstance", "stuck", "v1", "info", check.WaitsForKubeVirt},
	}
	for _, c := range want {
		rec := w.waitRecordOf(c.check, v1alpha1.PhaseBlocked, string(c.reason))
		s := rec.Spec.Subject
		if s.Kind != c.kind || s.Name != c.subject || rec.Spec.Volume != c.volume || rec.Status.Severity != c.severity ||
			rec.Status.Action.Type != string(drift.None) || rec.Status.Action.Remedy == "" || len(rec.Status.Evidence) == 0 {
			t.Errorf("%s: record %+v %+v", c.check, rec.Spec, rec.Status)
		}
		if len(rec.OwnerReferences) != 1 || rec.OwnerReferences[0].Kind != c.kind || rec.OwnerReferences[0].Name != c.subject || rec.OwnerReferences[0].UID != s.UID {
			t.Errorf("%s: the record is owned by %+v, want its subject", c.check, rec.OwnerReferences)
		}
		if evs := w.eventsOn(c.subject, records.EventFindingObserved); len(evs) != 1 || evs[0].Labels["tether.dev/finding"] != rec.Spec.ID {
			t.Errorf("%s: %d %s Events on %s, want one labelled with the finding", c.check, len(evs), records.EventFindingObserved, c.subject)
		}
		testenv.Eventually(t, 45*time.Second, c.check+" in tether_findings", func() (bool, error) {
			lines := metricLines(t, addr, "tether_findings", `check="`+c.check+`"`, `phase="Blocked"`, `severity="`+c.severity+`"`)
			return len(lines) == 1 && strings.HasSuffix(lines[0], " 1"), nil
		})
	}
	testenv.Eventually(t, 30*time.Second, "a PolicyReport result per finding", func() (bool, error) {
		r := w.report()
		return r != nil && slices.Equal(rulesIn(r), []string{check.InterruptedVolumeMigration, check.SharedClaimConflict, check.StuckHotplugPhase}), nil
	})

	// Acting is allowed, and several passes later nothing was acted on: no
	// object changed, no action was counted, no Event but the records'.
	time.Sleep(5 * time.Second)
	if now := read(); fmt.Sprint(now) != fmt.Sprint(versions) {
		t.Errorf("the controller changed objects: before %v, after %v", versions, now)
	}
	for _, c := range want {
		if lines := metricLines(t, addr, "tether_actions_total", `check="`+c.check+`"`); len(lines) > 0 {
			t.Errorf("actions counted for %s: %v", c.check, lines)
		}
		if rec := w.recordOf(c.check); rec.Status.Attempts != 0 || rec.Status.LastAttempt != nil || rec.Status.Claim != "" {
			t.Errorf("%s: an attempt was made: %+v", c.check, rec.Status)
		}
	}
	var evs corev1.EventList
	if err := w.c.List(w.ctx, &evs, client.InNamespace(w.ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if strings.HasPrefix(e.Reason, "Tether") && e.Reason != records.EventFindingObserved {
			t.Errorf("Event %s on %s: %s", e.Reason, e.InvolvedObject.Name, e.Message)
		}
	}

	// The drift goes: the copy is deleted, the VM names its source claim
	// again and KubeVirt clears the condition, virt-handler unmounts v1.
	if err := w.c.Delete(w.ctx, copied); err != nil {
		t.Fatal(err)
	}
	vm = w.getVM("stopped")
	vm.Status.Conditions = nil
	if err := w.c.Status().Update(w.ctx, vm); err != nil {
		t.Fatal(err)
	}
	v := w.vmi("stuck")
	v.Status.VolumeStatus = nil
	if err := w.c.Update(w.ctx, v); err != nil {
		t.Fatal(err)
	}
	for _, c := range want {
		w.waitRecordOf(c.check, v1alpha1.PhaseResolved, "ConditionGone")
		testenv.Eventually(t, 45*time.Second, c.check+" resolved in tether_findings", func() (bool, error) {
			open := metricLines(t, addr, "tether_findings", `check="`+c.check+`"`, `phase="Blocked"`)
			resolved := metricLines(t, addr, "tether_findings", `check="`+c.check+`"`, `phase="Resolved"`, `severity="`+c.severity+`"`)
			return len(open) == 0 && len(resolved) == 1 && strings.HasSuffix(resolved[0], " 1"), nil
		})
	}
	w.waitReport("no report once every finding is resolved", nil)
}
