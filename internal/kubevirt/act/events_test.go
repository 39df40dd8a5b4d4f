package act_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/act"
)

// An object whose name is as long as Kubernetes allows (253) still gets its
// Event on the real API server: the Event name is shortened, not rejected.
func TestRecorder_longObjectNames(t *testing.T) {
	s := newScene(t)
	rec := &act.Recorder{Client: s.c, Component: "tether"}
	for _, n := range []int{1, 227, 228, 253} {
		name := strings.Repeat("c", n)
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceStorage: resource.MustParse("1Gi"),
				}},
			},
		}
		s.create(pvc)
		obj := drift.ObjectRef{Kind: "PersistentVolumeClaim", Name: name, UID: pvc.UID}
		f := drift.Finding{Check: "DanglingVolumeReference", Namespace: s.ns, Object: obj, Volume: "v",
			Action: drift.Action{Type: drift.None}}
		f.ID = drift.FindingID(f.Check, f.Namespace, f.Object, f.Volume)
		rec.Event(s.ctx, f, "TetherTest", corev1.EventTypeNormal, "long name")
		evs := s.events(f.ID)
		if len(evs) != 1 {
			t.Fatalf("object name of %d characters: %d Events recorded, want 1", n, len(evs))
		}
		ev := evs[0]
		if errs := validation.IsDNS1123Subdomain(ev.Name); len(errs) > 0 {
			t.Errorf("Event name %q: %v", ev.Name, errs)
		}
		if ev.InvolvedObject.Name != name || ev.InvolvedObject.UID != pvc.UID {
			t.Errorf("Event is about %s/%s, want the PVC of %d characters", ev.InvolvedObject.Name, ev.InvolvedObject.UID, n)
		}
	}
}

// The API server rejects a new-style core/v1 Event whose message is over
// 1024 characters or whose action is empty; the Recorder shortens and fills
// them so the Event is still written.
func TestRecorder_longMessageAndNoAction(t *testing.T) {
	s := newScene(t)
	rec := &act.Recorder{Client: s.c, Component: "tether"}
	obj := drift.ObjectRef{Kind: "VirtualMachine", Name: "vm-1", UID: "00000000-0000-0000-0000-000000000001"}
	f := drift.Finding{Check: "DanglingVolumeReference", Namespace: s.ns, Object: obj, Volume: "v"}
	f.ID = drift.FindingID(f.Check, f.Namespace, f.Object, f.Volume)
	msg := strings.Repeat("evidence ", 400) // 3600 characters
	rec.Event(s.ctx, f, "TetherTest", corev1.EventTypeWarning, msg)
	evs := s.events(f.ID)
	if len(evs) != 1 {
		t.Fatalf("%d Events recorded, want 1", len(evs))
	}
	if got := evs[0].Message; len(got) > 1024 || !strings.HasPrefix(msg, strings.TrimSuffix(got, " [cut]")) {
		t.Fatalf("message of %d characters, want the beginning of the original within 1024", len(got))
	}
	if evs[0].Action == "" {
		t.Fatal("Event has no action")
	}
}
