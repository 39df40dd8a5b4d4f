// Package virthandler is the one emulation of KubeVirt's virt-handler, the
// node agent that needs a host (libvirt, mounts, a domain). Both the
// emulator and the world with real virt-api and virt-controller
// (internal/testing/realkubevirt) run it, so the conformance suite compares
// the real virt-controller against the emulated one over the same handler.
//
// It is a set of pure steps over a VMI, one observable step per pass, as
// pkg/virt-handler/vm.go of KubeVirt v1.9.0 takes them (line numbers below
// are that tag's; v1.7.0 has the same functions 24 lines earlier):
//
//   - Start: a VMI Scheduled on the node starts its domain and is Running,
//     with the SELinux context "none" of a host without SELinux
//     (updateSELinuxContext, vm.go:1033-1048) and the domain's machine type
//     (updateMachineType, vm.go:2456-2463);
//   - Volumes: every volume status moves at most one step
//     (updateVolumeStatusesFromDomain, vm.go:632-682): a hot-plug volume in
//     the spec whose attachment pod runs on the host is mounted
//     (MountedToPod), then attached to the domain (a target, Ready); one that
//     left the spec is detached from the domain (target cleared), then
//     unmounted (UnMountedFromPod); boot volumes get a target; statuses are
//     sorted by name (vm.go:676-678);
//   - Shutdown: a deleted VMI's domain is shut down and the VMI Succeeded
//     (processVmShutdown vm.go:1653, calculateVmPhaseForStatusReason
//     vm.go:2319-2370);
//   - MigrationSource and MigrationTarget: live migration on the source and
//     the target node (migration.go here, after migration-source.go and
//     migration-target.go); while a migration runs, Step leaves the VMI
//     alone (vm.go:410-413).
//
// Switch holds the nodes whose virt-handler is down: there none of these
// steps is taken, as when virt-handler's pod on that node has crashed.
package virthandler

import (
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	virtv1 "kubevirt.io/api/core/v1"
)

// KubeVirt's reasons and messages for the handler's volume phases
// (vm.go:498-531).
const (
	ReasonVolumeReady = "VolumeReady"
	ReasonMounted     = "VolumeMountedToPod"
	ReasonUnmounted   = "VolumeUnMountedFromPod"
	msgVolumeReadyFmt = "Successfully attach hotplugged volume %s to VM"
	msgMountedFmt     = "Volume %s has been mounted in virt-launcher pod"
	msgUnmountedFmt   = "Volume %s has been unmounted from virt-launcher pod"
)

// MachineType is the machine type the emulated domains report.
const MachineType = "q35"

// Switch holds the nodes whose virt-handler is down (or any other set of
// names switched on, such as the VMIs whose migration is held). Its zero
// value has every handler up; it is safe for concurrent use.
type Switch struct {
	mu   sync.Mutex
	down map[string]bool
}

// SetDown plays virt-handler on node being down (true) or back (false).
func (s *Switch) SetDown(node string, down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down == nil {
		s.down = map[string]bool{}
	}
	if down {
		s.down[node] = true
	} else {
		delete(s.down, node)
	}
}

// Down reports whether node's virt-handler is down.
func (s *Switch) Down(node string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.down[node]
}

// List names the nodes whose virt-handler is down, sorted.
func (s *Switch) List() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.down))
	for n := range s.down {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Replace makes exactly nodes the ones that are down.
func (s *Switch) Replace(nodes []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = map[string]bool{}
	for _, n := range nodes {
		s.down[n] = true
	}
}

// Mounted is what the host knows of hot-plug mounts: the UIDs of the
// attachment pods whose volumes are mounted on it. virt-handler finds a
// hot-plug volume by the attachment pod UID that virt-controller recorded
// (IsMounted, hotplug-disk/mount.go:865); the pod's volumes are there once the
// pod runs.
type Mounted map[types.UID]bool

// MountedBy are the attachment pods among pods that run and are not being
// deleted.
func MountedBy(pods []*corev1.Pod) Mounted {
	out := Mounted{}
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out[p.UID] = true
		}
	}
	return out
}

// Step takes the one step the handler on the VMI's node takes for it this
// pass, given what the host has mounted, and reports whether it changed
// the VMI. A VMI on a node whose handler is down (per sw, which may be
// nil) is left alone.
func Step(vmi *virtv1.VirtualMachineInstance, host Mounted, sw *Switch) bool {
	if sw != nil && sw.Down(vmi.Status.NodeName) {
		return false
	}
	switch {
	case vmi.DeletionTimestamp == nil && MigrationInProgress(vmi):
		return false
	case vmi.DeletionTimestamp != nil:
		return Shutdown(vmi)
	case vmi.Status.Phase == virtv1.Scheduled:
		return Start(vmi)
	case vmi.Status.Phase == virtv1.Running:
		return SetVolumes(vmi, Volumes(vmi, host))
	}
	return false
}

// Start takes a Scheduled VMI to Running, as virt-handler does once the
// domain runs (vm.go:1097-1140 updateVMIStatus; the phase from
// calculateVmPhaseForStatusReason, vm.go:2319; the update only when the
// status changed, vm.go:1135-1138), with the SELinux context
// and machine type it reports. It reports whether it changed the VMI.
func Start(vmi *virtv1.VirtualMachineInstance) bool {
	if vmi.Status.Phase == virtv1.Running {
		return false
	}
	setPhase(vmi, virtv1.Running)
	// virt-controller copies the context into attachment pods and creates
	// none while it is missing.
	if vmi.Status.SelinuxContext == "" {
		vmi.Status.SelinuxContext = "none"
	}
	if vmi.Status.Machine == nil {
		vmi.Status.Machine = &virtv1.Machine{Type: MachineType}
	}
	return true
}

