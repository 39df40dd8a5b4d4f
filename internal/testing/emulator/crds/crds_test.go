package crds

import (
	"slices"
	"testing"
)

func TestObjectsParse(t *testing.T) {
	objs, err := Objects()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"datavolumes.cdi.kubevirt.io":                  {"dv", "dvs"},
		"kubevirts.kubevirt.io":                        {"kv", "kvs"},
		"virtualmachineinstancemigrations.kubevirt.io": {"vmim", "vmims"},
		"virtualmachineinstances.kubevirt.io":          {"vmi", "vmis"},
		"virtualmachines.kubevirt.io":                  {"vm", "vms"},
	}
	if len(objs) != len(want) {
		t.Fatalf("%d definitions, want %d", len(objs), len(want))
	}
	for _, crd := range objs {
		short, ok := want[crd.Name]
		if !ok {
			t.Errorf("unexpected definition %s", crd.Name)
			continue
		}
		if !slices.Equal(crd.Spec.Names.ShortNames, short) {
			t.Errorf("%s: short names %v, want %v", crd.Name, crd.Spec.Names.ShortNames, short)
		}
		if crd.Spec.Names.Plural+"."+crd.Spec.Group != crd.Name || crd.Spec.Scope != "Namespaced" {
			t.Errorf("%s: names or scope wrong", crd.Name)
		}
		v := crd.Spec.Versions[0]
		// KubeVirt v1.9.0 pkg/virt-operator/resource/generate/components/crds.go:149-185:
		// the VMI has no status subresource (a write of the object writes its
		// status); VM, migration and KubeVirt have one (187-220, 309-397).
		wantStatus := crd.Name != "virtualmachineinstances.kubevirt.io"
		if hasStatus := v.Subresources != nil && v.Subresources.Status != nil; hasStatus != wantStatus {
			t.Errorf("%s: status subresource %v, want %v", crd.Name, hasStatus, wantStatus)
		}
		if len(crd.Spec.Versions) != 1 || !v.Served || !v.Storage ||
			v.Schema == nil || v.Schema.OpenAPIV3Schema.XPreserveUnknownFields == nil || !*v.Schema.OpenAPIV3Schema.XPreserveUnknownFields {
			t.Errorf("%s: version %+v", crd.Name, v)
		}
	}
}
