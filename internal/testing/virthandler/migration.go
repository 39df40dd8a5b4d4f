package virthandler

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	virtv1 "kubevirt.io/api/core/v1"
)

// Live migration, as virt-handler plays it on the two nodes once
// virt-controller has handed the migration off (it set
// status.migrationState with the source and target node, and the label
// kubevirt.io/migrationTargetNodeName; pkg/virt-controller/watch/migration/
// migration.go:1199-1293 handleTargetPodHandoff). Line numbers are those of
// pkg/virt-handler/migration-source.go and migration-target.go at v1.9.0;
// v1.7.0 takes the same steps in the same functions.
//
// There is no libvirt here: what the domain would tell virt-handler is read
// from the VMI itself (the source has started sending once
// migrationState.startTimestamp is set, and the domain then exists on the
// target) and from TargetHost.Converged, whether the memory copy has
// finished so that the domain runs on the target.
//
// The steps, one VMI update per pass and node as upstream's sync writes
// once per call:
//
//  1. target publishes where it listens: targetNodeAddress and
//     targetDirectMigrationNodePorts (updateStatus :405-424); virt-controller
//     moves the migration to TargetReady (migration.go:814-818);
//  2. source starts the migration: the launcher records the start in the
//     domain, the handler copies it to startTimestamp with the mode
//     (migrateVMI :487-516 waits for the ports, :470-472;
//     setMigrationProgressStatus :199-217); virt-controller moves it to
//     Running (migration.go:819-822). From here until endTimestamp the
//     node's VMI controller leaves the VMI alone (isMigrationInProgress,
//     controller.go:376-383, vm.go:410-413);
//  3. target sees the domain arrive: targetNodeDomainDetected
//     (updateStatus :337-351);
//  4. once the copy converged the domain runs on the target:
//     targetNodeDomainReadyTimestamp (:353-367) and, the domain carrying
//     its end time, the target acknowledges completion
//     (ackMigrationCompletion :289-317, called at :369-375): endTimestamp,
//     status.nodeName and the kubevirt.io/nodeName label become the target,
//     migrationTransport Unix, evacuationNodeName and the launcher image
//     version cleared;
//  5. target finalizes: completed (finalizeMigration :1216-1255, from
//     processVMI :868-871 when migrationNeedsFinalization :723-729);
//     virt-controller marks the migration Succeeded (migration.go:846-853);
//  6. target cleans up: the migrationTargetNodeName label and the
//     create-migration-target annotation go (finalCleanup :578-583, from
//     sync :596-600).

// TargetHost is what the target node's handler knows of its host.
type TargetHost struct {
	// Address is the node's migration address (the handler's
	// --migration-ip, by default the pod IP of virt-handler).
	Address string
	// Ports maps each port the target's migration proxy listens on to the
	// port it forwards to in the launcher (0 for libvirt's socket).
	Ports map[string]int
	// Converged: the memory copy has finished, so the domain runs on the
	// target and carries the migration's end time.
	Converged bool
}

// DefaultTargetPorts are the proxy ports a target publishes: one for
// libvirt and one for the direct migration port, 49152
// (migrationproxy.GetMigrationPortsList for a non-block migration).
func DefaultTargetPorts() map[string]int { return map[string]int{"37401": 0, "37402": 49152} }

// MigrationTarget takes the step the handler on node takes for a VMI whose
// migration targets node, and reports whether it changed the VMI. A VMI
// that node is not the target of is left alone (execute :710-718,
// isMigrationTarget :648-651).
func MigrationTarget(vmi *virtv1.VirtualMachineInstance, node string, host TargetHost) bool {
	ms := vmi.Status.MigrationState
	if ms == nil || node == "" || vmi.Labels[virtv1.MigrationTargetNodeNameLabel] != node || vmi.IsFinal() || vmi.DeletionTimestamp != nil {
		return false
	}
	if migrationDone(ms) {
		return finalCleanup(vmi)
	}
	if ms.StartTimestamp != nil && ms.EndTimestamp != nil && !ms.Completed && !ms.Failed {
		ms.Completed = true // finalizeMigration :1253
		return true
	}
	if ms.Failed {
		return false // updateStatus :325-328
	}
	changed := false
	started := ms.StartTimestamp != nil
	if started && !ms.TargetNodeDomainDetected {
		ms.TargetNodeDomainDetected = true
		changed = true
	}
	if started && host.Converged {
		if ms.TargetNodeDomainReadyTimestamp == nil {
			now := metav1.Now()
			ms.TargetNodeDomainReadyTimestamp = &now
			changed = true
		}
		if ms.EndTimestamp == nil {
			ackCompletion(vmi, node)
			return true
		}
	}
	if started && ms.EndTimestamp == nil {
		return changed // migrations.IsMigrating: nothing more to publish (:391-394)
	}
	if ms.TargetNodeAddress != host.Address {
		ms.TargetNodeAddress = host.Address
		ms.TargetDirectMigrationNodePorts = host.Ports
		changed = true
	}
	return changed
}

