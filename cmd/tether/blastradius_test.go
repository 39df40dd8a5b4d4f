package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// windowByHand is a product line that decides whether a time lies in a
// blast-radius window by itself: a duration since it compared with an
// interval.
var windowByHand = regexp.MustCompile(`\.Sub\([^)]*\)\s*(<|<=|>|>=)\s*[\w.]*[Ii]nterval\b`)

// One count behind every blast-radius limit: the controller's budget,
// `tether fix`'s note on its window and `tether openstack fix`'s breaker
// ask internal/blastradius which actions lie in the window; no other
// product code compares an action's age with the interval itself.
func TestOneBlastRadiusCount(t *testing.T) {
	for _, root := range []string{"../../cmd", "../../internal"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			slash := filepath.ToSlash(path)
			if d.IsDir() && (strings.HasSuffix(slash, "internal/testing") || strings.HasSuffix(slash, "cmd/tether-bench") || strings.HasSuffix(slash, "internal/blastradius")) {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for i, line := range strings.Split(string(b), "\n") {
				if windowByHand.MatchString(line) {
					t.Errorf("%s:%d: a blast-radius window counted by hand (%s): ask blastradius.Limits.Counts or blastradius.Count", path, i+1, strings.TrimSpace(line))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
