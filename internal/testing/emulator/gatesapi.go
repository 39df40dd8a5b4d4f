package emulator

import (
	"context"
	"slices"

	virtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/testing/emulator/gates"
)

// Feature gates the emulator honours (package gates reads them).
const (
	GateHotplugVolumes            = gates.HotplugVolumes
	GateDeclarativeHotplugVolumes = gates.DeclarativeHotplugVolumes
)

// gates reads the KubeVirt object live. A missing object means defaults.
func (e *Emulator) gates(ctx context.Context) (gates.Gates, error) {
	return gates.Read(ctx, e.client, client.ObjectKey{Namespace: e.o.Namespace, Name: e.o.KubeVirtName})
}

// SetFeatureGates replaces developerConfiguration.featureGates of the
// KubeVirt object with gates (none: the list is emptied).
func (e *Emulator) SetFeatureGates(ctx context.Context, names ...string) error {
	return e.updateDeveloperConfiguration(ctx, func(dev *virtv1.DeveloperConfiguration) {
		dev.FeatureGates = slices.Clone(names)
	})
}

// SetDisabledFeatureGates replaces developerConfiguration.disabledFeatureGates
// of the KubeVirt object with gates, e.g. to switch the Beta
// DeclarativeHotplugVolumes gate off.
func (e *Emulator) SetDisabledFeatureGates(ctx context.Context, names ...string) error {
	return e.updateDeveloperConfiguration(ctx, func(dev *virtv1.DeveloperConfiguration) {
		dev.DisabledFeatureGates = slices.Clone(names)
	})
}

func (e *Emulator) updateDeveloperConfiguration(ctx context.Context, change func(*virtv1.DeveloperConfiguration)) error {
	return e.updateKubeVirt(ctx, false, func(kv *virtv1.KubeVirt) {
		if kv.Spec.Configuration.DeveloperConfiguration == nil {
			kv.Spec.Configuration.DeveloperConfiguration = &virtv1.DeveloperConfiguration{}
		}
		change(kv.Spec.Configuration.DeveloperConfiguration)
	})
}
