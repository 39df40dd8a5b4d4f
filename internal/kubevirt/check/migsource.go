package check

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// MigrationSourcePodLeftover: the finished source launcher pod of a VMI's
// completed migration that still names a claim the VMI no longer uses.
// After a volume migration (updateVolumesStrategy: Migration) the VMI runs
// from the destination claims, but KubeVirt keeps the terminal source pod
// object: virt-controller (v1.9.0) deletes a completed migration's source
// pod only when it garbage-collects the migration, keeping the last five
// per VMI (pkg/virt-controller/watch/migration/migration.go:91,2251-2290;
// kubevirt/kubevirt#19157 proposes making that limit configurable), and the
// PVC protection controller counts a scheduled pod that names a claim as a
// user of it even once the pod has finished: the source claim cannot be
// deleted, and its storage is not reclaimed. Report only.
const MigrationSourcePodLeftover = "MigrationSourcePodLeftover"

// launcherCreatedBy is the label virt-controller puts on a VMI's launcher
// pods, valued with the VMI's UID; launcherCompute is the name of the
// launcher container that runs the guest.
const (
	launcherCreatedBy = "kubevirt.io/created-by"
	launcherCompute   = "compute"
)

// FindMigrationSourcePodLeftovers proves, per named, in-scope VMI that is
// not being deleted, that its migration's source launcher pod is finished
// for good and holds claims the VMI does not use. Every one of these must
// hold, or there is no finding:
//   - the VMI is Running on the node its last migration targeted;
//   - that migration is completed and did not fail (status.migrationState:
//     completed true, failed false, no abort requested);
//   - the pod is the one the migration names as its source (its name, its
//     created-by label equal to the VMI's UID, scheduled on the source node,
//     not the node the VMI runs on), and is not its target pod. Whether it is
//     in status.activePods tells nothing: virt-controller (v1.9.0) lists
//     there every pod the VMI controls, finished or not
//     (pkg/virt-controller/watch/vmi/lifecycle.go:1030-1049);
//   - the pod is terminal: phase Succeeded or Failed, or its compute
//     container has terminated;
//   - it names at least one claim the VMI's volumes (spec and status) do
//     not name.
//
// The finding's subject is the pod, with the claims it pins as evidence and
// the command that releases them. The action, DeleteMigrationSourcePod, is
// safe only on request (Policy.DeleteMigrationSourcePods); otherwise it is
// blocked by NotRequested.
func FindMigrationSourcePodLeftovers(in Input) []drift.Finding {
	in = in.ready()
	var out []drift.Finding
	for i := range in.Snapshot.VMIs {
		vmi := &in.Snapshot.VMIs[i]
		if !named(vmi) || !in.scope.namespace(vmi.Namespace) || !in.scope.labels(vmi.Labels) || IsTerminating(vmi) {
			continue
		}
		ms := vmi.Status.MigrationState
		if !migrationSucceededOnTarget(vmi) {
			continue
		}
		for j := range in.Snapshot.Pods {
			pod := &in.Snapshot.Pods[j]
			if !isSourceLauncher(vmi, pod) || !launcherFinished(pod) {
				continue
			}
			pinned := claimsVMIDoesNotUse(vmi, pod)
			if len(pinned) == 0 {
				continue
			}
			out = append(out, sourcePodFinding(in, vmi, ms, pod, pinned))
		}
	}
	return out
}

// migrationSucceededOnTarget: the VMI runs, on the target node of a
// migration that completed without failing or being aborted.
func migrationSucceededOnTarget(vmi *snapshot.VMI) bool {
	ms := vmi.Status.MigrationState
	if ms == nil || !ms.Completed || ms.Failed || ms.AbortRequested {
		return false
	}
	if vmi.Status.Phase != kubevirtv1.Running || ms.TargetNode == "" || vmi.Status.NodeName != ms.TargetNode {
		return false
	}
	return ms.SourcePod != "" && ms.SourceNode != "" && ms.SourceNode != ms.TargetNode
}

// isSourceLauncher: the pod is the migration's source launcher pod of the
// VMI, on a node the VMI no longer runs on.
func isSourceLauncher(vmi *snapshot.VMI, pod *corev1.Pod) bool {
	ms := vmi.Status.MigrationState
	if pod.Namespace != vmi.Namespace || pod.Name != ms.SourcePod || pod.Name == ms.TargetPod {
		return false
	}
	return pod.Labels[launcherCreatedBy] == string(vmi.UID) && pod.Spec.NodeName == ms.SourceNode && pod.Spec.NodeName != vmi.Status.NodeName
}

// launcherFinished: the pod's phase is terminal, or its compute container
// has terminated (the guest has left it; a sidecar may still run).
func launcherFinished(pod *corev1.Pod) bool {
	if snapshot.PodTerminal(pod) {
		return true
	}
	return computeTerminated(pod)
}

