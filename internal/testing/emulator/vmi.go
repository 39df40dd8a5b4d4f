package emulator

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/testing/emulator/volreq"
	"github.com/tether-dev/tether/internal/testing/virthandler"
)

// syncVMI plays virt-controller, the kubelet and virt-handler for one VMI,
// one step per pass (see pace): phase Pending, launcher pod and Scheduling,
// Scheduled on a node once the pod runs, Running once the node's handler
// takes it; then attachment pods and volume status. It reports whether it
// wrote, so that one more pass can confirm the result; after>0 asks to look
// again once the pod cache has caught up with our own writes.
func (e *Emulator) syncVMI(ctx context.Context, vmi *virtv1.VirtualMachineInstance) (bool, time.Duration, error) {
	id := types.NamespacedName{Namespace: vmi.Namespace, Name: vmi.Name}
	if !e.ctrl.expect.satisfied(ctx, e.ctrl.cache, id) {
		return false, cacheWait, nil
	}
	launchers, err := e.listPods(ctx, vmi.Namespace, launcherApp)
	if err != nil {
		return false, 0, err
	}
	attach, err := e.listPods(ctx, vmi.Namespace, hotplugApp)
	if err != nil {
		return false, 0, err
	}
	if vmi.DeletionTimestamp != nil {
		return e.syncDeletingVMI(ctx, id, vmi, launchers, attach)
	}
	if vmi.IsFinal() {
		// lifecycle.go:78-84: a final VMI's attachment pods go.
		return e.deleteAttachmentPods(ctx, id, vmi, launchers, attach)
	}
	node := vmi.Status.NodeName
	if node == "" {
		node = e.o.NodeName
	}
	active, old := splitLaunchers(vmi, node, launchers)
	if vmi.Status.Phase != virtv1.Running {
		return e.bootStep(ctx, id, vmi, node, active)
	}
	mig := volreq.Migrating(vmi)
	if active == nil {
		if mig {
			return false, 0, nil
		}
		_, err := e.createLauncher(ctx, id, vmi, node)
		return err == nil, 0, err
	}
	if !mig && len(old) > 0 {
		// A finished migration leaves the source pods behind.
		return true, 0, e.deleteSourcePods(ctx, id, old, attach)
	}
	if settled, err := e.settleRunning(ctx, id, vmi, node, active); settled || err != nil {
		return settled, 0, err
	}
	if mig {
		return false, 0, nil // hot-plug work waits for the migration to end
	}
	hot, err := e.syncHotplug(ctx, vmi, active, attach)
	return hot, 0, err
}

// bootStep takes a VMI that is not Running one phase further: "" →
// Pending → Scheduling (launcher pod created) → Scheduled (the pod runs on
// node) → Running (virt-handler on node took it).
func (e *Emulator) bootStep(ctx context.Context, id types.NamespacedName, vmi *virtv1.VirtualMachineInstance, node string, active *corev1.Pod) (bool, time.Duration, error) {
	switch vmi.Status.Phase {
	case "":
		// virt-api's mutating webhook adds the finalizer on create.
		if !hasFinalizer(vmi, virtv1.VirtualMachineInstanceFinalizer) {
			vmi.Finalizers = append(vmi.Finalizers, virtv1.VirtualMachineInstanceFinalizer)
		}
		setPhase(vmi, virtv1.Pending)
	case virtv1.Pending:
		if active == nil {
			if _, err := e.createLauncher(ctx, id, vmi, node); err != nil {
				return false, 0, err
			}
		}
		setPhase(vmi, virtv1.Scheduling)
	case virtv1.Scheduling:
		if active == nil {
			_, err := e.createLauncher(ctx, id, vmi, node)
			return err == nil, 0, err
		}
		if !running(active) {
			return true, 0, e.markRunning(ctx, id, active)
		}
		setPhase(vmi, virtv1.Scheduled)
		setNode(vmi, node, active.UID)
	case virtv1.Scheduled:
		// virt-handler on the node starts the domain; virt-controller's
		// part of a Running VMI (active pod, Ready) follows in the same
		// write, as the emulator's controller sees it at once.
		if e.handlerDown(vmi) || !virthandler.Start(vmi) {
			return false, 0, nil
		}
		e.log.Info("VMI running", "namespace", vmi.Namespace, "vmi", vmi.Name, "node", node)
		if st := runningStatus(vmi, node, active); st != nil {
			vmi.Status = *st
		}
	default:
		return false, 0, nil
	}
	return true, 0, e.writeVMI(ctx, vmi)
}

