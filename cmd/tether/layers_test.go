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

// decideLayer are the packages below the controller: the core, the
// snapshots, the checks, the in-use rules, the report builder and the
// configuration. They decide from data they are given, so they must not
// depend, however indirectly, on a controller framework or a client
// (forbiddenBelowTheController): a package among them that needed one
// would pull the controller's closure into every check, every test of a
// check, and the audit.
var decideLayer = []string{
	"drift",
	"kubevirt/snapshot", "openstack/snapshot",
	"kubevirt/check", "openstack/check",
	"protect/inuse", "blastradius",
	"report/reportapi", "report/policyreport",
	"config",
}

// forbiddenBelowTheController are the module paths of controller
// frameworks (controller-runtime's manager, webhook server and caches;
// client-go's informers and work queues; the apiserver's admission
// plumbing) and of the platforms' clients.
var forbiddenBelowTheController = []string{
	"sigs.k8s.io/controller-runtime",
	"k8s.io/client-go",
	"k8s.io/apiserver",
	"github.com/gophercloud/gophercloud",
}

// TestDecideLayerHasNoControllerFramework walks the import graph of each
// package of decideLayer and names the first chain of imports that reaches
// a forbidden module.
func TestDecideLayerHasNoControllerFramework(t *testing.T) {
	const mod = "github.com/tether-dev/tether/internal/"
	var pkgs []string
	for _, p := range decideLayer {
		pkgs = append(pkgs, "../../internal/"+p)
	}
	imports := importGraph(t, 50, pkgs...)
	for _, p := range decideLayer {
		root := mod + p
		if _, ok := imports[root]; !ok {
			t.Errorf("%s not found: the test does not see the real tree", root)
			continue
		}
		for _, m := range forbiddenBelowTheController {
			if chain := importChain(imports, root, m); chain != nil {
				t.Errorf("%s depends on %s (a controller framework or client): the packages below the controller decide from data; move what they need into a package without it (as internal/protect/inuse):\n  %s",
					p, m, strings.Join(chain, "\n  imports "))
			}
		}
	}
}
