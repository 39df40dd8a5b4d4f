package emulator

import (
	"fmt"
	"sort"
	"sync"

	virtv1 "kubevirt.io/api/core/v1"
)

// The emulated virt-handler: it takes a Scheduled VMI to Running and moves
// hot-plug volumes through MountedToPod to Ready, and back out to
// UnMountedFromPod (pkg/virt-handler/vm.go:467-531 and 632-686, KubeVirt
// v1.9.0). It works per node and can be switched off per node
// (SetHandlerDown), as when virt-handler's pod on that node is down.

// handlerSet holds the nodes whose virt-handler is down.
type handlerSet struct {
	mu   sync.Mutex
	down map[string]bool
}

func (h *handlerSet) set(node string, down bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down == nil {
		h.down = map[string]bool{}
	}
	if down {
		h.down[node] = true
	} else {
		delete(h.down, node)
	}
}

func (h *handlerSet) isDown(node string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.down[node]
}

func (h *handlerSet) list() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.down))
	for n := range h.down {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// SetHandlerDown plays virt-handler on node being down (true) or back
// (false). While it is down, VMIs on that node do not become Running, and
// their hot-plug volumes are neither mounted nor unmounted: an unplug stays
// Ready (or MountedToPod) and its attachment pod is kept.
func (e *Emulator) SetHandlerDown(node string, down bool) {
	e.handlers.set(node, down)
	e.log.Info("virt-handler state set", "node", node, "down", down)
	if e.ctrl != nil {
		e.ctrl.enqueueAll(nil)
	}
}

// HandlersDown lists the nodes whose virt-handler is down, sorted.
func (e *Emulator) HandlersDown() []string { return e.handlers.list() }

// handlerDown reports whether the VMI's node has no working virt-handler.
func (e *Emulator) handlerDown(vmi *virtv1.VirtualMachineInstance) bool {
	return e.handlers.isDown(vmi.Status.NodeName)
}

// setHandlersDownFrom replaces the set of down nodes (the fault ConfigMap's
// key handlersDown).
func (e *Emulator) setHandlersDownFrom(nodes []string) {
	for _, n := range e.handlers.list() {
		e.handlers.set(n, false)
	}
	for _, n := range nodes {
		e.handlers.set(n, true)
	}
	e.log.Info("virt-handler states set from configmap", "down", len(nodes))
	e.ctrl.enqueueAll(nil)
}

// handlerVolumeStatuses is virt-handler's pass over status.volumeStatus: one
// step per volume and pass. A hot-plug volume in the spec whose attachment
// pod is ready is mounted (MountedToPod), then attached to the domain (a
// target, Ready). A volume that left the spec is detached from the domain
// (target cleared), then unmounted (UnMountedFromPod). Boot volumes get a
// target.
func handlerVolumeStatuses(vmi *virtv1.VirtualMachineInstance) []virtv1.VolumeStatus {
	inSpec := map[string]bool{}
	for _, v := range vmi.Spec.Volumes {
		inSpec[v.Name] = true
	}
	used := map[string]bool{}
	for _, s := range vmi.Status.VolumeStatus {
		if s.Target != "" {
			used[s.Target] = true
		}
	}
	out := make([]virtv1.VolumeStatus, 0, len(vmi.Status.VolumeStatus))
	for _, s := range vmi.Status.VolumeStatus {
		s = *s.DeepCopy()
		switch {
		case s.HotplugVolume == nil:
			if s.Target == "" && inSpec[s.Name] {
				s.Target = nextTarget(used, diskPrefix(vmi, s.Name, false))
			}
		case s.Target != "" && !inSpec[s.Name]:
			delete(used, s.Target)
			s.Target = "" // detached from the domain; unmounted next
		case s.Target != "":
			s.Phase, s.Reason, s.Message = virtv1.VolumeReady, reasonVolumeReady, fmt.Sprintf(msgVolumeReadyFmt, s.Name)
		default:
			handlerHotplugStep(vmi, &s, inSpec[s.Name], used)
		}
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// handlerHotplugStep moves a hot-plug volume without target one step
// (vm.go:497-531): mount, attach, or unmount.
func handlerHotplugStep(vmi *virtv1.VirtualMachineInstance, s *virtv1.VolumeStatus, inSpec bool, used map[string]bool) {
	mounted := inSpec && (s.Phase == virtv1.HotplugVolumeMounted || s.HotplugVolume.AttachPodUID != "")
	switch {
	case !inSpec:
		if s.Phase == virtv1.VolumeReady || s.Phase == virtv1.HotplugVolumeMounted || s.Phase == virtv1.HotplugVolumeAttachedToNode {
			s.Phase, s.Reason, s.Message = virtv1.HotplugVolumeUnMounted, reasonUnmounted, fmt.Sprintf(msgUnmountedFmt, s.Name)
		}
	case !mounted:
	case s.Phase == virtv1.HotplugVolumeMounted || s.Phase == virtv1.VolumeReady:
		s.Target = nextTarget(used, diskPrefix(vmi, s.Name, true))
		s.Phase, s.Reason, s.Message = virtv1.VolumeReady, reasonVolumeReady, fmt.Sprintf(msgVolumeReadyFmt, s.Name)
	case s.Phase == virtv1.VolumePending || s.Phase == virtv1.VolumeBound || s.Phase == virtv1.HotplugVolumeAttachedToNode:
		s.Phase, s.Reason, s.Message = virtv1.HotplugVolumeMounted, reasonMounted, fmt.Sprintf(msgMountedFmt, s.Name)
	}
}