// ackCompletion is ackMigrationCompletion (:289-317): the VMI moves to the
// target node.
func ackCompletion(vmi *virtv1.VirtualMachineInstance, node string) {
	ms := vmi.Status.MigrationState
	now := metav1.Now()
	ms.EndTimestamp = &now
	if vmi.Labels == nil {
		vmi.Labels = map[string]string{}
	}
	vmi.Labels[virtv1.NodeNameLabel] = node
	delete(vmi.Annotations, virtv1.EvictionSourceAnnotation)
	delete(vmi.Labels, virtv1.OutdatedLauncherImageLabel)
	vmi.Status.LauncherContainerImageVersion = ""
	vmi.Status.NodeName = node
	vmi.Status.EvacuationNodeName = ""
	vmi.Status.MigrationTransport = virtv1.MigrationTransportUnix
}

// finalCleanup drops what marked the VMI as this node's migration target
// (:578-583); the next update removes it from the target's informer.
func finalCleanup(vmi *virtv1.VirtualMachineInstance) bool {
	_, labelled := vmi.Labels[virtv1.MigrationTargetNodeNameLabel]
	_, annotated := vmi.Annotations[virtv1.CreateMigrationTarget]
	annotated = annotated && !vmi.Status.MigrationState.Failed
	if !labelled && !annotated {
		return false
	}
	delete(vmi.Labels, virtv1.MigrationTargetNodeNameLabel)
	if annotated {
		delete(vmi.Annotations, virtv1.CreateMigrationTarget)
	}
	return true
}

// MigrationSource takes the step the handler on node takes for a VMI it
// runs whose migration leaves from node, and reports whether it changed
// the VMI (execute :431-447, isMigrationSource :450-459): once the target
// has published its ports the source starts sending and records the start
// (migrateVMI :509-516, setMigrationProgressStatus :203-217).
func MigrationSource(vmi *virtv1.VirtualMachineInstance, node string) bool {
	ms := vmi.Status.MigrationState
	if ms == nil || migrationDone(ms) || node == "" || vmi.Status.NodeName != node || ms.SourceNode != node ||
		vmi.IsFinal() || vmi.DeletionTimestamp != nil {
		return false
	}
	if ms.AbortRequested || ms.StartTimestamp != nil || ms.TargetDirectMigrationNodePorts == nil {
		return false
	}
	now := metav1.Now()
	ms.StartTimestamp = &now
	ms.Mode = virtv1.MigrationPreCopy
	return true
}

// MigrationInProgress reports whether a migration of the VMI has started
// and not ended (isMigrationInProgress, controller.go:376-383): the node's
// VMI controller then leaves it alone (vm.go:410-413).
func MigrationInProgress(vmi *virtv1.VirtualMachineInstance) bool {
	ms := vmi.Status.MigrationState
	return ms != nil && ms.StartTimestamp != nil && ms.EndTimestamp == nil
}

// migrationDone is isMigrationDone (migration-source.go:617-619).
func migrationDone(ms *virtv1.VirtualMachineInstanceMigrationState) bool {
	return ms.EndTimestamp != nil && (ms.Completed || ms.Failed)
}

// MigratedAway reports whether the VMI's domain has left node by a
// migration that completed: node's handler then finds the domain shut off
// as migrated and tells its virt-launcher to end (vm.go:396-399,
// domainMigrated migration-source.go:187-189), whose pod then completes.
// virt-controller deletes the attachment pods of a launcher pod that is
// down (deleteOrphanedAttachmentPods, pkg/virt-controller/watch/vmi/
// lifecycle.go:86).
func MigratedAway(vmi *virtv1.VirtualMachineInstance, node string) bool {
	ms := vmi.Status.MigrationState
	return ms != nil && node != "" && ms.SourceNode == node && vmi.Status.NodeName != node &&
		ms.Completed && !ms.Failed && ms.EndTimestamp != nil
}
