package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The house has floors: internal/drift is the vocabulary both platforms
// speak and imports neither; a platform's packages (internal/kubevirt/...,
// internal/openstack/...) never import the other platform's. A third
// platform then plugs in without touching either.
func TestPlatformsDoNotImportEachOther(t *testing.T) {
	const mod = "github.com/tether-dev/tether/internal/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "../../internal/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	platform := func(p string) string {
		for _, name := range []string{"kubevirt", "openstack"} {
			if p == mod+name || strings.HasPrefix(p, mod+name+"/") {
				return name
			}
		}
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 20 {
		t.Fatalf("go list returned too few packages to be the real tree: %d", len(lines))
	}
	var sawDrift bool
	for _, line := range lines {
		f := strings.Fields(line)
		pkg, imports := f[0], f[1:]
		sawDrift = sawDrift || pkg == mod+"drift"
		for _, imp := range imports {
			switch {
			case pkg == mod+"drift" && strings.HasPrefix(imp, mod):
				t.Errorf("internal/drift imports %s; the core imports no package of the project", imp)
			case platform(pkg) != "" && platform(imp) != "" && platform(pkg) != platform(imp):
				t.Errorf("%s imports %s: one platform must not import the other's packages (the shared vocabulary is internal/drift)", pkg, imp)
			}
		}
	}
	if !sawDrift {
		t.Fatal("internal/drift not found: the test does not see the real tree")
	}
}
