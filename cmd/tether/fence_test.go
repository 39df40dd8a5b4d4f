package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const (
	module = "github.com/tether-dev/tether/"
	fence  = module + "internal/testing/"
)

// The test world (emulator, control plane, fixtures, fake attacher) lives
// under internal/testing and must never be linked into the product binary.
func TestBinaryDoesNotLinkTheTestWorld(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list returned too few packages to be the real graph: %v", deps)
	}
	for _, p := range deps {
		if strings.HasPrefix(p, fence) {
			t.Errorf("tether links test-world package %s; product code must not import internal/testing", p)
		}
	}
}

// mayImportTheTestWorld names the packages whose non-test code may import
// the test world: the test world itself, the end-to-end suites, and the
// commands that run it (the standalone emulator, the local environment,
// the benchmarks). Every other package may import it from its _test.go
// files only.
func mayImportTheTestWorld(pkg string) bool {
	for _, prefix := range []string{"internal/testing/", "test/"} {
		if strings.HasPrefix(pkg, module+prefix) {
			return true
		}
	}
	switch strings.TrimPrefix(pkg, module) {
	case "cmd/kubevirt-emulator", "cmd/tether-env", "cmd/tether-bench":
		return true
	}
	return false
}

// No package outside the fence imports the test world from its non-test
// code, whether or not it is linked into tether today: a product package
// that did would carry the test world into whatever links it next.
func TestNothingOutsideTheFenceImportsTheTestWorld(t *testing.T) {
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", module+"...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	var seen int
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		seen++
		if mayImportTheTestWorld(p.ImportPath) {
			continue
		}
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, fence) {
				t.Errorf("%s imports test-world package %s from non-test code; only internal/testing, test/, cmd/kubevirt-emulator, cmd/tether-env and cmd/tether-bench may", p.ImportPath, imp)
			}
		}
	}
	if seen < 20 {
		t.Fatalf("go list returned %d packages, too few to be the module", seen)
	}
}
