package protect_test

import (
	"encoding/json"
	"testing"

	"github.com/tether-dev/tether/internal/protect"
	"github.com/tether-dev/tether/internal/protect/inuse"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

func pvcRef(name string) inuse.Ref {
	return inuse.Ref{Kind: inuse.KindPVC, Namespace: fixture.Namespace, Name: name}
}

func TestPatchesCarryTest(t *testing.T) {
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	decode := func(b []byte, err error) []op {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var ops []op
		if err := json.Unmarshal(b, &ops); err != nil {
			t.Fatal(err)
		}
		return ops
	}
	p := fixture.PVC("claim")
	p.ResourceVersion = "42"
	ops := decode(protect.AddPatch(p))
	if len(ops) != 2 || ops[0].Op != "test" || ops[0].Path != "/metadata/resourceVersion" || ops[0].Value != "42" ||
		ops[1].Op != "add" || ops[1].Path != "/metadata/finalizers" {
		t.Errorf("add to no finalizers: %+v", ops)
	}
	p.Finalizers = []string{"kubernetes.io/pvc-protection"}
	ops = decode(protect.AddPatch(p))
	if len(ops) != 2 || ops[0].Op != "test" || ops[0].Path != "/metadata/finalizers" ||
		ops[1].Op != "add" || ops[1].Path != "/metadata/finalizers/-" || ops[1].Value != inuse.Finalizer {
		t.Errorf("add to existing finalizers: %+v", ops)
	}
	p.Finalizers = []string{"kubernetes.io/pvc-protection", inuse.Finalizer}
	ops = decode(protect.RemovePatch(p))
	if len(ops) != 2 || ops[0].Op != "test" || ops[0].Path != "/metadata/finalizers" ||
		ops[1].Op != "remove" || ops[1].Path != "/metadata/finalizers/1" {
		t.Errorf("remove: %+v", ops)
	}
	p.Finalizers = nil
	if _, err := protect.RemovePatch(p); err == nil {
		t.Error("RemovePatch without the finalizer: no error")
	}
}