// writeVMI writes the whole VMI: as in KubeVirt, its CRD has no status
// subresource.
func (e *Emulator) writeVMI(ctx context.Context, vmi *virtv1.VirtualMachineInstance) error {
	return e.client.Update(ctx, vmi)
}

func setPhase(vmi *virtv1.VirtualMachineInstance, phase virtv1.VirtualMachineInstancePhase) {
	vmi.Status.Phase = phase
	vmi.Status.PhaseTransitionTimestamps = append(vmi.Status.PhaseTransitionTimestamps, virtv1.VirtualMachineInstancePhaseTransitionTimestamp{
		Phase: phase, PhaseTransitionTimestamp: metav1.Now(),
	})
}

// setNode records the node and launcher pod in labels and status.
func setNode(vmi *virtv1.VirtualMachineInstance, node string, pod types.UID) {
	if vmi.Labels == nil {
		vmi.Labels = map[string]string{}
	}
	vmi.Labels[virtv1.NodeNameLabel] = node
	vmi.Status.NodeName = node
	vmi.Status.ActivePods = map[types.UID]string{pod: node}
}

// deleteAttachmentPods deletes the live attachment pods of the VMI's
// launcher pods.
func (e *Emulator) deleteAttachmentPods(ctx context.Context, id types.NamespacedName, vmi *virtv1.VirtualMachineInstance, launchers, attach []corev1.Pod) (bool, time.Duration, error) {
	wrote := false
	for i := range launchers {
		if !metav1.IsControlledBy(&launchers[i], vmi) {
			continue
		}
		for j := range attach {
			if metav1.IsControlledBy(&attach[j], &launchers[i]) && attach[j].DeletionTimestamp == nil {
				if err := e.deletePod(ctx, id, &attach[j]); err != nil {
					return wrote, 0, err
				}
				wrote = true
			}
		}
	}
	return wrote, 0, nil
}

// splitLaunchers picks, of the VMI's live launcher pods, the first one on
// node as the active one; the others are old (a migration's source).
func splitLaunchers(vmi *virtv1.VirtualMachineInstance, node string, launchers []corev1.Pod) (active *corev1.Pod, old []*corev1.Pod) {
	for i := range launchers {
		p := &launchers[i]
		switch {
		case !metav1.IsControlledBy(p, vmi) || p.DeletionTimestamp != nil:
		case active == nil && p.Spec.NodeName == node:
			active = p
		default:
			old = append(old, p)
		}
	}
	return active, old
}

// createLauncher creates the VMI's launcher pod on node and expects to see
// it in the pod cache.
func (e *Emulator) createLauncher(ctx context.Context, id types.NamespacedName, vmi *virtv1.VirtualMachineInstance, node string) (*corev1.Pod, error) {
	e.log.Info("creating launcher pod", "namespace", vmi.Namespace, "vmi", vmi.Name, "node", node)
	pod := launcherPod(vmi, node, hotpluggedByStatus(vmi))
	if err := e.client.Create(ctx, pod); err != nil {
		return nil, err
	}
	e.ctrl.expect.expect(id, pod.Name, podExists)
	return pod, nil
}

// deleteSourcePods deletes old launcher pods with their live attachment pods.
func (e *Emulator) deleteSourcePods(ctx context.Context, id types.NamespacedName, old []*corev1.Pod, attach []corev1.Pod) error {
	for _, l := range old {
		for i := range attach {
			if metav1.IsControlledBy(&attach[i], l) && attach[i].DeletionTimestamp == nil {
				if err := e.deletePod(ctx, id, &attach[i]); err != nil {
					return err
				}
			}
		}
		if err := e.deletePod(ctx, id, l); err != nil {
			return err
		}
	}
	return nil
}

// settleRunning keeps a Running VMI's launcher pod running and its node
// label, node, active pod and Ready condition current: one write at most,
// reported.
func (e *Emulator) settleRunning(ctx context.Context, id types.NamespacedName, vmi *virtv1.VirtualMachineInstance, node string, active *corev1.Pod) (bool, error) {
	if !running(active) {
		return true, e.markRunning(ctx, id, active)
	}
	st := runningStatus(vmi, node, active)
	if st == nil && vmi.Labels[virtv1.NodeNameLabel] == node {
		return false, nil
	}
	if st != nil {
		vmi.Status = *st
	}
	setNode(vmi, node, active.UID)
	return true, e.writeVMI(ctx, vmi)
}

// cacheWait is how soon a VMI is looked at again while the pod cache lags.
const cacheWait = 10 * time.Millisecond

