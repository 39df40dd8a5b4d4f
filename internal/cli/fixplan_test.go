package cli

import (
	"strings"
	"testing"
)

func TestFix_planNeedsApply(t *testing.T) {
	o := &fixOptions{fix: fixFlags{planFile: "plan.json", command: "tether fix"}}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--apply") {
		t.Fatalf("--plan without --apply: %v", err)
	}
}
