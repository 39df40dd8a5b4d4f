package act

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tether-dev/tether/internal/kubevirt"
	"github.com/tether-dev/tether/internal/snapshot"
)

// dryRunSince is the first KubeVirt release whose addvolume and removevolume
// honour dryRun (kubevirt/kubevirt PR 6931, December 2021, released in
// v0.49.0). Older virt-api has no such field in AddVolumeOptions and
// RemoveVolumeOptions and drops it: the "dry run" is a real call.
var dryRunSince = kubeVirtVersion{major: 0, minor: 49}

// kubeVirtVersion is a parsed status.observedKubeVirtVersion.
type kubeVirtVersion struct {
	major, minor, patch int
	// pre is the pre-release part ("rc.1" of v0.48.1-rc.1), if any.
	pre string
}

func (v kubeVirtVersion) String() string {
	s := fmt.Sprintf("v%d.%d.%d", v.major, v.minor, v.patch)
	if v.pre != "" {
		s += "-" + v.pre
	}
	return s
}

// atLeast reports whether v is min or later. A pre-release comes before
// its release (v0.49.0-rc.0 is older than v0.49.0), as in semantic
// versioning; min is a release.
func (v kubeVirtVersion) atLeast(min kubeVirtVersion) bool {
	a, b := [3]int{v.major, v.minor, v.patch}, [3]int{min.major, min.minor, min.patch}
	for i := range a {
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return v.pre == ""
}

// parseKubeVirtVersion reads versions as virt-operator reports them:
// "v1.9.0", "v0.48.1-rc.1", "v1.2.0-beta.0+abc", also without the "v" or
// the patch number. Anything else is an error.
func parseKubeVirtVersion(s string) (kubeVirtVersion, error) {
	var v kubeVirtVersion
	rest := strings.TrimSpace(s)
	if strings.HasPrefix(rest, "v") || strings.HasPrefix(rest, "V") {
		rest = rest[1:]
	}
	rest, _, _ = strings.Cut(rest, "+") // build metadata: ignored
	rest, pre, hasPre := strings.Cut(rest, "-")
	if hasPre && pre == "" {
		return v, fmt.Errorf("version %q: empty pre-release", s)
	}
	v.pre = pre
	parts := strings.Split(rest, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return v, fmt.Errorf("version %q: want major.minor.patch", s)
	}
	nums := []*int{&v.major, &v.minor, &v.patch}
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

// dryRunProblem says why the KubeVirt described by g may not honour dryRun
// on addvolume/removevolume; "" when it does (v0.49 or later).
func dryRunProblem(g snapshot.FeatureGates) string {
	switch {
	case !g.Known:
		return "the KubeVirt version is unknown (no KubeVirt object could be read)"
	case strings.TrimSpace(g.KubeVirtVersion) == "":
		return "the KubeVirt version is unknown (the KubeVirt object reports no status.observedKubeVirtVersion)"
	}
	v, err := parseKubeVirtVersion(g.KubeVirtVersion)
	switch {
	case err != nil:
		return fmt.Sprintf("the KubeVirt version is unknown (status.observedKubeVirtVersion %q cannot be compared)", g.KubeVirtVersion)
	case !v.atLeast(dryRunSince):
		return fmt.Sprintf("KubeVirt %s is older than %s", g.KubeVirtVersion, dryRunSince)
	}
	return ""
}

// dryRunRefusal refuses a removevolume call before its dry run when the
// server may not honour dryRun: there, the dry run would remove the volume.
func dryRunRefusal(g snapshot.FeatureGates, kind kubevirt.Kind, ns, name, volume string) *Result {
	problem := dryRunProblem(g)
	if problem == "" {
		return nil
	}
	persist := ""
	if kind == kubevirt.VM {
		persist = " --persist"
	}
	return &Result{Outcome: Refused, Message: fmt.Sprintf(
		"%s: virt-api before v0.49 drops the dryRun field of removevolume, so tether's server-side dry run would really remove the volume; nothing was changed. "+
			"Upgrade KubeVirt to v0.49 or later, or check the finding's evidence yourself and then run `virtctl removevolume %s -n %s --volume-name=%s%s` (without --dry-run, which such a server ignores too)",
		problem, name, ns, volume, persist)}
}