// syncHotplug plays the hot-plug part of one pass, one kind of write at a
// time: virt-controller's attachment pods (volume-hotplug.go:77-229), its
// volume status (storage.go:231-342), the kubelet starting pods, then
// virt-handler's volume status (handler.go).
func (e *Emulator) syncHotplug(ctx context.Context, vmi *virtv1.VirtualMachineInstance, launcher *corev1.Pod, attach []corev1.Pod) (bool, error) {
	id := types.NamespacedName{Namespace: vmi.Namespace, Name: vmi.Name}
	claims, err := e.claimStates(ctx, vmi)
	if err != nil {
		return false, err
	}
	hot := hotplugVolumes(vmi, launcher)
	var hotVols, ready []virtv1.Volume
	frozen := false
	for _, v := range vmi.Spec.Volumes {
		if !hot[v.Name] {
			continue
		}
		hotVols = append(hotVols, v)
		c := claims[v.Name]
		// volume-hotplug.go:192-195: a hot-plug volume without PVC is a
		// sync error before any attachment pod is created or deleted.
		frozen = frozen || c.pvc == nil
		if c.ready {
			ready = append(ready, v)
		}
	}
	var mine []*corev1.Pod
	for i := range attach {
		if metav1.IsControlledBy(&attach[i], launcher) {
			mine = append(mine, &attach[i])
		}
	}
	podsChanged := false
	if !frozen && needsAttachmentSync(hotVols, mine) {
		if podsChanged, err = e.syncAttachmentPods(ctx, id, vmi, launcher, mine, ready, hot); err != nil {
			return false, err
		}
	}
	// As in virt-controller, the status comes from the pods seen before
	// this pass's pod writes.
	current, _ := splitAttachmentPods(mine, hotVols)
	if status := volumeStatuses(vmi, hot, current, mine, claims); !equality.Semantic.DeepEqual(status, vmi.Status.VolumeStatus) {
		vmi.Status.VolumeStatus = status
		return true, e.writeVMI(ctx, vmi)
	}
	if podsChanged {
		return true, nil
	}
	for _, p := range mine {
		if p.DeletionTimestamp == nil && !running(p) {
			return true, e.markRunning(ctx, id, p)
		}
	}
	if e.handlerDown(vmi) {
		return false, nil
	}
	if virthandler.SetVolumes(vmi, virthandler.Volumes(vmi, virthandler.MountedBy(mine))) {
		return true, e.writeVMI(ctx, vmi)
	}
	return false, nil
}

// runningStatus is virt-controller's part of a Running VMI: node, active
// launcher pod and the Ready condition. It returns the status that says so,
// or nil if the VMI already does.
func runningStatus(vmi *virtv1.VirtualMachineInstance, node string, active *corev1.Pod) *virtv1.VirtualMachineInstanceStatus {
	pod := active.UID
	st := vmi.Status.DeepCopy()
	changed := false
	if st.NodeName != node {
		st.NodeName, changed = node, true
	}
	if len(st.ActivePods) != 1 || st.ActivePods[pod] != node {
		st.ActivePods, changed = map[types.UID]string{pod: node}, true
	}
	ready := false
	for i, c := range st.Conditions {
		if c.Type == virtv1.VirtualMachineInstanceReady {
			ready = c.Status == corev1.ConditionTrue
			if !ready {
				st.Conditions = append(st.Conditions[:i], st.Conditions[i+1:]...)
			}
			break
		}
	}
	if !ready {
		st.Conditions = append(st.Conditions, virtv1.VirtualMachineInstanceCondition{
			Type: virtv1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(),
		})
		changed = true
	}
	if !changed {
		return nil
	}
	return st
}

// hotplugVolumes are the VMI's PVC-backed volumes that its launcher pod does
// not have (KubeVirt's GetHotplugVolumes).
func hotplugVolumes(vmi *virtv1.VirtualMachineInstance, launcher *corev1.Pod) map[string]bool {
	inPod := map[string]bool{}
	for _, v := range launcher.Spec.Volumes {
		inPod[v.Name] = true
	}
	out := map[string]bool{}
	for _, v := range vmi.Spec.Volumes {
		if !inPod[v.Name] && (v.PersistentVolumeClaim != nil || v.DataVolume != nil || v.MemoryDump != nil) {
			out[v.Name] = true
		}
	}
	return out
}

// hotpluggedByStatus names the volumes that the status reports as
// hot-plugged, which a replacement launcher pod must leave out.
func hotpluggedByStatus(vmi *virtv1.VirtualMachineInstance) map[string]bool {
	out := map[string]bool{}
	for _, s := range vmi.Status.VolumeStatus {
		if s.HotplugVolume != nil {
			out[s.Name] = true
		}
	}
	return out
}
