package cli

import (
	"bytes"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/report/reportapi"
	"github.com/tether-dev/tether/internal/testing/fixture"
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
			if c.typ.Field(i).IsExported() { // encoding/json writes no other
				got = append(got, c.typ.Field(i).Tag.Get("json"))
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s has the JSON fields %v; appendFinding writes %v: teach it the change", c.typ, got, c.want)
		}
	}
}

// TestPrintAudit_writesDeferredWordsInTurn: `tether audit` runs the checks
// with their findings' words deferred (check.RunDeferred) and writes each
// finding's words in its turn; every format prints what it prints of the
// same findings with their words, byte for byte, and -o json and table
// leave the findings deferred (their words are garbage once printed).
func TestPrintAudit_writesDeferredWordsInTurn(t *testing.T) {
	vm := fixture.VM("a", fixture.Running())
	s := fixture.Snapshot(vm, fixture.VMI("a", fixture.OwnedBy(vm), fixture.WithHotplug("v1"), fixture.WithHotplug("v2")),
		fixture.VM("b", fixture.WithVolume("disk", fixture.PVC("gone"))))
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	eager := check.Run(s, check.DefaultPolicy(), now)
	checks := map[string]bool{}
	for _, f := range check.RunDeferred(s, check.DefaultPolicy(), now) {
		if f.Deferred() {
			checks[f.Check] = true
		}
	}
	if !checks[check.OrphanHotplugVolume] || !checks[check.DanglingVolumeReference] {
		t.Fatalf("deferred findings of %v, want OrphanHotplugVolume and DanglingVolumeReference among them", checks)
	}
	for _, format := range []string{"json", "table", "yaml", "policyreport", "dot"} {
		p := auditPrint{format: format, api: reportapi.WGPolicy, now: now}
		deferred := check.RunDeferred(s, check.DefaultPolicy(), now)
		var want, got bytes.Buffer
		if err := printAudit(&want, p, s, slices.Clone(eager)); err != nil {
			t.Fatal(err)
		}
		if err := printAudit(&got, p, s, deferred); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Errorf("-o %s of the deferred findings differs:\n%s\nwant:\n%s", format, got.Bytes(), want.Bytes())
		}
		held := slices.ContainsFunc(deferred, func(f drift.Finding) bool {
			return !f.Deferred() && (f.Check == check.OrphanHotplugVolume || f.Check == check.DanglingVolumeReference)
		})
		if (format == "json" || format == "table") && held {
			t.Errorf("-o %s wrote the words into the findings it printed: it holds all of them", format)
		}
	}
}
