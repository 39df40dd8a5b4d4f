package snapshot

import (
	"fmt"
	"strconv"
	"strings"
)

// KubeVirtVersion is a parsed status.observedKubeVirtVersion.
type KubeVirtVersion struct {
	Major, Minor, Patch int
	// Pre is the pre-release part ("rc.1" of v0.48.1-rc.1), if any.
	Pre string
}

func (v KubeVirtVersion) String() string {
	s := fmt.Sprintf("v%d.%d.%d", v.Major, v.Minor, v.Patch)
	if v.Pre != "" {
		s += "-" + v.Pre
	}
	return s
}

// AtLeast reports whether v is min or later. A pre-release comes before
// its release (v0.49.0-rc.0 is older than v0.49.0), as in semantic
// versioning; min is a release.
func (v KubeVirtVersion) AtLeast(min KubeVirtVersion) bool {
	a, b := [3]int{v.Major, v.Minor, v.Patch}, [3]int{min.Major, min.Minor, min.Patch}
	for i := range a {
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return v.Pre == ""
}

// ParseKubeVirtVersion reads versions as virt-operator reports them:
// "v1.9.0", "v0.48.1-rc.1", "v1.2.0-beta.0+abc", also without the "v" or
// the patch number. Anything else is an error.
func ParseKubeVirtVersion(s string) (KubeVirtVersion, error) {
	var v KubeVirtVersion
	rest := strings.TrimSpace(s)
	if strings.HasPrefix(rest, "v") || strings.HasPrefix(rest, "V") {
		rest = rest[1:]
	}
	rest, _, _ = strings.Cut(rest, "+") // build metadata: ignored
	rest, pre, hasPre := strings.Cut(rest, "-")
	if hasPre && pre == "" {
		return v, fmt.Errorf("version %q: empty pre-release", s)
	}
	v.Pre = pre
	parts := strings.Split(rest, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return v, fmt.Errorf("version %q: want major.minor.patch", s)
	}
	nums := []*int{&v.Major, &v.Minor, &v.Patch}
	for i, p := range parts {
		if p == "" || len(p) > 9 || strings.Trim(p, "0123456789") != "" {
			return v, fmt.Errorf("version %q: %q is not a number", s, p)
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return v, fmt.Errorf("version %q: %w", s, err)
		}
		*nums[i] = n
	}
	return v, nil
}
