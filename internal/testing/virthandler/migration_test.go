package virthandler

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	virtv1 "kubevirt.io/api/core/v1"
)

// handedOff is a running VMI on node-1 as virt-controller leaves it once
// the target pod on node-2 is ready (handleTargetPodHandoff).
func handedOff() *virtv1.VirtualMachineInstance {
	vmi := &virtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: "vm",
		Labels: map[string]string{virtv1.NodeNameLabel: "node-1", virtv1.MigrationTargetNodeNameLabel: "node-2"},
	}}
	vmi.Status.Phase = virtv1.Running
	vmi.Status.NodeName = "node-1"
	vmi.Status.MigrationState = &virtv1.VirtualMachineInstanceMigrationState{
		MigrationUID: "m1", SourceNode: "node-1", TargetNode: "node-2", TargetPod: "virt-launcher-vm-b",
	}
	return vmi
}

// The two handlers take a migration from the hand-off to the end, one
// update per pass; a held copy keeps it running; the wrong node does
// nothing; the VMI controller leaves a running migration alone.
func TestMigrationSteps(t *testing.T) {
	vmi := handedOff()
	host := TargetHost{Address: "10.0.0.2", Ports: DefaultTargetPorts()}
	ms := vmi.Status.MigrationState

	if MigrationSource(vmi, "node-1") {
		t.Fatal("source started before the target published its ports")
	}
	if MigrationTarget(vmi, "node-1", host) || MigrationTarget(vmi, "node-3", host) {
		t.Fatal("a node that is not the target acted as one")
	}
	if !MigrationTarget(vmi, "node-2", host) || ms.TargetNodeAddress != "10.0.0.2" || len(ms.TargetDirectMigrationNodePorts) != 2 {
		t.Fatalf("target did not publish: %+v", ms)
	}
	if MigrationTarget(vmi, "node-2", host) {
		t.Fatal("target changed the VMI twice for the same state")
	}
	if MigrationSource(vmi, "node-2") {
		t.Fatal("the target node acted as the source")
	}
	if !MigrationSource(vmi, "node-1") || ms.StartTimestamp == nil || ms.Mode != virtv1.MigrationPreCopy {
		t.Fatalf("source did not start: %+v", ms)
	}
	if MigrationSource(vmi, "node-1") {
		t.Fatal("source started twice")
	}
	if !MigrationInProgress(vmi) || Step(vmi, nil, nil) {
		t.Fatal("the VMI controller should leave a running migration alone")
	}
	// Held: the domain arrives on the target but does not run there.
	if !MigrationTarget(vmi, "node-2", host) || !ms.TargetNodeDomainDetected || ms.TargetNodeDomainReadyTimestamp != nil {
		t.Fatalf("target did not detect the domain: %+v", ms)
	}
	for i := 0; i < 3; i++ {
		if MigrationTarget(vmi, "node-2", host) {
			t.Fatalf("a held migration moved on: %+v", ms)
		}
	}
	host.Converged = true
	if !MigrationTarget(vmi, "node-2", host) {
		t.Fatal("converged copy not acknowledged")
	}
	if ms.TargetNodeDomainReadyTimestamp == nil || ms.EndTimestamp == nil || ms.Completed ||
		vmi.Status.NodeName != "node-2" || vmi.Labels[virtv1.NodeNameLabel] != "node-2" || vmi.Status.MigrationTransport != virtv1.MigrationTransportUnix {
		t.Fatalf("acknowledgement: node %q labels %v state %+v", vmi.Status.NodeName, vmi.Labels, ms)
	}
	if MigrationSource(vmi, "node-1") {
		t.Fatal("the old source acted after the hand-over")
	}
	if MigratedAway(vmi, "node-1") {
		t.Fatal("the source launcher ended before the migration completed")
	}
	if !MigrationTarget(vmi, "node-2", host) || !ms.Completed {
		t.Fatalf("not finalized: %+v", ms)
	}
	if !MigratedAway(vmi, "node-1") || MigratedAway(vmi, "node-2") {
		t.Fatal("only the source's launcher ends once the migration completed")
	}
	if _, ok := vmi.Labels[virtv1.MigrationTargetNodeNameLabel]; !ok {
		t.Fatal("the target label went before the final cleanup")
	}
	if !MigrationTarget(vmi, "node-2", host) {
		t.Fatal("no final cleanup")
	}
	if _, ok := vmi.Labels[virtv1.MigrationTargetNodeNameLabel]; ok {
		t.Fatal("the target label survived the final cleanup")
	}
	if MigrationTarget(vmi, "node-2", host) || MigrationInProgress(vmi) {
		t.Fatal("a finished migration is still worked on")
	}
}

// A failed migration is not acknowledged; an abort keeps the source from
// starting.
func TestMigrationFailedOrAborted(t *testing.T) {
	vmi := handedOff()
	vmi.Status.MigrationState.Failed = true
	if MigrationTarget(vmi, "node-2", TargetHost{Address: "a", Converged: true}) {
		t.Fatal("target acted on a failed migration")
	}
	vmi = handedOff()
	vmi.Status.MigrationState.AbortRequested = true
	vmi.Status.MigrationState.TargetDirectMigrationNodePorts = DefaultTargetPorts()
	if MigrationSource(vmi, "node-1") {
		t.Fatal("source started an aborted migration")
	}
}
