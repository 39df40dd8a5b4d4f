package controller

import (
	"context"
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// reconciler returns a hot-plug reconciler whose cache and live client are
// the same fake client.
func reconciler(t *testing.T, c client.Client, cfg *config.Config, p check.Policy) *HotplugReconciler {
	t.Helper()
	return &HotplugReconciler{Cache: c, Executor: &act.Executor{Client: c}, Policy: p, Records: testRecords(c, cfg)}
}

// Even when a configuration (or a caller) enables a check the hot-plug
// loop's snapshot cannot serve, the reconciler runs only the checks of its
// loop: a VMI volume whose claim is not in that snapshot is no dangling
// reference, and a hot-plug Detaching since its attachment pod was made 5
// minutes ago (under StuckHotplugPhase's grace; the namespace loop, which
// reads the pod, reports nothing) is not stuck "for an unknown time".
func TestReconcile_runsOnlyTheControllerChecks(t *testing.T) {
	vm := fixture.VM("vm", fixture.InNamespace("ns"), fixture.Running())
	vmi := fixture.VMI("vm", fixture.InNamespace("ns"), fixture.OwnedBy(vm), fixture.Running(), fixture.OnNode("node-1"), fixture.WithHotplug("v1"),
		fixture.WithHotplug("v2", fixture.VolumePhase(kubevirtv1.HotplugVolumeDetaching), fixture.AttachPod("hp-volume-new")))
	pod := fixture.AttachmentPod("hp-volume-new", fixture.InNamespace("ns"), fixture.CreatedAt(time.Now().Add(-5*time.Minute)),
		fixture.Labels(snapshot.AttachmentPodLabel, snapshot.AttachmentPodLabelValue))
	c := fakeClient(interceptor.Funcs{}, vm, vmi, pod)
	enabled := []string{check.OrphanHotplugVolume, check.DanglingVolumeReference, check.OrphanAttachmentPod, check.StuckHotplugPhase, check.TenantNodeDown}
	cfg := graceConfig(time.Hour, enabled...)
	p := check.DefaultPolicy()
	p.Checks = enabled
	r := reconciler(t, c, cfg, p)
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(vmi)}); err != nil {
		t.Fatal(err)
	}
	var list v1alpha1.FindingList
	if err := c.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) == 0 {
		t.Fatal("no record of the orphan hot-plug volume")
	}
	for _, f := range list.Items {
		if f.Spec.Check != check.OrphanHotplugVolume {
			t.Errorf("the controller ran %s: record %s", f.Spec.Check, f.Name)
		}
	}
}
