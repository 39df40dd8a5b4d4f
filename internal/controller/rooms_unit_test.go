package controller

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The controller's rooms are packages of their own, and no arrow runs back
// up: none of them depends on package controller (its wiring and
// reconcilers), nor on another room, but a reconciler's room on the
// records every reconciler keeps its findings in. A room that needed the
// wiring, or a sibling, would be part of it again.
func TestRooms_noArrowBackUp(t *testing.T) {
	const mod = "github.com/tether-dev/tether/internal/"
	rooms := map[string]string{
		"access":       "./access",
		"compactcache": "./compactcache",
		"gauges":       "./gauges",
		"lease":        "./lease",
		"guard":        "./guard",
		"records":      "./records",
		"restart":      "./restart",
		"tenant":       "./tenant",
		"writer":       "../report/policyreport/writer",
	}
	paths := map[string]string{
		mod + "controller/access":          "access",
		mod + "controller/compactcache":    "compactcache",
		mod + "controller/gauges":          "gauges",
		mod + "controller/gonenodes":       "gonenodes",
		mod + "controller/lease":           "lease",
		mod + "controller/guard":           "guard",
		mod + "controller/records":         "records",
		mod + "controller/restart":         "restart",
		mod + "controller/tenant":          "tenant",
		mod + "report/policyreport/writer": "writer",
		mod + "controller":                 "controller",
	}
	uses := map[string]string{"restart": "records", "guard": "tenant", "gauges": "tenant"}
	for name, dir := range rooms {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", dir).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", dir, err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 {
			t.Fatalf("go list %s returned too few packages to be the real graph: %v", dir, deps)
		}
		for _, dep := range deps {
			if other, ok := paths[dep]; ok && other != name && other != uses[name] {
				t.Errorf("room %s depends on %s: no arrow may run back up to the controller or across to another room", name, dep)
			}
		}
	}
}

// maxRootLines is the most product lines package controller itself may
// hold: its wiring and thin reconcilers; the rest lives in rooms.
const maxRootLines = 2500

// The package stays its wiring and its thin reconcilers: what grows beyond
// goes into a room of its own.
func TestRooms_rootStaysSmall(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n += strings.Count(string(data), "\n")
	}
	t.Logf("package controller: %d product lines (at most %d)", n, maxRootLines)
	if n > maxRootLines {
		t.Errorf("package controller holds %d product lines, more than %d: move what is not wiring or a thin reconciler into a room", n, maxRootLines)
	}
}
