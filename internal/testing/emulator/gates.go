package emulator

import (
	"context"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	virtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Feature gates the emulator honours.
const (
	// GateHotplugVolumes is KubeVirt's deprecated gate for VMI-level
	// ("ephemeral") hot-plug and VM-level requests queued in status.
	GateHotplugVolumes = "HotplugVolumes"
	// GateDeclarativeHotplugVolumes is the Beta gate (on unless disabled) for
	// hot-plug through the VM spec.
	GateDeclarativeHotplugVolumes = "DeclarativeHotplugVolumes"
)

// gates are the feature gates in effect, and the fault modes set on the
// KubeVirt object.
type gates struct {
	hotplug     bool // HotplugVolumes
	declarative bool // DeclarativeHotplugVolumes
	// ignoreDryRun is the fault mode IgnoreDryRunAnnotation (not a gate).
	ignoreDryRun bool
}

// anyHotplug reports whether the volume subresources are served at all.
func (g gates) anyHotplug() bool { return g.hotplug || g.declarative }

// declarativeSync reports whether the VM controller syncs hot-plug volumes
// from the VM spec into the VMI (KubeVirt skips it when HotplugVolumes is on).
func (g gates) declarativeSync() bool { return g.declarative && !g.hotplug }

// gatesFrom evaluates KubeVirt's precedence: explicitly enabled, then
// explicitly disabled, then the default (Beta on, Deprecated off). As in
// KubeVirt, the object's configuration counts only once status.phase is
// set (pkg/virt-config/configuration.go:361-385, v1.9.0).
func gatesFrom(kv *virtv1.KubeVirt) gates {
	var dev *virtv1.DeveloperConfiguration
	if kv != nil && kv.Status.Phase != "" && kv.Spec.Configuration.DeveloperConfiguration != nil {
		dev = kv.Spec.Configuration.DeveloperConfiguration
	}
	enabled := func(gate string, beta bool) bool {
		if dev != nil {
			if slices.Contains(dev.FeatureGates, gate) {
				return true
			}
			if slices.Contains(dev.DisabledFeatureGates, gate) {
				return false
			}
		}
		return beta
	}
	return gates{
		hotplug:      enabled(GateHotplugVolumes, false),
		declarative:  enabled(GateDeclarativeHotplugVolumes, true),
		ignoreDryRun: kv != nil && kv.Annotations[IgnoreDryRunAnnotation] == "true",
	}
}

// gates reads the KubeVirt object live. A missing object means defaults.
func (e *Emulator) gates(ctx context.Context) (gates, error) {
	kv := &virtv1.KubeVirt{}
	err := e.client.Get(ctx, client.ObjectKey{Namespace: e.o.Namespace, Name: e.o.KubeVirtName}, kv)
	if apierrors.IsNotFound(err) {
		return gatesFrom(nil), nil
	}
	if err != nil {
		return gates{}, err
	}
	return gatesFrom(kv), nil
}

// SetFeatureGates replaces developerConfiguration.featureGates of the
// KubeVirt object with gates (none: the list is emptied).
func (e *Emulator) SetFeatureGates(ctx context.Context, gates ...string) error {
	return e.updateDeveloperConfiguration(ctx, func(dev *virtv1.DeveloperConfiguration) {
		dev.FeatureGates = slices.Clone(gates)
	})
}

// SetDisabledFeatureGates replaces developerConfiguration.disabledFeatureGates
// of the KubeVirt object with gates, e.g. to switch the Beta
// DeclarativeHotplugVolumes gate off.
func (e *Emulator) SetDisabledFeatureGates(ctx context.Context, gates ...string) error {
	return e.updateDeveloperConfiguration(ctx, func(dev *virtv1.DeveloperConfiguration) {
		dev.DisabledFeatureGates = slices.Clone(gates)
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
