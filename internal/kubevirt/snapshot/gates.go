package snapshot

import (
	"fmt"
	"slices"
)

// DeclarativeHotplugVolumesGate is the KubeVirt feature gate (Alpha in
// v1.6, Beta in v1.9) under which virt-controller syncs hot-plug volumes
// from the VM spec into the VMI.
const DeclarativeHotplugVolumesGate = "DeclarativeHotplugVolumes"

// The KubeVirt releases where the hot-plug gates changed state.
var (
	// declarativeAlpha: DeclarativeHotplugVolumes exists, Alpha (off
	// unless listed); HotplugVolumes is Alpha too (v1.7.0
	// pkg/virt-config/featuregate/active.go:166,184).
	declarativeAlpha = KubeVirtVersion{Major: 1, Minor: 6}
	// declarativeBeta: DeclarativeHotplugVolumes is Beta (on unless
	// disabled), HotplugVolumes deprecated (on only if listed) (v1.9.0
	// featuregate/active.go:139,316; inactive.go:165,230).
	declarativeBeta = KubeVirtVersion{Major: 1, Minor: 9}
)

// HotplugGates is the effective state of KubeVirt's two hot-plug gates, as
// virt-api and virt-controller evaluate them. Known is false when the
// KubeVirt object or its version could not be read: then neither gate is
// known.
type HotplugGates struct {
	Known          bool
	HotplugVolumes bool
	Declarative    bool
	// Basis says what the decision rests on (for evidence).
	Basis string
}

// DeclarativeSync reports whether virt-controller removes, on every VM
// sync, hot-plug volumes of a VM-owned VMI that the VM spec lacks: the
// Declarative gate on and HotplugVolumes off (pkg/virt-controller/watch/vm/
// vm.go:3568-3575, v1.9.0).
func (h HotplugGates) DeclarativeSync() bool { return h.Known && h.Declarative && !h.HotplugVolumes }

// VMIRoute reports whether virt-api serves the VMI-level volume calls for
// a VMI: standalone under either gate, VM-owned only with HotplugVolumes
// (pkg/virt-api/rest/volumes.go:63-65,220-222).
func (h HotplugGates) VMIRoute(ownedByVM bool) bool {
	if ownedByVM {
		return h.Known && h.HotplugVolumes
	}
	return h.Known && (h.HotplugVolumes || h.Declarative)
}

// Hotplug evaluates the hot-plug gates for the KubeVirt version g reports,
// with KubeVirt's precedence (listed > disabled > Beta default;
// featuregate/feature-gates.go:91-112). The CR's configuration counts only
// once virt-operator has set status.phase; before, the built-in defaults
// apply (pkg/virt-config/configuration.go:361-385).
func (g FeatureGates) Hotplug() HotplugGates {
	if !g.Known {
		return HotplugGates{Basis: "the KubeVirt object could not be read"}
	}
	v, err := ParseKubeVirtVersion(g.KubeVirtVersion)
	if err != nil {
		return HotplugGates{Basis: fmt.Sprintf("the KubeVirt version (status.observedKubeVirtVersion %q) is unknown", g.KubeVirtVersion)}
	}
	h := HotplugGates{Known: true}
	counts, conf := g.Phase != "", "the KubeVirt object's feature gates"
	if !counts {
		conf = "KubeVirt's built-in defaults (the KubeVirt object has no status.phase yet, so its configuration does not count)"
	}
	on := func(name string, byDefault bool) bool {
		if counts && slices.Contains(g.Enabled, name) {
			return true
		}
		if counts && slices.Contains(g.Disabled, name) {
			return false
		}
		return byDefault
	}
	// A pre-release of a minor version has that minor's gates.
	release := KubeVirtVersion{Major: v.Major, Minor: v.Minor}
	switch {
	case release.AtLeast(declarativeBeta):
		h.HotplugVolumes, h.Declarative = on(HotplugVolumesGate, false), on(DeclarativeHotplugVolumesGate, true)
	case release.AtLeast(declarativeAlpha):
		h.HotplugVolumes, h.Declarative = on(HotplugVolumesGate, false), on(DeclarativeHotplugVolumesGate, false)
	default:
		h.HotplugVolumes = on(HotplugVolumesGate, false)
	}
	h.Basis = fmt.Sprintf("KubeVirt %s, from %s: %s %s, %s %s", v, conf,
		HotplugVolumesGate, onOff(h.HotplugVolumes), DeclarativeHotplugVolumesGate, onOff(h.Declarative))
	return h
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
