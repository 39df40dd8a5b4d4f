package emulator

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ManagedNodeLabel marks the Nodes the emulator created and keeps Ready.
const ManagedNodeLabel = "emulator.tether.dev/managed"

const heartbeatEvery = 10 * time.Second

// ensureNodes creates the emulator's Nodes if missing: attach/detach managed
// by the controller manager, as a kubelet would register them.
func (e *Emulator) ensureNodes(ctx context.Context) error {
	for _, name := range e.nodeNames() {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
				ManagedNodeLabel: "true",
			},
			Annotations: map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
		}}
		if err := e.client.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	e.heartbeat(ctx)
	return nil
}

func (e *Emulator) nodeNames() []string {
	if e.o.TargetNodeName == e.o.NodeName {
		return []string{e.o.NodeName}
	}
	return []string{e.o.NodeName, e.o.TargetNodeName}
}

func (e *Emulator) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(heartbeatEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.heartbeat(ctx)
		}
	}
}

// heartbeat keeps the emulator's Nodes Ready and their Leases fresh. A Node
// that is gone, unmanaged or paused is left alone (a test may be playing a
// dead node).
func (e *Emulator) heartbeat(ctx context.Context) {
	for _, name := range e.nodeNames() {
		node := &corev1.Node{}
		if err := e.client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			continue
		}
		if node.Labels[ManagedNodeLabel] != "true" || paused(node) {
			continue
		}
		if err := e.nodeReady(ctx, node); err != nil && ctx.Err() == nil {
			e.log.V(1).Info("node heartbeat failed", "node", name, "error", err.Error())
		}
		if err := e.renewLease(ctx, node); err != nil && ctx.Err() == nil {
			e.log.V(1).Info("node lease renewal failed", "node", name, "error", err.Error())
		}
	}
}

func (e *Emulator) nodeReady(ctx context.Context, node *corev1.Node) error {
	now := metav1.Now()
	ready := corev1.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "kubevirt emulator is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now,
	}
	found := false
	for i, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				ready.LastTransitionTime = c.LastTransitionTime
			}
			node.Status.Conditions[i], found = ready, true
		}
	}
	if !found {
		node.Status.Conditions = append(node.Status.Conditions, ready)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: node.Name}}
	if node.Status.Capacity == nil {
		node.Status.Capacity = corev1.ResourceList{}
	}
	return e.client.Status().Update(ctx, node)
}

func (e *Emulator) renewLease(ctx context.Context, node *corev1.Node) error {
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{}
	err := e.client.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: node.Name}, lease)
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: corev1.NamespaceNodeLease, Name: node.Name,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}},
			},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr(node.Name), LeaseDurationSeconds: ptr(int32(40)), RenewTime: &now},
		}
		return e.client.Create(ctx, lease)
	}
	if err != nil {
		return err
	}
	lease.Spec.RenewTime = &now
	return e.client.Update(ctx, lease)
}
