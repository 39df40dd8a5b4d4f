package observe

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/serializer/cbor/direct"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// asServerCBOR writes v as an API server writes a custom resource's list
// in CBOR: its JSON as an unstructured map (what the server holds of a
// custom resource, whole numbers as int64), in Kubernetes' CBOR, after
// the self-described tag.
func asServerCBOR(t *testing.T, v any) []byte {
	t.Helper()
	var m map[string]any
	if err := utiljson.Unmarshal(mustJSON(t, v), &m); err != nil {
		t.Fatal(err)
	}
	b, err := direct.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return append(append([]byte(nil), selfDescribed...), b...)
}

// TestLeanDecodeCBOR: a page of random VMIs (and one of random VMs) in
// CBOR decodes, field for field, to what the same page in JSON decodes to:
// what the checks read (object), and the typed form, which holds every
// field the wire form keeps. It fails when a field of the wire forms
// decodes from CBOR differently (a name, a time, a number, a map key).
func TestLeanDecodeCBOR(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 50
	}
	for seed := 0; seed < seeds; seed++ {
		vmis, vms := randomPages(seed)
		n := int64(seed)
		vmis.RemainingItemCount = &n

		fromJSON, err := decodePage[vmiWire](mustJSON(t, &vmis))
		if err != nil {
			t.Fatalf("seed %d: JSON VMI page: %v", seed, err)
		}
		fromCBOR, err := decodePage[vmiWire](asServerCBOR(t, &vmis))
		if err != nil {
			t.Fatalf("seed %d: CBOR VMI page: %v", seed, err)
		}
		if !reflect.DeepEqual(fromCBOR.Metadata, fromJSON.Metadata) || len(fromCBOR.Items) != len(fromJSON.Items) {
			t.Fatalf("seed %d: CBOR page metadata %+v with %d items, JSON %+v with %d", seed, fromCBOR.Metadata, len(fromCBOR.Items), fromJSON.Metadata, len(fromJSON.Items))
		}
		for i := range fromJSON.Items {
			if g, w := fromCBOR.Items[i].object(), fromJSON.Items[i].object(); !reflect.DeepEqual(g, w) {
				t.Fatalf("seed %d VMI %d, as the checks read it:\nCBOR %s\nJSON %s", seed, i, mustJSON(t, g), mustJSON(t, w))
			}
			if g, w := fromCBOR.Items[i].typed(), fromJSON.Items[i].typed(); !reflect.DeepEqual(g, w) {
				t.Fatalf("seed %d VMI %d:\nCBOR %s\nJSON %s", seed, i, mustJSON(t, g), mustJSON(t, w))
			}
		}

		vmsJSON, err := decodePage[vmWire](mustJSON(t, &vms))
		if err != nil {
			t.Fatalf("seed %d: JSON VM page: %v", seed, err)
		}
		vmsCBOR, err := decodePage[vmWire](asServerCBOR(t, &vms))
		if err != nil {
			t.Fatalf("seed %d: CBOR VM page: %v", seed, err)
		}
		for i := range vmsJSON.Items {
			if g, w := vmsCBOR.Items[i].object(), vmsJSON.Items[i].object(); !reflect.DeepEqual(g, w) {
				t.Fatalf("seed %d VM %d, as the checks read it:\nCBOR %s\nJSON %s", seed, i, mustJSON(t, g), mustJSON(t, w))
			}
			if g, w := vmsCBOR.Items[i].typed(), vmsJSON.Items[i].typed(); !reflect.DeepEqual(g, w) {
				t.Fatalf("seed %d VM %d:\nCBOR %s\nJSON %s", seed, i, mustJSON(t, g), mustJSON(t, w))
			}
		}
	}
}

// A body is CBOR by the tag that opens it; JSON never starts with it.
func TestIsCBOR(t *testing.T) {
	for body, want := range map[string]bool{"\xd9\xd9\xf7\xa0": true, `{"items":[]}`: false, "": false, "\xd9\xd9": false} {
		if got := isCBOR([]byte(body)); got != want {
			t.Errorf("isCBOR(%q) = %v, want %v", body, got, want)
		}
	}
}

// A CBOR page's continue token is read ahead of its decode, as a JSON
// page's is, and agrees with what the decode reads.
func TestContinueOfCBOR(t *testing.T) {
	for seed := 0; seed < 20; seed++ {
		vmis, _ := randomPages(seed)
		body := asServerCBOR(t, &vmis)
		pg, err := decodePage[vmiWire](body)
		if err != nil {
			t.Fatal(err)
		}
		if got := continueOf(body); got != "tok" || got != pg.Metadata.Continue {
			t.Fatalf("seed %d: continue read ahead %q, decoded %q, want tok", seed, got, pg.Metadata.Continue)
		}
	}
	if got := continueOf(append(append([]byte(nil), selfDescribed...), 0xff)); got != "" {
		t.Errorf("a CBOR body that does not decode: continue %q, want none", got)
	}
}
