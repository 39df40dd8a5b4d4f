package fakeattacher_test

import (
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/testing/testenv"
)

// A node the storage backend cannot reach: the attach/detach controller asks
// for the detach (the VolumeAttachment is deleted), but the attacher keeps its
// finalizer until the node is released — as external-attacher does while
// ControllerUnpublish fails.
func TestHang_holdsDetachUntilReleased(t *testing.T) {
	w := newWorld(t)
	node := w.ns + "-h"
	_, va := w.attachedPod("app", node)

	w.env.Attacher.Hang(node)
	t.Cleanup(func() { w.env.Attacher.Release(node) })
	w.must(w.c.Delete(w.ctx, w.podRef("app"), client.GracePeriodSeconds(0)))
	key := client.ObjectKey{Name: va.Name}
	testenv.Eventually(t, 90*time.Second, "the detach to be requested", func() (bool, error) {
		var got storagev1.VolumeAttachment
		err := w.c.Get(w.ctx, key, &got)
		return err == nil && got.DeletionTimestamp != nil, err
	})
	time.Sleep(2 * time.Second)
	var held storagev1.VolumeAttachment
	if err := w.c.Get(w.ctx, key, &held); err != nil || len(held.Finalizers) == 0 {
		t.Fatalf("a hanging node's attachment must stay, held by the attacher's finalizer: %v %+v", err, held.Finalizers)
	}

	w.env.Attacher.Release(node)
	testenv.Eventually(t, 60*time.Second, "the attachment to go once released", func() (bool, error) {
		err := w.c.Get(w.ctx, key, &storagev1.VolumeAttachment{})
		return apierrors.IsNotFound(err), nil
	})
}
