package observe

import (
	"bytes"
	"reflect"

	"github.com/fxamacker/cbor/v2"
)

// CBOR (RFC 8949) is how an API server with the CBORServingAndStorage
// feature gate (alpha in Kubernetes 1.32 to 1.36) can serve custom
// resources. At 10,000 VMIs and VMs it spent less than half the CPU on
// their pages that it spends on JSON (docs/performance.md): its JSON
// encoder walks each object's maps by reflection. The page reader asks
// for it only when told to (PageReader.CBOR) and takes whatever the
// server answers: a server without the gate answers JSON, read as before.

// Media types the page reader asks for.
const (
	mediaJSON = "application/json"
	mediaCBOR = "application/cbor"
	// acceptCBOR prefers CBOR and takes JSON from a server without it.
	acceptCBOR = mediaCBOR + ", " + mediaJSON + ";q=0.9"
)

// selfDescribed is the tag that opens every CBOR body an API server
// writes (RFC 8949 section 3.4.6): a JSON body never starts with it.
var selfDescribed = []byte{0xd9, 0xd9, 0xf7}

// isCBOR says whether a page body is CBOR (else it is JSON).
func isCBOR(body []byte) bool { return bytes.HasPrefix(body, selfDescribed) }

// cborPages decodes pages as the API server writes them, into the same
// wire forms as JSON, by their JSON names, matched exactly as leanDecoding
// matches them; unknown names are skipped. The server writes strings,
// map keys among them, as byte strings.
var cborPages = func() cbor.DecMode {
	m, err := cbor.DecOptions{
		DupMapKey:             cbor.DupMapKeyQuiet,
		TimeTag:               cbor.DecTagOptional,
		MaxNestedLevels:       10000,
		MaxArrayElements:      1<<31 - 1,
		MaxMapPairs:           1 << 21,
		IndefLength:           cbor.IndefLengthAllowed,
		TagsMd:                cbor.TagsAllowed,
		FieldNameMatching:     cbor.FieldNameMatchingCaseSensitive,
		DefaultMapType:        reflect.TypeOf(map[string]any(nil)),
		DefaultByteStringType: reflect.TypeOf(""),
		ByteStringToString:    cbor.ByteStringToStringAllowed,
		FieldNameByteString:   cbor.FieldNameByteStringAllowed,
		UTF8:                  cbor.UTF8DecodeInvalid,
	}.DecMode()
	if err != nil {
		panic(err) // static options
	}
	return m
}()

// UnmarshalCBOR is UnmarshalJSONFrom for a CBOR page: the disks marked
// shareable, or whose serial a virtio guest truncates, as KeptDisk keeps
// them.
func (d *shareableDisks) UnmarshalCBOR(b []byte) error {
	*d = nil
	var disks []leanDisk
	if err := cborPages.Unmarshal(b, &disks); err != nil {
		return err
	}
	for i := range disks {
		d.keep(&disks[i])
	}
	return nil
}

// cborContinue is continueOf of a CBOR page: its metadata's continue
// token, the items skipped over, not decoded; "" for a body it cannot
// read (the page's own decode has the final word).
func cborContinue(body []byte) string {
	var pg struct {
		Metadata struct {
			Continue string `json:"continue"`
		} `json:"metadata"`
	}
	if cborPages.Unmarshal(body, &pg) != nil {
		return ""
	}
	return pg.Metadata.Continue
}
