package plan

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/tether-dev/tether/internal/drift"
)

func finding(id, uid, volume string, safe bool) drift.Finding {
	f := drift.Finding{ID: id, Check: "OrphanHotplugVolume", Namespace: "ns", Volume: volume,
		Object: drift.ObjectRef{Kind: "VirtualMachineInstance", Name: "vm-" + id, UID: types.UID("uid-" + uid)},
		Action: drift.Action{Type: "VMIRemoveVolume", Safe: safe}}
	if !safe {
		f.Action.BlockedBy = "Migrating"
	}
	return f
}

// writePlan saves the document a dry run of fix prints for findings.
func writePlan(t *testing.T, findings []drift.Finding) string {
	t.Helper()
	data, err := json.MarshalIndent(Document{APIVersion: APIVersion, Kind: "FixPlan", Items: Items(findings, 10)}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadPlan_roundTripsTheJSONPlan(t *testing.T) {
	a, b, blocked := finding("a", "1", "v1", true), finding("b", "2", "v2", true), finding("c", "3", "v3", false)
	got, err := ReadPlan(writePlan(t, []drift.Finding{a, b, blocked}), "tether fix", nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 0, len(got))
	for id := range got {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("reviewed plan holds %v, want the planned a and b only", ids)
	}
}

func TestReadPlan_badInputNamesTheFileAndTheFix(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct{ name, path, want string }{
		{"missing file", filepath.Join(dir, "nope.json"), "no such file"},
		{"not JSON", write("bad.json", "items: ["), "not a tether fix plan"},
		{"an audit report", write("audit.json", `{"apiVersion":"`+APIVersion+`","kind":"AuditReport","applied":false,"items":[]}`), `kind "AuditReport"`},
		{"an applied run", write("applied.json", `{"apiVersion":"`+APIVersion+`","kind":"FixPlan","applied":true,"items":[]}`), "already applied"},
		{"another platform's plan", write("other.json", `{"apiVersion":"`+APIVersion+`","kind":"FixPlan","applied":false,"items":[{"finding":{"id":"x","check":"StaleCinderAttachment","namespace":"p","object":{"kind":"CinderAttachment","name":"a","uid":"s"},"action":{"type":"DeleteCinderAttachment","safe":true,"remedy":""}},"planned":true}]}`), "check StaleCinderAttachment, which `tether fix` does not run"},
		{"planned item without object UID", write("nouid.json", `{"apiVersion":"`+APIVersion+`","kind":"FixPlan","applied":false,"items":[{"finding":{"id":"x","check":"OrphanHotplugVolume","namespace":"ns","object":{"kind":"VirtualMachineInstance","name":"vm"},"action":{"type":"VMIRemoveVolume","safe":true,"remedy":""}},"planned":true}]}`), "names no finding id, check or object UID"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadPlan(c.path, "tether fix", []string{"OrphanHotplugVolume"})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "tether fix -o json") {
				t.Fatalf("error %v: want it to say %q and how to write a plan", err, c.want)
			}
		})
	}
}

func TestReviewed(t *testing.T) {
	same, moved, gone, unsafe := finding("a", "1", "v1", true), finding("b", "2", "v2", true), finding("c", "3", "v3", true), finding("d", "4", "v4", true)
	reviewed := map[string]drift.Finding{"a": same, "b": moved, "c": gone, "d": unsafe}
	movedNow := moved
	movedNow.Object.UID = "uid-recreated" // same id, another object: never act on it
	unsafeNow := finding("d", "4", "v4", false)
	newSafe := finding("e", "5", "v5", true)
	items, changed := Reviewed([]drift.Finding{same, movedNow, unsafeNow, newSafe}, reviewed, 10)
	if changed != 3 {
		t.Errorf("changed = %d, want 3 (moved, gone, no longer safe)", changed)
	}
	want := map[string]string{
		"a": "planned",
		"b": ChangedSincePlan + ": object",
		"c": ChangedSincePlan + ": the finding is gone",
		"d": ChangedSincePlan + ": no longer safe",
		"e": notInPlan,
	}
	for _, it := range items {
		w, ok := want[it.Finding.ID]
		if !ok {
			t.Fatalf("unexpected item %s", it.Finding.ID)
		}
		delete(want, it.Finding.ID)
		switch {
		case w == "planned" && !it.Planned:
			t.Errorf("%s: not planned (%s)", it.Finding.ID, it.Skipped)
		case w != "planned" && (it.Planned || !strings.HasPrefix(it.Skipped, w)):
			t.Errorf("%s: planned=%v skipped %q, want %q", it.Finding.ID, it.Planned, it.Skipped, w)
		}
	}
	if len(want) != 0 {
		t.Errorf("missing items %v", want)
	}
	if items, _ := Reviewed([]drift.Finding{same}, map[string]drift.Finding{"a": same}, 0); items[0].Planned {
		t.Error("--max 0 still planned a reviewed finding")
	}
}

func TestItems_boundsSafeActions(t *testing.T) {
	safe := drift.Finding{ID: "s", Action: drift.Action{Type: "VMIRemoveVolume", Safe: true}}
	blocked := drift.Finding{ID: "b", Action: drift.Action{Type: "VMIRemoveVolume", BlockedBy: "VMIMigrating"}}
	for _, c := range []struct {
		name        string
		findings    []drift.Finding
		max         int
		wantPlanned int
		wantSkipped int
	}{
		{"three safe, max 2 -> two planned, one skipped", []drift.Finding{safe, safe, safe}, 2, 2, 1},
		{"blocked only -> nothing planned", []drift.Finding{blocked, blocked}, 10, 0, 0},
		{"max 0 -> nothing planned", []drift.Finding{safe, blocked}, 0, 0, 1},
		{"mixed, room -> safe planned, blocked never", []drift.Finding{blocked, safe, blocked, safe}, 10, 2, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			items := Items(c.findings, c.max)
			planned, skipped := 0, 0
			for _, it := range items {
				if it.Planned {
					planned++
					if !it.Finding.Action.Safe {
						t.Fatal("planned a blocked action")
					}
				}
				if it.Skipped != "" {
					skipped++
				}
			}
			if planned != c.wantPlanned || skipped != c.wantSkipped || len(items) != len(c.findings) {
				t.Fatalf("planned %d skipped %d of %d", planned, skipped, len(items))
			}
		})
	}
}
