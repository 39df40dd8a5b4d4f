package act

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
)

// removeDangling removes a dangling hot-plugged reference found by
// DanglingVolumeReference: from the VM spec (VM-level removevolume) or from
// a running VMI (VMI-level). Every object of the reference's snapshot is
// fingerprinted: a change to any of them between dry run and write refuses.
func (e *Executor) removeDangling(f drift.Finding) action {
	kind := virtapi.VMI
	if f.Object.Kind == "VirtualMachine" {
		kind = virtapi.VM
	}
	a := action{
		read: func(ctx context.Context) (*snapshot.Snapshot, error) {
			return observe.VMReferences(ctx, e.Client, f.Namespace, f.Object.Name, observe.Claims{Volume: f.Volume})
		},
		check: func(s *snapshot.Snapshot, now time.Time) (drift.Finding, bool) {
			return check.CheckDangling(s, e.Policy, now, f.Namespace, f.Object.Kind, f.Object.Name, f.Volume)
		},
		explain: storageBack,
	}
	done := e.volumeGone(f, kind)
	if kind == virtapi.VM {
		done = e.vmSpecDropped(f)
	}
	a.targets = func(s *snapshot.Snapshot) (*write, *drift.Result) {
		return e.removeVolumeWrite(s, kind, f.Namespace, f.Object.Name, f.Volume, danglingVersions, done)
	}
	return a
}

// storageBack names the storage that exists again, if any: a PVC or
// DataVolume re-created (or restored) under the same name since the plan.
func storageBack(s *snapshot.Snapshot) string {
	var found []string
	for _, pvc := range s.PVCs {
		if pvc.DeletionTimestamp == nil {
			found = append(found, fmt.Sprintf("PVC %s/%s exists (uid %s, created %s)", pvc.Namespace, pvc.Name, pvc.UID, pvc.CreationTimestamp.UTC().Format(time.RFC3339)))
		}
	}
	for _, dv := range s.DataVolumes {
		if dv.DeletionTimestamp == nil && dv.Status.Phase != cdiv1.Failed {
			found = append(found, fmt.Sprintf("DataVolume %s/%s exists (uid %s, phase %s)", dv.Namespace, dv.Name, dv.UID, dv.Status.Phase))
		}
	}
	if len(found) == 0 {
		return ""
	}
	return "the reference is no longer dangling: " + strings.Join(found, "; ") + " (re-created or restored since the plan)"
}

// danglingVersions fingerprints every object of a single-reference
// snapshot: a change to any of them between dry run and write refuses.
func danglingVersions(s *snapshot.Snapshot) string {
	var b strings.Builder
	b.WriteString(resourceVersions(s))
	for _, p := range s.PVCs {
		fmt.Fprintf(&b, " pvc:%s/%s", p.UID, p.ResourceVersion)
	}
	for _, d := range s.DataVolumes {
		fmt.Fprintf(&b, " dv:%s/%s", d.UID, d.ResourceVersion)
	}
	for _, p := range s.AttachmentPods {
		fmt.Fprintf(&b, " pod:%s/%s", p.UID, p.ResourceVersion)
	}
	return b.String()
}

// vmSpecDropped waits until the VM's template no longer lists the volume
// (with the HotplugVolumes gate the request is queued in the VM status
// first and applied by virt-controller).
func (e *Executor) vmSpecDropped(f drift.Finding) func(context.Context) drift.Result {
	return func(ctx context.Context) drift.Result {
		dropped := func(ctx context.Context) bool {
			var vm kubevirtv1.VirtualMachine
			err := e.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: f.Object.Name}, &vm)
			return apierrors.IsNotFound(err) || (err == nil && snapshot.TemplateVolume(&vm, f.Volume) == nil)
		}
		return e.waitFor(ctx, dropped, fmt.Sprintf("VM-level removevolume %q done; the dangling reference left the VM spec", f.Volume),
			func(timeout time.Duration) string {
				return fmt.Sprintf("VM-level removevolume %q accepted, but the VM spec still lists the volume after %s", f.Volume, timeout)
			})
	}
}