func computeTerminated(pod *corev1.Pod) bool {
	for i := range pod.Status.ContainerStatuses {
		if cs := &pod.Status.ContainerStatuses[i]; cs.Name == launcherCompute {
			return cs.State.Terminated != nil
		}
	}
	return false
}

// claimsVMIDoesNotUse returns the pod's claims that no volume of the VMI
// names, in its spec or its volume status.
func claimsVMIDoesNotUse(vmi *snapshot.VMI, pod *corev1.Pod) []string {
	used := map[string]bool{}
	for i := range vmi.Spec.Volumes {
		if c := snapshot.ClaimName(&vmi.Spec.Volumes[i]); c != "" {
			used[c] = true
		}
	}
	for i := range vmi.Status.VolumeStatus {
		if info := vmi.Status.VolumeStatus[i].PersistentVolumeClaimInfo; info != nil && info.ClaimName != "" {
			used[info.ClaimName] = true
		}
	}
	var out []string
	for _, c := range snapshot.PodClaimNames(pod) {
		if !used[c] && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

func unlessAsked(asked bool) drift.BlockReason {
	if asked {
		return ""
	}
	return drift.NotRequested
}

// CheckMigrationSourcePod re-runs MigrationSourcePodLeftover for the pod
// ns/name on s (the live re-read of the pod and its VMI): the finding, and
// whether the pod is still one.
func CheckMigrationSourcePod(s *snapshot.Snapshot, p Policy, now time.Time, ns, name string) (drift.Finding, bool) {
	for _, f := range FindMigrationSourcePodLeftovers(NewInput(s, p, now)) {
		if f.Namespace == ns && f.Object.Name == name {
			return f, true
		}
	}
	return drift.Finding{}, false
}

func sourcePodFinding(in Input, vmi *snapshot.VMI, ms *kubevirtv1.VirtualMachineInstanceMigrationState, pod *corev1.Pod, pinned []string) drift.Finding {
	ns := vmi.Namespace
	state := "phase " + orNone(string(pod.Status.Phase))
	if !snapshot.PodTerminal(pod) {
		state += ", its compute container has terminated"
	}
	ended := "at an unknown time"
	if ms.EndTimestamp != nil {
		ended = "at " + ms.EndTimestamp.UTC().Format("2006-01-02T15:04:05Z") + fmt.Sprintf(" (%s ago)", in.Now.Sub(ms.EndTimestamp.Time).Round(1e9))
	}
	ev := []string{
		fmt.Sprintf("VMI %s/%s is Running on node %s, the target of migration %s, which completed %s without failing (source node %s, source pod %s, target pod %s)",
			ns, vmi.Name, vmi.Status.NodeName, orNone(string(ms.MigrationUID)), ended, ms.SourceNode, ms.SourcePod, orNone(ms.TargetPod)),
		fmt.Sprintf("pod %s/%s (uid %s) is that migration's source launcher pod: %s, on node %s where the VMI no longer runs", ns, pod.Name, pod.UID, state, pod.Spec.NodeName),
	}
	for _, c := range pinned {
		ev = append(ev, fmt.Sprintf("it names claim %s (%s), which no volume of the VMI names: PVC protection counts the pod as a user of it", c, claimState(in, ns, c)))
	}
	f := drift.Finding{
		Check:     MigrationSourcePodLeftover,
		Namespace: ns,
		Object:    drift.ObjectRef{Kind: "Pod", Name: pod.Name, UID: pod.UID},
		Severity:  drift.SeverityWarning,
		Message: fmt.Sprintf("finished source launcher pod %s/%s of VMI %s's completed migration still holds claim(s) %s that the VMI no longer uses",
			ns, pod.Name, vmi.Name, strings.Join(pinned, ", ")),
		Evidence: ev,
		Action: drift.Action{Type: DeleteMigrationSourcePod, Safe: in.Policy.DeleteMigrationSourcePods, BlockedBy: unlessAsked(in.Policy.DeleteMigrationSourcePods), Remedy: fmt.Sprintf("the guest runs on %s from other claims and this pod has finished: `kubectl delete pod %s -n %s` releases %s (check first that the VMI still runs: `kubectl get vmi %s -n %s -o wide`); or `tether fix -n %s --check %s --delete-migration-source-pods --apply`, which re-reads pod and VMI first",
			vmi.Status.NodeName, pod.Name, ns, strings.Join(pinned, ", "), vmi.Name, ns, ns, MigrationSourcePodLeftover)},
	}
	f.ID = drift.FindingID(f.Check, f.Namespace, f.Object, f.Volume)
	return f
}
