package gates

import (
	"testing"

	virtv1 "kubevirt.io/api/core/v1"
)

func TestGatesFrom(t *testing.T) {
	kv := func(enabled, disabled []string) *virtv1.KubeVirt {
		k := &virtv1.KubeVirt{}
		k.Status.Phase = virtv1.KubeVirtPhaseDeployed
		k.Spec.Configuration.DeveloperConfiguration = &virtv1.DeveloperConfiguration{FeatureGates: enabled, DisabledFeatureGates: disabled}
		return k
	}
	undeployed := kv([]string{HotplugVolumes}, []string{DeclarativeHotplugVolumes})
	undeployed.Status.Phase = ""
	cases := []struct {
		name string
		kv   *virtv1.KubeVirt
		want Gates
	}{
		{"no KubeVirt -> declarative only (Beta default)", nil, Gates{Declarative: true}},
		{"empty lists -> declarative only", kv(nil, nil), Gates{Declarative: true}},
		{"HotplugVolumes listed -> both", kv([]string{HotplugVolumes}, nil), Gates{Hotplug: true, Declarative: true}},
		{"declarative disabled -> none", kv(nil, []string{DeclarativeHotplugVolumes}), Gates{}},
		{"enabled beats disabled -> declarative", kv([]string{DeclarativeHotplugVolumes}, []string{DeclarativeHotplugVolumes}), Gates{Declarative: true}},
		{"HotplugVolumes only -> hotplug", kv([]string{HotplugVolumes}, []string{DeclarativeHotplugVolumes}), Gates{Hotplug: true}},
		// configuration.go:361-385: without status.phase the CR does not count.
		{"no status.phase -> defaults", undeployed, Gates{Declarative: true}},
	}
	for _, c := range cases {
		if got := From(c.kv); got != c.want {
			t.Errorf("%s: got %+v", c.name, got)
		}
	}
	if (Gates{Hotplug: true, Declarative: true}).DeclarativeSync() {
		t.Error("both gates -> no declarative sync (KubeVirt skips it under HotplugVolumes)")
	}
}
