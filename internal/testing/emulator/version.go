package emulator

import (
	"context"

	"k8s.io/client-go/util/retry"
	virtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/testing/emulator/gates"
)

// DefaultKubeVirtVersion is the KubeVirt release the emulator plays, shown
// in the KubeVirt object's status.observedKubeVirtVersion.
const DefaultKubeVirtVersion = "v1.9.0"

// IgnoreDryRunAnnotation set to "true" on the KubeVirt object is a fault
// mode (gates.IgnoreDryRunAnnotation): addvolume and removevolume ignore
// dryRun and make the change, as virt-api before v0.49 did. Combine it with
// SetKubeVirtVersion("v0.48.0") to play such a cluster.
const IgnoreDryRunAnnotation = gates.IgnoreDryRunAnnotation

// SetKubeVirtVersion sets status.observedKubeVirtVersion and
// status.targetKubeVirtVersion of the KubeVirt object, as virt-operator
// does once it has deployed that version; "" clears both (the version is
// unknown). The emulator's behaviour does not change with the version.
func (e *Emulator) SetKubeVirtVersion(ctx context.Context, version string) error {
	return e.updateKubeVirt(ctx, true, func(kv *virtv1.KubeVirt) {
		kv.Status.ObservedKubeVirtVersion = version
		kv.Status.TargetKubeVirtVersion = version
	})
}

// SetIgnoreDryRun switches the fault mode IgnoreDryRunAnnotation on or off.
func (e *Emulator) SetIgnoreDryRun(ctx context.Context, on bool) error {
	return e.updateKubeVirt(ctx, false, func(kv *virtv1.KubeVirt) {
		if on {
			if kv.Annotations == nil {
				kv.Annotations = map[string]string{}
			}
			kv.Annotations[IgnoreDryRunAnnotation] = "true"
		} else {
			delete(kv.Annotations, IgnoreDryRunAnnotation)
		}
	})
}

// updateKubeVirt reads the KubeVirt object, changes it and writes it back
// (its status with status), retrying on conflicts.
func (e *Emulator) updateKubeVirt(ctx context.Context, status bool, change func(*virtv1.KubeVirt)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		kv := &virtv1.KubeVirt{}
		if err := e.client.Get(ctx, client.ObjectKey{Namespace: e.o.Namespace, Name: e.o.KubeVirtName}, kv); err != nil {
			return err
		}
		change(kv)
		if status {
			return e.client.Status().Update(ctx, kv)
		}
		return e.client.Update(ctx, kv)
	})
}
