package protect_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/protect"
	"github.com/tether-dev/tether/internal/protect/inuse"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// TestAdmit: table named "state -> outcome".
func TestAdmit(t *testing.T) {
	since := metav1.NewTime(fixture.Epoch())
	deleting := protect.ObjectState{Deleting: true, Since: since}
	unreadable := protect.ObjectState{Err: errors.New("connection refused")}
	pvc, dv := pvcRef("claim"), inuse.Ref{Kind: inuse.KindDataVolume, Namespace: "default", Name: "claim"}
	uses := func(claims ...string) *kubevirtv1.VirtualMachine { return usingVMUnit("vm", claims...) }
	templated := uses()
	templated.Spec.DataVolumeTemplates = []kubevirtv1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: "claim"}}}
	dvVolume := fixture.VM("vm", fixture.WithVolume("disk", fixture.DataVolume("claim")))
	terminatingVM := uses("claim")
	terminatingVM.DeletionTimestamp = &since

	create := func(vm *kubevirtv1.VirtualMachine) protect.VMWrite {
		return protect.VMWrite{Operation: admissionv1.Create, New: vm}
	}
	update := func(old, vm *kubevirtv1.VirtualMachine) protect.VMWrite {
		return protect.VMWrite{Operation: admissionv1.Update, Old: old, New: vm}
	}
	cases := []struct {
		name    string
		w       protect.VMWrite
		covered bool
		states  map[inuse.Ref]protect.ObjectState
		refused []inuse.Ref
		unknown []inuse.Ref
	}{
		{name: "create, claim being deleted -> refused", w: create(uses("claim")), covered: true, states: map[inuse.Ref]protect.ObjectState{pvc: deleting}, refused: []inuse.Ref{pvc}},
		{name: "create, claim present -> allowed", w: create(uses("claim")), covered: true},
		{name: "create, claim missing -> allowed (a VM may come before its disk)", w: create(uses("claim")), covered: true},
		{name: "create, claim being deleted, namespace not covered -> allowed", w: create(uses("claim")), states: map[inuse.Ref]protect.ObjectState{pvc: deleting}},
		{name: "create, claim unreadable -> allowed, unknown", w: create(uses("claim")), covered: true, states: map[inuse.Ref]protect.ObjectState{pvc: unreadable}, unknown: []inuse.Ref{pvc}},
		{name: "create, the claim's DataVolume being deleted -> refused", w: create(uses("claim")), covered: true, states: map[inuse.Ref]protect.ObjectState{dv: deleting}, refused: []inuse.Ref{dv}},
		{name: "create, dataVolume volume being deleted -> refused", w: create(dvVolume), covered: true, states: map[inuse.Ref]protect.ObjectState{dv: deleting}, refused: []inuse.Ref{dv}},
		{name: "create, dataVolumeTemplate named like a DataVolume being deleted -> refused", w: create(templated), covered: true, states: map[inuse.Ref]protect.ObjectState{dv: deleting}, refused: []inuse.Ref{dv}},
		{name: "update adding the reference, claim being deleted -> refused", w: update(uses(), uses("claim")), covered: true, states: map[inuse.Ref]protect.ObjectState{pvc: deleting}, refused: []inuse.Ref{pvc}},
		{name: "update keeping the reference, claim being deleted -> allowed", w: update(uses("claim"), uses("claim", "other")), covered: true, states: map[inuse.Ref]protect.ObjectState{pvc: deleting}},
		{name: "update removing the reference, claim being deleted -> allowed", w: update(uses("claim"), uses()), covered: true, states: map[inuse.Ref]protect.ObjectState{pvc: deleting}},
		{name: "status update, claim being deleted -> allowed", w: protect.VMWrite{Operation: admissionv1.Update, SubResource: "status", Old: uses(), New: uses("claim")}, covered: true, states: map[inuse.Ref]protect.ObjectState{pvc: deleting}},
		{name: "VM being deleted, claim being deleted -> allowed", w: update(uses(), terminatingVM), covered: true, states: map[inuse.Ref]protect.ObjectState{pvc: deleting}},
		{name: "delete, claim being deleted -> allowed", w: protect.VMWrite{Operation: admissionv1.Delete, New: uses("claim")}, covered: true, states: map[inuse.Ref]protect.ObjectState{pvc: deleting}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := protect.Admit(c.w, c.covered, c.states)
			if v.Allowed != (len(c.refused) == 0) || !slices.Equal(v.Refused, c.refused) || !slices.Equal(v.Unknown, c.unknown) {
				t.Fatalf("verdict %+v, want refused %v unknown %v", v, c.refused, c.unknown)
			}
			for _, r := range c.refused {
				if !strings.Contains(v.Message, r.String()) || !strings.Contains(v.Message, since.UTC().Format(time.RFC3339)) || !strings.Contains(v.Message, protect.RefusalAdvice) {
					t.Errorf("message does not name %s, its deletion time and the way out: %s", r, v.Message)
				}
			}
		})
	}
}

