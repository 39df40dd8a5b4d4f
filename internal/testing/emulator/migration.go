package emulator

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	virtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/testing/emulator/volreq"
	"github.com/tether-dev/tether/internal/testing/virthandler"
)

// syncMigration drives one VirtualMachineInstanceMigration: Pending →
// Running (VMI migrationState set) → after MigrationDuration Succeeded (VMI
// on the target node, migrationState completed).
func (e *Emulator) syncMigration(ctx context.Context, ns, name string) (bool, time.Duration, error) {
	m, err := getOrNil(ctx, e.client, ns, name, &virtv1.VirtualMachineInstanceMigration{})
	if err != nil || m == nil || paused(m) || m.DeletionTimestamp != nil {
		return false, 0, err
	}
	if m.Status.Phase == virtv1.MigrationSucceeded || m.Status.Phase == virtv1.MigrationFailed {
		return false, 0, nil
	}
	vmi, err := getOrNil(ctx, e.client, ns, m.Spec.VMIName, &virtv1.VirtualMachineInstance{})
	if err != nil {
		return false, 0, err
	}
	if vmi == nil {
		return true, 0, e.finishMigration(ctx, m, nil, virtv1.MigrationFailed)
	}
	if paused(vmi) {
		return false, time.Second, nil // wait until the test lets go of it
	}
	state := vmi.Status.MigrationState
	mine := state != nil && state.MigrationUID == m.UID
	if m.Status.Phase != virtv1.MigrationRunning {
		if mine {
			return true, 0, e.setMigrationPhase(ctx, m, virtv1.MigrationRunning, state)
		}
		if vmi.Status.Phase != virtv1.Running || vmi.DeletionTimestamp != nil {
			return true, 0, e.finishMigration(ctx, m, nil, virtv1.MigrationFailed)
		}
		if volreq.Migrating(vmi) {
			return false, 200 * time.Millisecond, nil // another migration is under way
		}
		// virt-controller's hand-off (migration.go:1199-1293): the state
		// names both nodes, and a label tells the target's handler.
		vmi.Status.MigrationState = &virtv1.VirtualMachineInstanceMigrationState{
			SourceNode:   vmi.Status.NodeName,
			TargetNode:   e.targetNode(m, vmi),
			MigrationUID: m.UID,
		}
		if vmi.Labels == nil {
			vmi.Labels = map[string]string{}
		}
		vmi.Labels[virtv1.MigrationTargetNodeNameLabel] = vmi.Status.MigrationState.TargetNode
		// The handlers take over (package virthandler, as in the world with
		// real KubeVirt): the target publishes where it listens, the source
		// starts sending; the copy converges after MigrationDuration.
		virthandler.MigrationTarget(vmi, vmi.Status.MigrationState.TargetNode, migrationHost(false))
		virthandler.MigrationSource(vmi, vmi.Status.NodeName)
		e.migrationStarted(m.UID, time.Now())
		e.log.Info("migration started", "namespace", ns, "vmi", vmi.Name, "migration", m.Name,
			"source", vmi.Status.NodeName, "target", vmi.Status.MigrationState.TargetNode)
		return true, 0, e.writeVMI(ctx, vmi)
	}
	if !mine {
		return true, 0, e.finishMigration(ctx, m, nil, virtv1.MigrationFailed)
	}
	switch {
	case state.Completed:
		return true, 0, e.finishMigration(ctx, m, state, virtv1.MigrationSucceeded)
	case state.Failed:
		return true, 0, e.finishMigration(ctx, m, state, virtv1.MigrationFailed)
	}
	if left := e.o.MigrationDuration - time.Since(e.migrationStart(m.UID, state)); left > 0 {
		return false, left, nil
	}
	// The copy converged: the target's handler detects the domain,
	// acknowledges completion (the VMI moves to the target), finalizes and
	// cleans up, here in one write.
	for i := 0; i < 8; i++ {
		if !virthandler.MigrationTarget(vmi, state.TargetNode, migrationHost(true)) {
			break
		}
	}
	e.log.Info("migration completed", "namespace", ns, "vmi", vmi.Name, "migration", m.Name, "node", state.TargetNode)
	return true, 0, e.writeVMI(ctx, vmi)
}

// migrationHost is what a target node's handler knows of its host.
func migrationHost(converged bool) virthandler.TargetHost {
	return virthandler.TargetHost{Address: "127.0.0.1", Ports: virthandler.DefaultTargetPorts(), Converged: converged}
}

// targetNode picks the annotation, else TargetNodeName, else NodeName when
// the VMI already runs on TargetNodeName.
func (e *Emulator) targetNode(m *virtv1.VirtualMachineInstanceMigration, vmi *virtv1.VirtualMachineInstance) string {
	if t := m.Annotations[TargetNodeAnnotation]; t != "" {
		return t
	}
	if vmi.Status.NodeName == e.o.TargetNodeName {
		return e.o.NodeName
	}
	return e.o.TargetNodeName
}

func (e *Emulator) setMigrationPhase(ctx context.Context, m *virtv1.VirtualMachineInstanceMigration, phase virtv1.VirtualMachineInstanceMigrationPhase, state *virtv1.VirtualMachineInstanceMigrationState) error {
	m.Status.Phase = phase
	if state != nil {
		m.Status.MigrationState = state.DeepCopy()
	}
	m.Status.PhaseTransitionTimestamps = append(m.Status.PhaseTransitionTimestamps,
		virtv1.VirtualMachineInstanceMigrationPhaseTransitionTimestamp{Phase: phase, PhaseTransitionTimestamp: metav1.Now()})
	return e.client.Status().Update(ctx, m)
}

func (e *Emulator) finishMigration(ctx context.Context, m *virtv1.VirtualMachineInstanceMigration, state *virtv1.VirtualMachineInstanceMigrationState, phase virtv1.VirtualMachineInstanceMigrationPhase) error {
	e.migMu.Lock()
	delete(e.migStarts, m.UID)
	e.migMu.Unlock()
	e.log.Info("migration finished", "namespace", m.Namespace, "migration", m.Name, "phase", string(phase))
	return e.setMigrationPhase(ctx, m, phase, state)
}

// migrationStarted remembers the precise start (the API keeps seconds only).
func (e *Emulator) migrationStarted(uid types.UID, at time.Time) {
	e.migMu.Lock()
	defer e.migMu.Unlock()
	if e.migStarts == nil {
		e.migStarts = map[types.UID]time.Time{}
	}
	e.migStarts[uid] = at
}

// migrationStart is when the migration started: remembered, else (after a
// restart of the emulator) the VMI's start timestamp.
func (e *Emulator) migrationStart(uid types.UID, state *virtv1.VirtualMachineInstanceMigrationState) time.Time {
	e.migMu.Lock()
	defer e.migMu.Unlock()
	if at, ok := e.migStarts[uid]; ok {
		return at
	}
	if state.StartTimestamp == nil {
		return time.Time{}
	}
	return state.StartTimestamp.Time
}
