package realkubevirt

import (
	"context"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// provisionLoop plays a dynamic provisioner: every 200 ms, a claim that
// names no volume gets a hostPath PersistentVolume pre-bound to it, which
// the controller manager's persistentvolume-binder then binds (both Bound),
// as on a cluster with a default StorageClass. Real KubeVirt attaches
// hot-plug volumes only once their claim is Bound. Claims that name a
// volume are left to the test that made them.
func (k *KubeVirt) provisionLoop(ctx context.Context) {
	every(ctx, 200*time.Millisecond, k.provisionPass)
}

func (k *KubeVirt) provisionPass(ctx context.Context) {
	claims, err := k.client.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := range claims.Items {
		c := &claims.Items[i]
		if c.Spec.VolumeName != "" || c.DeletionTimestamp != nil || c.Annotations[NoProvisionAnnotation] == "true" {
			continue
		}
		pv := pvFor(c)
		if dir := k.diskImages.Load(); dir != nil {
			if err := diskImage(pv, *dir, c); err != nil {
				continue
			}
		}
		if _, err := k.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			continue
		}
	}
}

// NoProvisionAnnotation on a claim keeps the provisioner away, so that a
// test can leave it Pending.
const NoProvisionAnnotation = "realkubevirt.tether.dev/no-provision"

func pvFor(c *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	size := c.Spec.Resources.Requests[corev1.ResourceStorage]
	class := ""
	if c.Spec.StorageClassName != nil {
		class = *c.Spec.StorageClassName
	}
	hostPath := corev1.HostPathDirectoryOrCreate
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-" + string(c.UID)},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   c.Spec.AccessModes,
			VolumeMode:                    c.Spec.VolumeMode,
			StorageClassName:              class,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: c.Namespace, Name: c.Name, UID: c.UID,
			},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/tether-test/" + string(c.UID), Type: &hostPath},
			},
		},
	}
}

// diskImage puts the volume in dir/<claim UID> with a sparse disk.img of
// the claim's size, which KubeVirt attaches from a filesystem volume (for
// hot-plugs nothing else creates it; virt-handler chowns it to the qemu
// user).
func diskImage(pv *corev1.PersistentVolume, dir string, c *corev1.PersistentVolumeClaim) error {
	path := filepath.Join(dir, string(c.UID))
	if err := os.MkdirAll(path, 0o755); err != nil {
		return err
	}
	size := c.Spec.Resources.Requests[corev1.ResourceStorage]
	f, err := os.OpenFile(filepath.Join(path, "disk.img"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(size.Value()); err != nil {
		return err
	}
	pv.Spec.HostPath.Path = path
	return nil
}