func usingVMUnit(name string, claims ...string) *kubevirtv1.VirtualMachine {
	var opts []fixture.Option
	for _, c := range claims {
		opts = append(opts, fixture.WithVolume("disk-"+c, fixture.PVC(c)))
	}
	return fixture.VM(name, opts...)
}

// FuzzAdmit feeds arbitrary objects through ParseVMWrite and Admit. It checks
// the invariants that do not depend on the decision's details: no panic; a
// refusal names only objects being deleted that the new VM references and
// the old one did not; with every object being deleted, every added
// reference is refused.
func FuzzAdmit(f *testing.F) {
	vm, _ := json.Marshal(usingVMUnit("vm", "claim", "other"))
	old, _ := json.Marshal(usingVMUnit("vm", "claim"))
	f.Add(vm, old, "UPDATE", "")
	f.Add(vm, []byte(nil), "CREATE", "")
	f.Add([]byte(`{"spec":{"template":{"spec":{"volumes":[{"dataVolume":{"name":"x"}}]}}}}`), []byte(`{}`), "UPDATE", "status")
	f.Add([]byte(`{"spec":{"dataVolumeTemplates":[{"metadata":{"name":""}}]}}`), []byte(`null`), "CREATE", "")
	f.Fuzz(func(t *testing.T, obj, oldObj []byte, op, sub string) {
		req := &admissionv1.AdmissionRequest{
			Kind:      metav1.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: "VirtualMachine"},
			Operation: admissionv1.Operation(op), SubResource: sub, Namespace: "default", Name: "vm",
			Object: runtime.RawExtension{Raw: obj}, OldObject: runtime.RawExtension{Raw: oldObj},
		}
		w, err := protect.ParseVMWrite(req)
		if err != nil {
			return
		}
		added := protect.AddedReferences(w)
		all := map[inuse.Ref]protect.ObjectState{}
		for _, r := range added {
			all[r] = protect.ObjectState{Deleting: true}
		}
		v := protect.Admit(w, true, all)
		if !slices.Equal(v.Refused, added) || v.Allowed != (len(added) == 0) {
			t.Fatalf("everything being deleted: refused %v, want %v", v.Refused, added)
		}
		var had []inuse.Ref
		if w.Old != nil && w.Operation == admissionv1.Update {
			had = inuse.DependentsOf(w.Old)
		}
		for _, r := range added {
			if slices.Contains(had, r) || !slices.Contains(inuse.DependentsOf(w.New), r) || r.Kind == inuse.KindControllerRevision {
				t.Fatalf("%s counted as added: the old VM had it, the new one lacks it, or it is not a claim or DataVolume", r)
			}
		}
		if v := protect.Admit(w, true, nil); !v.Allowed {
			t.Fatalf("nothing being deleted, yet refused: %+v", v)
		}
	})
}
