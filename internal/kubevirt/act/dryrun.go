package act

import (
	"fmt"
	"strings"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
)

// dryRunSince is the first KubeVirt release whose addvolume and removevolume
// honour dryRun (kubevirt/kubevirt PR 6931, December 2021, released in
// v0.49.0). Older virt-api has no such field in AddVolumeOptions and
// RemoveVolumeOptions and drops it: the "dry run" is a real call.
var dryRunSince = kubeVirtVersion{Major: 0, Minor: 49}

// kubeVirtVersion is a parsed status.observedKubeVirtVersion.
type kubeVirtVersion = snapshot.KubeVirtVersion

// parseKubeVirtVersion reads versions as virt-operator reports them.
func parseKubeVirtVersion(s string) (kubeVirtVersion, error) { return snapshot.ParseKubeVirtVersion(s) }

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
	case !v.AtLeast(dryRunSince):
		return fmt.Sprintf("KubeVirt %s is older than %s", g.KubeVirtVersion, dryRunSince)
	}
	return ""
}

// dryRunRefusal refuses a removevolume call before its dry run when the
// server may not honour dryRun: there, the dry run would remove the volume.
func dryRunRefusal(g snapshot.FeatureGates, kind virtapi.Kind, ns, name, volume string) *drift.Result {
	problem := dryRunProblem(g)
	if problem == "" {
		return nil
	}
	persist := ""
	if kind == virtapi.VM {
		persist = " --persist"
	}
	return &drift.Result{Outcome: drift.Refused, Message: fmt.Sprintf(
		"%s: virt-api before v0.49 drops the dryRun field of removevolume, so tether's server-side dry run would really remove the volume; nothing was changed. "+
			"Upgrade KubeVirt to v0.49 or later, or check the finding's evidence yourself and then run `virtctl removevolume %s -n %s --volume-name=%s%s` (without --dry-run, which such a server ignores too)",
		problem, name, ns, volume, persist)}
}
