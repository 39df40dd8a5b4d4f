package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// versionPeakRSS runs `bin version` n times through the measuring command
// testdata/peakrss and describes its peak resident set size: the median,
// with the smallest and largest.
func versionPeakRSS(t *testing.T, bin string, n int) string {
	t.Helper()
	peakrss := filepath.Join(t.TempDir(), "peakrss")
	if out, err := exec.Command("go", "build", "-o", peakrss, "./testdata/peakrss").CombinedOutput(); err != nil {
		t.Fatalf("building testdata/peakrss: %v\n%s", err, out)
	}
	var kib []int64
	for range n {
		out, err := exec.Command(peakrss, bin, "version").Output()
		if err != nil {
			t.Fatalf("peakrss %s version: %v", bin, err)
		}
		k, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
		if err != nil {
			t.Fatalf("peakrss said %q: %v", out, err)
		}
		kib = append(kib, k)
	}
	slices.Sort(kib)
	mb := func(k int64) float64 { return float64(k) * 1024 / 1e6 }
	return fmt.Sprintf("%.1f MB (median of %d, %.1f-%.1f)", mb(kib[n/2]), n, mb(kib[0]), mb(kib[n-1]))
}
