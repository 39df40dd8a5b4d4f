// Package gates reads the KubeVirt feature gates the emulated virt-api and
// virt-controller honour, with KubeVirt's precedence.
package gates

import (
	"context"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	virtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The feature gates honoured.
const (
	// HotplugVolumes is KubeVirt's deprecated gate for VMI-level
	// ("ephemeral") hot-plug and VM-level requests queued in status.
	HotplugVolumes = "HotplugVolumes"
	// DeclarativeHotplugVolumes is the Beta gate (on unless disabled) for
	// hot-plug through the VM spec.
	DeclarativeHotplugVolumes = "DeclarativeHotplugVolumes"
)

// IgnoreDryRunAnnotation set to "true" on the KubeVirt object is a fault
// mode: addvolume and removevolume ignore dryRun and make the change, as
// virt-api before v0.49 did (its AddVolumeOptions and RemoveVolumeOptions
// had no dryRun field, so the field was dropped and the call was real).
const IgnoreDryRunAnnotation = "emulator.tether.dev/ignore-dry-run"

// Gates are the feature gates in effect, and the fault modes set on the
// KubeVirt object.
type Gates struct {
	Hotplug     bool // HotplugVolumes
	Declarative bool // DeclarativeHotplugVolumes
	// IgnoreDryRun is the fault mode IgnoreDryRunAnnotation (not a gate).
	IgnoreDryRun bool
}

// AnyHotplug reports whether the volume subresources are served at all.
func (g Gates) AnyHotplug() bool { return g.Hotplug || g.Declarative }

// DeclarativeSync reports whether the VM controller syncs hot-plug volumes
// from the VM spec into the VMI (KubeVirt skips it when HotplugVolumes is on).
func (g Gates) DeclarativeSync() bool { return g.Declarative && !g.Hotplug }

// From evaluates KubeVirt's precedence: explicitly enabled, then
// explicitly disabled, then the default (Beta on, Deprecated off). As in
// KubeVirt, the object's configuration counts only once status.phase is
// set (pkg/virt-config/configuration.go:361-385, v1.9.0).
func From(kv *virtv1.KubeVirt) Gates {
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
	return Gates{
		Hotplug:      enabled(HotplugVolumes, false),
		Declarative:  enabled(DeclarativeHotplugVolumes, true),
		IgnoreDryRun: kv != nil && kv.Annotations[IgnoreDryRunAnnotation] == "true",
	}
}

// Read reads the KubeVirt object live. A missing object means defaults.
func Read(ctx context.Context, c client.Reader, key client.ObjectKey) (Gates, error) {
	kv := &virtv1.KubeVirt{}
	err := c.Get(ctx, key, kv)
	if apierrors.IsNotFound(err) {
		return From(nil), nil
	}
	if err != nil {
		return Gates{}, err
	}
	return From(kv), nil
}
