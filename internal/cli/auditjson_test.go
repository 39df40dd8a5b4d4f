package cli

import (
	"bytes"
	"reflect"
	"slices"
	"testing"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// FuzzAuditJSON: the streamed -o json document is byte for byte what
// encoding/json's MarshalIndent makes of the whole report (through
// encode), whatever the findings' text holds: HTML characters, control
// characters, U+2028, invalid UTF-8, nil or empty evidence, tenants and
// warnings or none.
func FuzzAuditJSON(f *testing.F) {
	f.Add("ns", "a <b> & c", "\x00\x1f\u2028\u2029", []byte{0xff, 0xfe, 'x'}, uint8(3))
	f.Add("", "", "", []byte{}, uint8(0))
	f.Add("default", "vol\"ume\\", "line\nbreak\ttab", []byte("evidence"), uint8(0xff))
	f.Fuzz(func(t *testing.T, ns, text, evidence string, raw []byte, shape uint8) {
		var fs []drift.Finding
		for i := 0; i < int(shape%4); i++ {
			fd := drift.Finding{ID: text, Check: check.OrphanHotplugVolume, Namespace: ns, Volume: string(raw), Message: text + evidence,
				Object: drift.ObjectRef{Kind: "VirtualMachineInstance", Name: evidence, UID: "uid"},
				Action: drift.Action{Type: check.VMRemoveVolume, Safe: shape&16 != 0, Remedy: string(raw) + text}}
			switch (int(shape>>2) + i) % 3 {
			case 1:
				fd.Evidence = []string{}
			case 2:
				fd.Evidence = []string{evidence, string(raw), text}
			}
			if shape&32 != 0 {
				fd.Action.BlockedBy = drift.BlockReason(text)
			}
			if shape&64 != 0 {
				fd.Cluster = text
			}
			fs = append(fs, fd)
		}
		s := &snapshot.Snapshot{}
		if shape&64 != 0 {
			s.Warnings = []string{text, string(raw)}
		}
		if shape&128 != 0 {
			s.Tenants = []snapshot.Tenant{{Name: ns, Error: evidence}}
		}
		var streamed, whole bytes.Buffer
		if err := printAudit(&streamed, auditPrint{format: "json"}, s, fs); err != nil {
			t.Fatal(err)
		}
		if fs == nil {
			fs = []drift.Finding{}
		}
		r := AuditReport{APIVersion: APIVersion, Kind: "AuditReport", Findings: fs, Warnings: s.Warnings}
		for _, tn := range s.Tenants {
			r.Tenants = append(r.Tenants, tenantStatus{Name: tn.Name, Reachable: tn.Reachable, Error: tn.Error})
		}
		if err := encode(&whole, "json", r); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(streamed.Bytes(), whole.Bytes()) {
			t.Fatalf("streamed:\n%s\nwhole:\n%s", streamed.Bytes(), whole.Bytes())
		}
	})
}

// appendFinding writes Finding's fields by hand: a field added to Finding,
// ObjectRef or Action must be added there too, or -o json would lose it.
func TestAppendFinding_knowsEveryField(t *testing.T) {
	for _, c := range []struct {
		typ  reflect.Type
		want []string
	}{
		{reflect.TypeOf(drift.Finding{}), []string{"id", "check", "namespace", "cluster,omitempty", "object", "volume", "severity", "message", "evidence", "action"}},
		{reflect.TypeOf(drift.ObjectRef{}), []string{"kind", "name", "uid"}},
		{reflect.TypeOf(drift.Action{}), []string{"type", "safe", "blockedBy,omitempty", "remedy"}},
	} {
		var got []string
		for i := 0; i < c.typ.NumField(); i++ {
			got = append(got, c.typ.Field(i).Tag.Get("json"))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s has the JSON fields %v; appendFinding writes %v: teach it the change", c.typ, got, c.want)
		}
	}
}
