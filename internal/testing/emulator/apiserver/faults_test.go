package apiserver

import "testing"

func TestFaultSet(t *testing.T) {
	var s Faults
	s.Add(Fault{Count: 2, Status: 409, Subresource: subRemoveVolume}, Fault{})
	rm := call{resource: resourceVMI, ns: "ns", name: "a", sub: subRemoveVolume}
	add := call{resource: resourceVMI, ns: "ns", name: "a", sub: subAddVolume}
	if f, ok := s.take(add); !ok || f.Status != 500 {
		t.Fatalf("addvolume -> the catch-all fault with default 500, got %+v %v", f, ok)
	}
	for i := range 2 {
		if f, ok := s.take(rm); !ok || f.Status != 409 {
			t.Fatalf("removevolume %d -> 409, got %+v %v", i, f, ok)
		}
	}
	if _, ok := s.take(rm); ok || s.Pending() != 0 {
		t.Fatal("faults used up -> none left")
	}
}
