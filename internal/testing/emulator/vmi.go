package emulator

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	virtv1 "kubevirt.io/api/core/v1"
)

// syncVMI plays virt-controller and virt-handler for one VMI: launcher pod,
// phase Running, attachment pods, volume status. It chains its writes (each
// on the object the previous one returned) and reports whether it wrote, so
// that one more pass can confirm the result; after>0 asks to look again once
// the pod cache has caught up with our own writes.
func (e *Emulator) syncVMI(ctx context.Context, vmi *virtv1.VirtualMachineInstance) (bool, time.Duration, error) {
	if vmi.DeletionTimestamp != nil || vmi.Status.Phase == virtv1.Succeeded || vmi.Status.Phase == virtv1.Failed {
		return false, 0, nil
	}
	id := types.NamespacedName{Namespace: vmi.Namespace, Name: vmi.Name}
	if !e.ctrl.expect.satisfied(ctx, e.ctrl.cache, id) {
		return false, cacheWait, nil
	}
	node := vmi.Status.NodeName
	if node == "" {
		node = e.o.NodeName
	}
	launchers, err := e.listPods(ctx, vmi.Namespace, launcherApp)
	if err != nil {
		return false, 0, err
	}
	attach, err := e.listPods(ctx, vmi.Namespace, hotplugApp)
	if err != nil {
		return false, 0, err
	}
	active, old := splitLaunchers(vmi, node, launchers)
	mig := migrating(vmi)
	wrote := false
	if active == nil {
		if mig {
			return false, 0, nil
		}
		if active, err = e.createLauncher(ctx, id, vmi, node); err != nil {
			return false, 0, err
		}
		wrote = true
	}
	if !mig && len(old) > 0 {
		// A finished migration leaves the source pods behind.
		if err := e.deleteSourcePods(ctx, id, old, attach); err != nil {
			return false, 0, err
		}
		wrote = true
	}
	settled, err := e.settleRunning(ctx, id, vmi, node, active)
	if err != nil {
		return false, 0, err
	}
	wrote = wrote || settled
	if mig {
		return wrote, 0, nil // hot-plug work waits for the migration to end
	}
	hot, err := e.syncHotplug(ctx, vmi, active, attach)
	return wrote || hot, 0, err
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

// settleRunning marks the active launcher pod Running, labels the VMI with
// its node and writes the Running status, each only when needed; it reports
// whether it wrote.
func (e *Emulator) settleRunning(ctx context.Context, id types.NamespacedName, vmi *virtv1.VirtualMachineInstance, node string, active *corev1.Pod) (bool, error) {
	wrote := false
	if !running(active) {
		if err := e.markRunning(ctx, id, active); err != nil {
			return false, err
		}
		wrote = true
	}
	if vmi.Labels[virtv1.NodeNameLabel] != node {
		if vmi.Labels == nil {
			vmi.Labels = map[string]string{}
		}
		vmi.Labels[virtv1.NodeNameLabel] = node
		if err := e.client.Update(ctx, vmi); err != nil {
			return false, err
		}
		wrote = true
	}
	if st := runningStatus(vmi, node, active.UID); st != nil {
		e.log.Info("VMI running", "namespace", vmi.Namespace, "vmi", vmi.Name, "node", node)
		vmi.Status = *st
		if err := e.client.Status().Update(ctx, vmi); err != nil {
			return false, err
		}
		wrote = true
	}
	return wrote, nil
}

// cacheWait is how soon a VMI is looked at again while the pod cache lags.
const cacheWait = 10 * time.Millisecond

// syncHotplug keeps one attachment pod holding exactly the ready hot-plugged
// volumes, then writes the volume status.
func (e *Emulator) syncHotplug(ctx context.Context, vmi *virtv1.VirtualMachineInstance, launcher *corev1.Pod, attach []corev1.Pod) (bool, error) {
	id := types.NamespacedName{Namespace: vmi.Namespace, Name: vmi.Name}
	claims, err := e.claimStates(ctx, vmi)
	if err != nil {
		return false, err
	}
	hot := hotplugVolumes(vmi, launcher)
	var ready []virtv1.Volume
	for _, v := range vmi.Spec.Volumes {
		if hot[v.Name] && claims[v.Name].ready {
			ready = append(ready, v)
		}
	}
	var current *corev1.Pod
	var mine []*corev1.Pod
	for i := range attach {
		p := &attach[i]
		if !metav1.IsControlledBy(p, launcher) || p.DeletionTimestamp != nil {
			continue
		}
		mine = append(mine, p)
		if current == nil && len(ready) > 0 && podMatches(p, ready) {
			current = p
		}
	}
	wrote := false
	if current == nil && len(ready) > 0 {
		e.log.Info("creating attachment pod", "namespace", vmi.Namespace, "vmi", vmi.Name, "volumes", len(ready))
		current = attachmentPod(launcher, ready)
		if err := e.client.Create(ctx, current); err != nil {
			return false, err
		}
		e.ctrl.expect.expect(id, current.Name, podExists)
		wrote = true
	}
	if current != nil && !running(current) {
		if err := e.markRunning(ctx, id, current); err != nil {
			return false, err
		}
		wrote = true
	}
	for _, p := range mine {
		if p != current {
			if err := e.deletePod(ctx, id, p); err != nil {
				return false, err
			}
			wrote = true
		}
	}
	status := volumeStatuses(vmi, hot, current, claims)
	if equality.Semantic.DeepEqual(status, vmi.Status.VolumeStatus) {
		return wrote, nil
	}
	vmi.Status.VolumeStatus = status
	return true, e.client.Status().Update(ctx, vmi)
}

// runningStatus returns the status that marks vmi Running on node with the
// given launcher pod, or nil if it already says so.
func runningStatus(vmi *virtv1.VirtualMachineInstance, node string, pod types.UID) *virtv1.VirtualMachineInstanceStatus {
	st := vmi.Status.DeepCopy()
	changed := false
	if st.Phase != virtv1.Running {
		st.Phase = virtv1.Running
		st.PhaseTransitionTimestamps = append(st.PhaseTransitionTimestamps, virtv1.VirtualMachineInstancePhaseTransitionTimestamp{
			Phase: virtv1.Running, PhaseTransitionTimestamp: metav1.Now(),
		})
		changed = true
	}
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
