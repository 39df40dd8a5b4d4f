package act

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
)

// volumeGone waits, for at most the executor's wait timeout, until the
// VMI's status no longer lists the volume, and then decides from the last
// read what the unplug has reached (decideUnplug).
func (e *Executor) volumeGone(f drift.Finding, kind virtapi.Kind) func(context.Context) drift.Result {
	return func(ctx context.Context) drift.Result {
		var last *kubevirtv1.VirtualMachineInstance
		gone := func(ctx context.Context) bool {
			var vmi kubevirtv1.VirtualMachineInstance
			err := e.Client.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: f.Object.Name}, &vmi)
			switch {
			case apierrors.IsNotFound(err):
				last = nil
				return true
			case err != nil:
				return false // keep the last read; try again
			}
			last = &vmi
			return !listsVolume(&vmi, f.Volume)
		}
		res := e.waitFor(ctx, gone, fmt.Sprintf("%s removevolume %q done; the volume left the VMI status", kindWord(kind), f.Volume),
			func(timeout time.Duration) string {
				return fmt.Sprintf("%s removevolume %q accepted, but the VMI could not be read to follow it for %s", kindWord(kind), f.Volume, timeout)
			})
		if res.Outcome == drift.Applied || ctx.Err() != nil || last == nil {
			return res
		}
		return decideUnplug(last, f.Volume, kind, e.waitTimeout())
	}
}

// decideUnplug is the outcome of an accepted removevolume whose volume the
// VMI still lists after waited. KubeVirt keeps the status entry until the
// volume is unmounted and its attachment pod is gone: virt-controller drops
// it from the VMI spec (declaratively, or from a queued request), keeps a
// Ready or MountedToPod entry as it is while an attachment pod holds it
// and marks any other Detaching (pkg/virt-controller/watch/vmi/storage.go:
// 316-352, KubeVirt v1.9.0); virt-handler on the VMI's node unmounts it to
// UnMountedFromPod (pkg/virt-handler/vm.go:514-522); virt-controller then
// deletes the attachment pod and the entry goes.
//
//   - still in the VMI spec: virt-controller has not applied the removal
//     yet (Pending);
//   - UnMountedFromPod or Detaching: unmounted, the pod is going (Pending,
//     progress);
//   - otherwise (Ready, MountedToPod, ...): virt-handler has not unmounted
//     it; a pod is never deleted while it holds such a volume
//     (volume-hotplug.go:105-117), so this does not end by itself (Failed,
//     UnmountStuck).
func decideUnplug(vmi *kubevirtv1.VirtualMachineInstance, volume string, kind virtapi.Kind, waited time.Duration) drift.Result {
	vs := volumeStatusOf(vmi, volume)
	if vs == nil {
		return drift.Result{Outcome: drift.Applied, Message: fmt.Sprintf("%s removevolume %q done; the volume left the VMI status", kindWord(kind), volume)}
	}
	what := fmt.Sprintf("%s removevolume %q accepted", kindWord(kind), volume)
	pod := "<none>"
	if vs.HotplugVolume != nil && vs.HotplugVolume.AttachPodName != "" {
		pod = vs.HotplugVolume.AttachPodName
	}
	node := vmi.Status.NodeName
	if node == "" {
		node = "<unknown>"
	}
	switch {
	case snapshot.VolumeNamed(vmi.Spec.Volumes, volume) != nil:
		return drift.Result{Outcome: drift.Pending, Message: fmt.Sprintf("%s, but after %s the VMI spec still lists it: virt-controller has not applied the removal yet (phase %s)", what, waited, vs.Phase)}
	case vs.Phase == kubevirtv1.HotplugVolumeUnMounted || vs.Phase == kubevirtv1.HotplugVolumeDetaching:
		return drift.Result{Outcome: drift.Pending, Message: fmt.Sprintf("%s; after %s virt-handler has unmounted it (phase %s) and attachment pod %s is being removed", what, waited, vs.Phase, pod)}
	}
	return drift.Result{Outcome: drift.Failed, Cause: UnmountStuck, Message: fmt.Sprintf(
		"%s and the VMI spec no longer lists it, but virt-handler on node %s has not unmounted %q after %s (phase %s, attachment pod %s); "+
			"check virt-handler on that node (`kubectl get pods -n kubevirt -l kubevirt.io=virt-handler -o wide`) and its logs",
		what, node, volume, waited, vs.Phase, pod)}
}

func volumeStatusOf(vmi *kubevirtv1.VirtualMachineInstance, volume string) *kubevirtv1.VolumeStatus {
	for i := range vmi.Status.VolumeStatus {
		if vmi.Status.VolumeStatus[i].Name == volume {
			return &vmi.Status.VolumeStatus[i]
		}
	}
	return nil
}

func listsVolume(vmi *kubevirtv1.VirtualMachineInstance, volume string) bool {
	return volumeStatusOf(vmi, volume) != nil
}
