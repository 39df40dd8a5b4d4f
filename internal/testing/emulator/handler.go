package emulator

import (
	virtv1 "kubevirt.io/api/core/v1"
)

// virt-handler is played by package virthandler, the same emulation the
// world with real KubeVirt runs; the emulator calls its steps from its own
// sync (vmi.go) and keeps the switch of nodes whose handler is down.

// SetHandlerDown plays virt-handler on node being down (true) or back
// (false). While it is down, VMIs on that node do not become Running, and
// their hot-plug volumes are neither mounted nor unmounted: an unplug stays
// Ready (or MountedToPod) and its attachment pod is kept.
func (e *Emulator) SetHandlerDown(node string, down bool) {
	e.handlers.SetDown(node, down)
	e.log.Info("virt-handler state set", "node", node, "down", down)
	if e.ctrl != nil {
		e.ctrl.enqueueAll(nil)
	}
}

// HandlersDown lists the nodes whose virt-handler is down, sorted.
func (e *Emulator) HandlersDown() []string { return e.handlers.List() }

// handlerDown reports whether the VMI's node has no working virt-handler.
func (e *Emulator) handlerDown(vmi *virtv1.VirtualMachineInstance) bool {
	return e.handlers.Down(vmi.Status.NodeName)
}

// setHandlersDownFrom replaces the set of down nodes (the fault ConfigMap's
// key handlersDown).
func (e *Emulator) setHandlersDownFrom(nodes []string) {
	e.handlers.Replace(nodes)
	e.log.Info("virt-handler states set from configmap", "down", len(nodes))
	e.ctrl.enqueueAll(nil)
}