// Shutdown plays the domain of a deleted VMI shut down: the VMI Succeeded.
// A VMI already final is left alone.
func Shutdown(vmi *virtv1.VirtualMachineInstance) bool {
	if vmi.IsFinal() {
		return false
	}
	setPhase(vmi, virtv1.Succeeded)
	return true
}

// setPhase sets the phase with its transition timestamp
// (controller.SetVMIPhaseTransitionTimestamp, called at vm.go:1133).
func setPhase(vmi *virtv1.VirtualMachineInstance, phase virtv1.VirtualMachineInstancePhase) {
	vmi.Status.Phase = phase
	vmi.Status.PhaseTransitionTimestamps = append(vmi.Status.PhaseTransitionTimestamps,
		virtv1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: phase, PhaseTransitionTimestamp: metav1.Now()})
}

// SetVolumes replaces the VMI's volume statuses when they differ and
// reports whether they did.
func SetVolumes(vmi *virtv1.VirtualMachineInstance, status []virtv1.VolumeStatus) bool {
	if equality.Semantic.DeepEqual(vmi.Status.VolumeStatus, status) {
		return false
	}
	vmi.Status.VolumeStatus = status
	return true
}

// Volumes is the handler's pass over status.volumeStatus: one step per
// volume (updateVolumeStatusesFromDomain, vm.go:632-682), sorted by name.
func Volumes(vmi *virtv1.VirtualMachineInstance, host Mounted) []virtv1.VolumeStatus {
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
			// Out of the spec: the domain detaches the disk first; with no
			// target left, the volume is unmounted on the next pass.
			delete(used, s.Target)
			s.Target = ""
		case s.Target != "":
			// vm.go:525-530: in the domain, so Ready.
			s.Phase, s.Reason, s.Message = virtv1.VolumeReady, ReasonVolumeReady, fmt.Sprintf(msgVolumeReadyFmt, s.Name)
		default:
			hotplugStep(vmi, &s, inSpec[s.Name], host, used)
		}
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// hotplugStep moves a hot-plug volume without target one step
// (updateHotplugVolumeStatus, vm.go:498-531): mount, attach, or unmount.
func hotplugStep(vmi *virtv1.VirtualMachineInstance, s *virtv1.VolumeStatus, inSpec bool, host Mounted, used map[string]bool) {
	mounted := s.HotplugVolume.AttachPodUID != "" && host[s.HotplugVolume.AttachPodUID]
	switch {
	case !inSpec:
		// Out of the spec, the handler unmounts it; then IsMounted is false
		// and the phase moves on (vm.go:514-522, canUpdateToUnmounted :471).
		if canUnmount(s.Phase) {
			s.Phase, s.Reason, s.Message = virtv1.HotplugVolumeUnMounted, ReasonUnmounted, fmt.Sprintf(msgUnmountedFmt, s.Name)
		}
	case s.Phase == virtv1.HotplugVolumeMounted || (s.Phase == virtv1.VolumeReady && mounted):
		// Mounted in the launcher pod: virt-launcher attaches it to the
		// domain, which gives it a target (vm.go:663).
		s.Target = nextTarget(used, diskPrefix(vmi, s.Name, true))
		s.Phase, s.Reason, s.Message = virtv1.VolumeReady, ReasonVolumeReady, fmt.Sprintf(msgVolumeReadyFmt, s.Name)
	case mounted && canMount(s.Phase):
		// vm.go:505-513, canUpdateToMounted :467.
		s.Phase, s.Reason, s.Message = virtv1.HotplugVolumeMounted, ReasonMounted, fmt.Sprintf(msgMountedFmt, s.Name)
	}
}

// canMount and canUnmount are the phases virt-handler moves from
// (canUpdateToMounted vm.go:467, canUpdateToUnmounted vm.go:471).
func canMount(p virtv1.VolumePhase) bool {
	return p == virtv1.VolumeBound || p == virtv1.VolumePending || p == virtv1.HotplugVolumeAttachedToNode
}

func canUnmount(p virtv1.VolumePhase) bool {
	return p == virtv1.VolumeReady || p == virtv1.HotplugVolumeMounted || p == virtv1.HotplugVolumeAttachedToNode
}

// diskPrefix is the device prefix of the volume's disk: "vd" for virtio,
// "sd" for sata, scsi and usb. Hot-plugged disks default to scsi, others to
// virtio; a volume without a disk gets "".
func diskPrefix(vmi *virtv1.VirtualMachineInstance, volume string, hot bool) string {
	for _, d := range vmi.Spec.Domain.Devices.Disks {
		if d.Name != volume {
			continue
		}
		var bus virtv1.DiskBus
		switch {
		case d.Disk != nil:
			bus = d.Disk.Bus
		case d.CDRom != nil:
			bus = d.CDRom.Bus
		case d.LUN != nil:
			bus = d.LUN.Bus
		}
		if bus == "" {
			bus = virtv1.DiskBusVirtio
			if hot {
				bus = virtv1.DiskBusSCSI
			}
		}
		if bus == virtv1.DiskBusVirtio {
			return "vd"
		}
		return "sd"
	}
	return ""
}

// nextTarget is the first free device name with the prefix.
func nextTarget(used map[string]bool, prefix string) string {
	if prefix == "" {
		return ""
	}
	for c := 'a'; c <= 'z'; c++ {
		t := prefix + string(c)
		if !used[t] {
			used[t] = true
			return t
		}
	}
	return ""
}
