package act

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
)

// removeVolume is the removevolume action of OrphanHotplugVolume,
// StuckPublish and DanglingVolumeReference: re-run the finding's own check
// on a live read,
// refuse unless the server is known to honour dryRun (KubeVirt v0.49 or
// later), dry run, re-check that nothing moved, call, and wait until the
// volume is gone.
func (e *Executor) removeVolume(f drift.Finding) action {
	if f.Check == check.DanglingVolumeReference {
		return e.removeDangling(f)
	}
	recheck := check.CheckVolume
	if f.Check == check.StuckPublish {
		recheck = check.CheckStuckPublish
	}
	a := action{
		read: func(ctx context.Context) (*snapshot.Snapshot, error) {
			return observe.ForVolume(ctx, e.Client, e.Observe, f.Namespace, f.Object.Name)
		},
		check: func(s *snapshot.Snapshot, now time.Time) (drift.Finding, bool) {
			return recheck(s, e.Policy, now, f.Namespace, f.Object.Name, f.Volume)
		},
	}
	a.targets = func(s *snapshot.Snapshot) (*write, *drift.Result) {
		kind, name := virtapi.VMI, f.Object.Name
		if f.Action.Type == check.VMRemoveVolume {
			kind = virtapi.VM
			own := check.ResolveOwner(s.Index(), &s.VMIs[0])
			if own.VM == nil {
				return nil, &drift.Result{Outcome: drift.Refused, Message: "live re-check: the owning VM is gone"}
			}
			name = own.VM.Name
		}
		return e.removeVolumeWrite(s, kind, f.Namespace, name, f.Volume, resourceVersions, e.volumeGone(f, kind))
	}
	return a
}

// removeVolumeWrite is the removevolume call on kind ns/name, refused before
// its dry run when the server may not honour dryRun.
func (e *Executor) removeVolumeWrite(s *snapshot.Snapshot, kind virtapi.Kind, ns, name, volume string,
	fingerprint func(*snapshot.Snapshot) string, done func(context.Context) drift.Result) (*write, *drift.Result) {
	if refusal := dryRunRefusal(s.FeatureGates, kind, ns, name, volume); refusal != nil {
		return nil, refusal
	}
	do := func(ctx context.Context, dryRun bool) *drift.Result {
		opts, step := &kubevirtv1.RemoveVolumeOptions{Name: volume}, "removevolume"
		if dryRun {
			opts.DryRun, step = virtapi.DryRunAll, "dry run"
		}
		if err := virtapi.RemoveVolume(ctx, e.Subresources, kind, ns, name, opts); err != nil {
			r := volumeRefusal(step, err)
			if r.Cause == drift.AlreadyGone {
				r = e.confirmGone(ctx, kind, ns, name, volume, r)
			}
			return &r
		}
		return nil
	}
	return &write{do: do, fingerprint: fingerprint, done: done}, nil
}

// confirmGone re-reads the addressed VM or VMI live after removevolume
// answered "does not exist": when its spec no longer lists the volume, the
// goal is reached (AlreadyGone); otherwise the answer disagrees with the
// live state and the action is refused as a conflict.
func (e *Executor) confirmGone(ctx context.Context, kind virtapi.Kind, ns, name, volume string, r drift.Result) drift.Result {
	listed, err := e.specLists(ctx, kind, ns, name, volume)
	switch {
	case err != nil:
		r.Outcome, r.Cause = drift.Failed, drift.ServerError
		r.Message += "; the live re-read to confirm it failed: " + err.Error()
	case listed:
		r.Outcome, r.Cause = drift.Refused, drift.Conflict
		r.Message += fmt.Sprintf("; but a live re-read of %s %s/%s still lists %q: nothing was changed, the next pass decides again", kind, ns, name, volume)
	default:
		r.Message += fmt.Sprintf("; a live re-read confirms %s %s/%s no longer lists %q: already removed", kind, ns, name, volume)
	}
	return r
}

// specLists reads kind ns/name live and reports whether its spec (the VM
// template, or the VMI spec) lists the volume by name. A missing object
// lists nothing.
func (e *Executor) specLists(ctx context.Context, kind virtapi.Kind, ns, name, volume string) (bool, error) {
	key := client.ObjectKey{Namespace: ns, Name: name}
	if kind == virtapi.VM {
		var vm kubevirtv1.VirtualMachine
		err := e.Client.Get(ctx, key, &vm)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && snapshot.TemplateVolume(&vm, volume) != nil, err
	}
	var vmi kubevirtv1.VirtualMachineInstance
	err := e.Client.Get(ctx, key, &vmi)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil && snapshot.VolumeNamed(vmi.Spec.Volumes, volume) != nil, err
}

func kindWord(k virtapi.Kind) string {
	if k == virtapi.VM {
		return "VM-level"
	}
	return "VMI-level"
}
