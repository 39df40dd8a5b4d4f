// Package fakeattacher plays kubernetes-csi/external-attacher for one CSI driver
// against a real apiserver, so that the attach/detach controller of a real
// kube-controller-manager can attach and detach volumes without a storage
// backend:
//
//   - a VolumeAttachment of the driver that is not being deleted gets the
//     finalizer external-attacher/<driver> (the driver name with characters
//     other than letters, digits and '-' replaced by '-'), the annotation
//     csi.alpha.kubernetes.io/node-id when the Node records a CSI node ID for
//     the driver, and status.attached=true; one whose Node does not exist
//     gets an attachError instead;
//   - a VolumeAttachment being deleted gets status.attached=false and loses
//     the finalizer: the "driver" confirmed the detach;
//   - Hang(node) plays a node the storage backend cannot reach: its
//     VolumeAttachments are neither attached nor detached, so a deletion
//     waits on the finalizer, until Release(node).
//
// Writes use the resourceVersion read (optimistic concurrency), so a stale
// read never undoes someone else's change. It must never touch
// VolumeAttachments of other attachers.
package fakeattacher

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// DefaultDriver is the CSI driver name the local environment registers.
const DefaultDriver = "attach.csi.tether.dev"

// Options configure Start.
type Options struct {
	Config *rest.Config
	// Driver is the CSI driver (VolumeAttachment spec.attacher) to play;
	// default DefaultDriver.
	Driver string
	// Interval between passes; default 100ms.
	Interval time.Duration
	// NoCSIDriver skips creating the CSIDriver object (attachRequired: true).
	NoCSIDriver bool
}

// Attacher is a running attacher.
type Attacher struct {
	c      client.Client
	o      Options
	mu     sync.Mutex
	hung   map[string]bool
	cancel context.CancelFunc
	done   chan struct{}
}

// Start registers the CSIDriver and starts the loop.
func Start(ctx context.Context, o Options) (*Attacher, error) {
	if o.Driver == "" {
		o.Driver = DefaultDriver
	}
	if o.Interval <= 0 {
		o.Interval = 100 * time.Millisecond
	}
	c, err := clients.New(o.Config)
	if err != nil {
		return nil, err
	}
	if !o.NoCSIDriver {
		yes, no := true, false
		d := &storagev1.CSIDriver{
			ObjectMeta: metav1.ObjectMeta{Name: o.Driver},
			Spec:       storagev1.CSIDriverSpec{AttachRequired: &yes, PodInfoOnMount: &no},
		}
		if err := c.Create(ctx, d); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	runCtx, cancel := context.WithCancel(context.Background())
	a := &Attacher{c: c, o: o, hung: map[string]bool{}, cancel: cancel, done: make(chan struct{})}
	go a.loop(runCtx)
	return a, nil
}

// Stop ends the loop and waits for it.
func (a *Attacher) Stop() {
	if a == nil {
		return
	}
	a.cancel()
	<-a.done
}

// Driver is the driver this attacher plays.
func (a *Attacher) Driver() string { return a.o.Driver }

// Hang makes the attacher ignore node's VolumeAttachments, as if the node
// were unreachable: nothing attaches and no detach completes.
func (a *Attacher) Hang(node string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hung[node] = true
}

// Release undoes Hang.
func (a *Attacher) Release(node string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.hung, node)
}

func (a *Attacher) hanging(node string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.hung[node]
}

func (a *Attacher) loop(ctx context.Context) {
	defer close(a.done)
	t := time.NewTicker(a.o.Interval)
	defer t.Stop()
	for {
		a.pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pass handles every VolumeAttachment of the driver once. Errors (mostly
// conflicts with the attach/detach controller) are retried next pass.
func (a *Attacher) pass(ctx context.Context) {
	var list storagev1.VolumeAttachmentList
	if err := a.c.List(ctx, &list); err != nil {
		return
	}
	fin := snapshot.AttacherFinalizer(a.o.Driver)
	for i := range list.Items {
		va := &list.Items[i]
		if va.Spec.Attacher != a.o.Driver || a.hanging(va.Spec.NodeName) {
			continue
		}
		if va.DeletionTimestamp != nil {
			a.detach(ctx, va, fin)
			continue
		}
		a.attach(ctx, va, fin)
	}
}

func (a *Attacher) attach(ctx context.Context, va *storagev1.VolumeAttachment, fin string) {
	if va.Status.Attached && slices.Contains(va.Finalizers, fin) {
		return
	}
	var node corev1.Node
	if err := a.c.Get(ctx, client.ObjectKey{Name: va.Spec.NodeName}, &node); err != nil {
		if apierrors.IsNotFound(err) && va.Status.AttachError == nil {
			va.Status.AttachError = &storagev1.VolumeError{Time: metav1.Now(), Message: "node " + va.Spec.NodeName + " not found"}
			_ = a.c.Status().Update(ctx, va)
		}
		return
	}
	if !slices.Contains(va.Finalizers, fin) {
		va.Finalizers = append(va.Finalizers, fin)
		if id := snapshot.CSINodeID(&node, a.o.Driver); id != "" {
			if va.Annotations == nil {
				va.Annotations = map[string]string{}
			}
			va.Annotations[snapshot.VANodeIDAnnotation] = id
		}
		if err := a.c.Update(ctx, va); err != nil {
			return
		}
	}
	va.Status.Attached, va.Status.AttachError = true, nil
	va.Status.AttachmentMetadata = map[string]string{"devicePath": "/dev/tether/" + va.Name}
	_ = a.c.Status().Update(ctx, va)
}

func (a *Attacher) detach(ctx context.Context, va *storagev1.VolumeAttachment, fin string) {
	if !slices.Contains(va.Finalizers, fin) {
		return
	}
	if va.Status.Attached {
		va.Status.Attached = false
		if err := a.c.Status().Update(ctx, va); err != nil {
			return
		}
	}
	va.Finalizers = slices.DeleteFunc(va.Finalizers, func(f string) bool { return f == fin })
	_ = a.c.Update(ctx, va)
}
