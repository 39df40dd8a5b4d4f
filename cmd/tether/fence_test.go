package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The test world (emulator, control plane, fixtures, fake attacher) lives
// under internal/testing and must never be linked into the product binary.
func TestBinaryDoesNotLinkTheTestWorld(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const fence = "github.com/tether-dev/tether/internal/testing/"
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
