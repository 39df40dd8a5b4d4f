package check

import (
	"fmt"
	"strings"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// Fix is one upstream KubeVirt change that ends a failure mode tether
// reports, and the releases that carry it. The table (Fixes) is the one
// place findings take "upgrade to …" from.
type Fix struct {
	// Mode names the failure mode (stable; findings and docs cite it).
	Mode string
	// What says in a line what goes wrong without the change.
	What string
	// Change is the upstream pull request, as kubevirt/kubevirt#N.
	Change string
	// Component is the KubeVirt component the change is in: the one
	// expected to act next while the mode lasts.
	Component string
	// Releases are, per release line, the first KubeVirt release that
	// carries the change, ascending; the last one is on the line where it
	// first landed, and every later line carries it too. Empty: no release
	// carrying it could be verified (see Verified).
	Releases []string
	// Verified says how Releases were checked: the merge commits and
	// `git tag --contains` of them in kubevirt/kubevirt, or why not.
	Verified string
}

// Modes of the fixes table.
const (
	FixReplugDetaching    = "ReplugInheritsDetaching"
	FixDyingAttachPod     = "TerminatingAttachmentPodKept"
	FixRemountAfterUnplug = "RemountAfterUnplug"
	FixMigrationMountLeak = "FailedMigrationMountLeak"
	FixHotplugPodEvicted  = "HotplugPodEvicted"
)

// Fixes returns the upstream fixes table, read from the kubevirt/kubevirt
// repository (merge commits, cherry-pick pull requests and release tags).
func Fixes() []Fix {
	return []Fix{
		{Mode: FixReplugDetaching, Component: "virt-controller", Change: "kubevirt/kubevirt#17139",
			What:     "a volume unplugged and quickly re-plugged under the same name inherits the Detaching phase of the old hot-plug and stays Detaching",
			Releases: []string{"v1.8.2", "v1.9.0"},
			Verified: "merge 3f39290dcb (2026-03-28) is in tags v1.9.0-alpha.0 and later; its cherry-pick #17439 (merge c9b9da50c7) is in v1.8.2, v1.8.3, v1.8.4; no 1.7 cherry-pick found"},
		{Mode: FixDyingAttachPod, Component: "virt-controller", Change: "kubevirt/kubevirt#16159",
			What:     "virt-controller keeps an attachment pod that is being deleted as the volume's current one, so the volume status names a dying pod and no new one is made",
			Releases: []string{"v1.7.1", "v1.8.0"},
			Verified: "merge 79ceae4a30 (2025-11-21) is in tags v1.8.0-alpha.0 and later; its cherry-pick #16199 (merge 68a3be09d5) is in v1.7.1 to v1.7.4"},
		{Mode: FixRemountAfterUnplug, Component: "virt-handler", Change: "kubevirt/kubevirt#18044",
			What:     "virt-handler re-mounts hot-plug volumes that the VMI status still lists but the VMI spec no longer has, so the phase never leaves Ready/MountedToPod and the unplug never ends",
			Verified: "unverified: merge 4baebe4a0c (2026-07-17) is on main but in no tag of the fetched repository (not in v1.9.0, tagged 2026-07-27 from its release branch); no cherry-pick found"},
		{Mode: FixMigrationMountLeak, Component: "virt-handler", Change: "kubevirt/kubevirt#17883",
			What:     "a failed or cancelled migration leaves the hot-plug mounts on the target node (node-level; no check sees it through the API)",
			Releases: []string{"v1.9.0"},
			Verified: "merge 2b2bb6a54d (2026-06-01) is in tags v1.9.0-rc.0 and later; no cherry-pick found"},
		{Mode: FixHotplugPodEvicted, Component: "virt-api", Change: "kubevirt/kubevirt#15093",
			What:     "a node drain evicts a hot-plug attachment pod before the VMI's migration ends, and the guest gets I/O errors",
			Releases: []string{"v1.6.1", "v1.7.0"},
			Verified: "merge 2b00772643 (2025-08-03) is in tags v1.7.0-alpha.0 and later; its cherry-pick #15356 (merge 110435e205) is in v1.6.1 to v1.6.3"},
	}
}

// fixFor returns the row of mode (it panics on an unknown mode: the
// checks name only rows of the table, TestFixesTable holds them to it).
func fixFor(mode string) Fix {
	for _, f := range Fixes() {
		if f.Mode == mode {
			return f
		}
	}
	panic("check: no fix row " + mode)
}

// carried says whether running carries f, and which release to upgrade to
// when it does not: the first release of running's own line that carries
// it, else the release where it first landed. ok is false when the running
// version is unknown or no release is verified.
func (f Fix) carried(running snapshot.KubeVirtVersion) (yes bool, upgradeTo string, ok bool) {
	if len(f.Releases) == 0 {
		return false, "", false
	}
	var rels []snapshot.KubeVirtVersion
	for _, r := range f.Releases {
		v, err := snapshot.ParseKubeVirtVersion(r)
		if err != nil {
			return false, "", false
		}
		rels = append(rels, v)
	}
	first := rels[len(rels)-1]
	if running.AtLeast(first) {
		return true, "", true
	}
	for _, r := range rels {
		if r.Major == running.Major && r.Minor == running.Minor {
			return running.AtLeast(r), r.String(), true
		}
	}
	return false, first.String(), true
}

// verdict is the version-aware sentence of a finding: whether the running
// KubeVirt carries the fix of mode, and what to upgrade to.
func (f Fix) verdict(g snapshot.FeatureGates) string {
	running, err := snapshot.ParseKubeVirtVersion(g.KubeVirtVersion)
	known := g.Known && err == nil
	rels := "first release unverified"
	if len(f.Releases) > 0 {
		rels = "first in " + strings.Join(f.Releases, ", ")
	}
	switch {
	case len(f.Releases) == 0 && known:
		return fmt.Sprintf("upstream fix %s (%s): merged, but no KubeVirt release carrying it is verified; the running KubeVirt is %s", f.Change, f.Component, running)
	case !known:
		return fmt.Sprintf("upstream fix %s (%s, %s); the running KubeVirt version is unknown (`kubectl get kubevirt -A -o jsonpath='{..observedKubeVirtVersion}'`)", f.Change, f.Component, rels)
	}
	yes, to, _ := f.carried(running)
	if yes {
		return fmt.Sprintf("the running KubeVirt %s carries upstream fix %s (%s, %s): this is not that bug, or a new one; report it upstream", running, f.Change, f.Component, rels)
	}
	return fmt.Sprintf("the running KubeVirt %s lacks upstream fix %s (%s, %s): upgrade to %s", running, f.Change, f.Component, rels, to)
}
