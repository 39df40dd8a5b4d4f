package snapshot_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// The oracle is KubeVirt's own rule set, per release:
//   - v1.5 and before: only HotplugVolumes exists, Alpha (off unless listed).
//   - v1.6-v1.8: DeclarativeHotplugVolumes added, both Alpha (v1.7.0
//     pkg/virt-config/featuregate/active.go:166,184).
//   - v1.9: DeclarativeHotplugVolumes Beta, on unless disabled
//     (active.go:139,316); HotplugVolumes deprecated, on only if listed
//     (inactive.go:165,230).
//   - listed > disabled > default (feature-gates.go:91-112);
//   - the CR counts only with status.phase set (configuration.go:361-385).
func TestHotplugGates_versionTimesGates(t *testing.T) {
	const hp, decl = snapshot.HotplugVolumesGate, snapshot.DeclarativeHotplugVolumesGate
	for _, c := range []struct {
		version, phase    string
		enabled, disabled []string
		hotplug, declar   bool
	}{
		{"v1.9.0", "Deployed", nil, nil, false, true},
		{"v1.9.0-rc.0", "Deployed", nil, nil, false, true},
		{"v1.10.2", "Deployed", nil, nil, false, true},
		{"v1.9.0", "Deployed", []string{hp}, nil, true, true},
		{"v1.9.0", "Deployed", nil, []string{decl}, false, false},
		{"v1.9.0", "Deployed", []string{hp}, []string{decl}, true, false},
		{"v1.9.0", "Deployed", []string{decl}, []string{decl}, false, true}, // listed wins
		{"v1.9.0", "Deployed", []string{hp}, []string{hp}, true, true},
		{"v1.9.0", "", []string{hp}, []string{decl}, false, true}, // no phase: defaults
		{"v1.7.0", "Deployed", nil, nil, false, false},
		{"v1.7.0", "Deployed", []string{decl}, nil, false, true},
		{"v1.7.0", "Deployed", []string{hp}, nil, true, false},
		{"v1.7.0", "Deployed", []string{hp, decl}, nil, true, true},
		{"v1.7.0", "", []string{hp}, nil, false, false},
		{"v1.6.0", "Deployed", []string{decl}, nil, false, true},
		{"v1.5.2", "Deployed", []string{hp, decl}, nil, true, false}, // no such gate yet
		{"v0.59.0", "Deployed", nil, nil, false, false},
	} {
		g := snapshot.FeatureGates{Known: true, KubeVirtVersion: c.version, Phase: c.phase, Enabled: c.enabled, Disabled: c.disabled}
		h := g.Hotplug()
		if !h.Known || h.HotplugVolumes != c.hotplug || h.Declarative != c.declar {
			t.Errorf("%s phase %q +%v -%v: got known=%v hotplug=%v declarative=%v, want hotplug=%v declarative=%v (%s)",
				c.version, c.phase, c.enabled, c.disabled, h.Known, h.HotplugVolumes, h.Declarative, c.hotplug, c.declar, h.Basis)
		}
	}
}

// What each gate set allows (pkg/virt-api/rest/volumes.go:63-65,220-222;
// pkg/virt-controller/watch/vm/vm.go:3568-3575).
func TestHotplugGates_routesAndSync(t *testing.T) {
	for _, c := range []struct {
		h                         snapshot.HotplugGates
		sync, ownedVMI, standalon bool
	}{
		{snapshot.HotplugGates{Known: true, Declarative: true}, true, false, true},
		{snapshot.HotplugGates{Known: true, HotplugVolumes: true, Declarative: true}, false, true, true},
		{snapshot.HotplugGates{Known: true, HotplugVolumes: true}, false, true, true},
		{snapshot.HotplugGates{Known: true}, false, false, false},
		{snapshot.HotplugGates{HotplugVolumes: true, Declarative: true}, false, false, false}, // unknown
	} {
		if c.h.DeclarativeSync() != c.sync || c.h.VMIRoute(true) != c.ownedVMI || c.h.VMIRoute(false) != c.standalon {
			t.Errorf("%+v: sync %v owned %v standalone %v", c.h, c.h.DeclarativeSync(), c.h.VMIRoute(true), c.h.VMIRoute(false))
		}
	}
}

// Unknown inputs are never guessed: no object, no or a bad version.
func TestHotplugGates_unknown(t *testing.T) {
	for _, g := range []snapshot.FeatureGates{
		{},
		{Known: true, Phase: "Deployed", Enabled: []string{snapshot.HotplugVolumesGate}},
		{Known: true, Phase: "Deployed", KubeVirtVersion: "devel"},
	} {
		if h := g.Hotplug(); h.Known || h.Basis == "" {
			t.Errorf("%+v: want unknown with a reason, got %+v", g, h)
		}
	}
}

// The gate evaluation never panics, decides from listed names only as
// KubeVirt's precedence says, and never reports a gate of a release that
// lacks it.
func FuzzHotplugGates(f *testing.F) {
	f.Add("v1.9.0", "Deployed", "HotplugVolumes", "DeclarativeHotplugVolumes")
	f.Add("v1.7.0", "", "DeclarativeHotplugVolumes", "")
	f.Add("1.5", "Deployed", "HotplugVolumes,HotplugVolumes", "HotplugVolumes")
	f.Fuzz(func(t *testing.T, version, phase, enabled, disabled string) {
		g := snapshot.FeatureGates{Known: true, KubeVirtVersion: version, Phase: phase,
			Enabled: strings.Split(enabled, ","), Disabled: strings.Split(disabled, ",")}
		h := g.Hotplug()
		v, err := snapshot.ParseKubeVirtVersion(version)
		if (err == nil) != h.Known {
			t.Fatalf("%q: known %v but parse error %v", version, h.Known, err)
		}
		if !h.Known {
			return
		}
		listedHP := phase != "" && slices.Contains(g.Enabled, snapshot.HotplugVolumesGate)
		if h.HotplugVolumes != listedHP {
			t.Fatalf("%+v: HotplugVolumes %v, but it is on exactly when listed (and the CR counts)", g, h.HotplugVolumes)
		}
		if v.Major == 1 && v.Minor < 6 || v.Major == 0 {
			if h.Declarative {
				t.Fatalf("%s has no DeclarativeHotplugVolumes gate", v)
			}
		}
		if phase == "" && h.Declarative != (v.Major > 1 || v.Major == 1 && v.Minor >= 9) {
			t.Fatalf("%+v: without status.phase only the defaults count", g)
		}
	})
}
