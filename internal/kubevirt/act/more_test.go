package act_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/testing/emulator"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// The owner persists the volume into the VM spec between plan and apply (a
// VM-level addvolume of the same volume): it is wanted again, nothing happens.
func TestApply_volumeReAddedToVMSpecAfterPlan_refused(t *testing.T) {
	s := newScene(t)
	s.runningVM("node-r")
	s.hotplug(virtapi.VMI, "node-r", "pvc-r")
	f := s.plan(policy(), s.tenant(), "node-r", "pvc-r")

	opts := fixture.AddVolumeOptions("pvc-r")
	if err := virtapi.AddVolume(s.ctx, s.sub, virtapi.VM, s.ns, "node-r", opts); err != nil {
		t.Fatalf("VM-level addvolume: %v", err)
	}
	waitVMSpecLists(s, "node-r", "pvc-r")

	r := s.executor(policy(), s.tenant()).Apply(s.ctx, f, act.Evidence{})
	if r.Outcome != drift.Refused || !strings.Contains(r.Message, "no longer holds") {
		t.Fatalf("want Refused (wanted again), got %s: %s", r.Outcome, r.Message)
	}
	if !hasHotplug(s.vmi("node-r"), "pvc-r") {
		t.Fatal("the volume was touched")
	}
}

// An attachment pod that its VMI no longer references is deleted only on
// request, with a UID/resourceVersion precondition; while a VMI lists a
// volume on the pod's claim it is refused.
func TestApply_orphanAttachmentPod(t *testing.T) {
	s := newScene(t)
	s.runningVM("node-p")
	s.hotplug(virtapi.VMI, "node-p", "pvc-listed")
	vmi := s.vmi("node-p")
	// Keep the emulator from tidying up the pods we plant.
	vmi.Annotations = map[string]string{emulator.PausedAnnotation: "true"}
	if err := s.c.Update(s.ctx, vmi); err != nil {
		t.Fatal(err)
	}
	stray := fixture.AttachmentPod("hp-volume-stray", fixture.Claims("pvc-stray"), fixture.OwnedBy(vmi))
	busy := fixture.AttachmentPod("hp-volume-busy", fixture.Claims("pvc-listed"), fixture.OwnedBy(vmi))
	stray.Spec.NodeName, busy.Spec.NodeName = "", ""
	s.create(stray, busy)

	p := policy()
	p.MinAttachmentPodAge = time.Millisecond
	time.Sleep(10 * time.Millisecond)
	snap, err := observe.Observe(s.ctx, s.c, observe.Options{Namespace: s.ns})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]drift.Finding{}
	for _, f := range check.Run(snap, p, time.Now()) {
		if f.Check == check.OrphanAttachmentPod {
			byName[f.Object.Name] = f
		}
	}
	if f := byName["hp-volume-stray"]; f.Action.Safe || f.Action.BlockedBy != drift.NotRequested {
		t.Fatalf("without the request: want blocked by %s, got %+v", drift.NotRequested, f.Action)
	}
	if f := byName["hp-volume-busy"]; f.Action.Safe || f.Action.BlockedBy != check.VolumeStillListed {
		t.Fatalf("busy pod: want blocked by %s, got %+v", check.VolumeStillListed, f.Action)
	}

	p.DeleteAttachmentPods = true
	for _, f := range check.Run(snap, p, time.Now()) {
		if f.Check == check.OrphanAttachmentPod && f.Object.Name == "hp-volume-stray" {
			r := s.executor(p, observe.Options{}).Apply(s.ctx, f, act.Evidence{})
			if r.Outcome != drift.Applied {
				t.Fatalf("want Applied, got %s: %s (%v)", r.Outcome, r.Message, r.Err)
			}
		}
	}
	var pod corev1.Pod
	err = s.c.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: "hp-volume-stray"}, &pod)
	if !apierrors.IsNotFound(err) && pod.DeletionTimestamp == nil {
		t.Fatalf("stray pod not deleted: %v", err)
	}
	if err := s.c.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: "hp-volume-busy"}, &pod); err != nil || pod.DeletionTimestamp != nil {
		t.Fatalf("busy pod touched: %v", err)
	}
}
