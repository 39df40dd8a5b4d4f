package observe

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// attachmentPods picks the hot-plug attachment pods out of all pods.
func attachmentPods(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for i := range pods {
		if pods[i].Labels[snapshot.AttachmentPodLabel] == snapshot.AttachmentPodLabelValue {
			out = append(out, pods[i])
		}
	}
	return out
}

// ForVolumeAttachment reads, live, everything the StaleVolumeAttachment
// decision needs about the VolumeAttachment name: it, its Node, its PV and
// claim, and the pods bound to its node (one LIST by spec.nodeName). A
// VolumeAttachment that is gone yields an empty snapshot. How long a missing
// node has been gone is taken from goneSince (durable records), if given.
func ForVolumeAttachment(ctx context.Context, c client.Client, o Options, name string, goneSince map[string]time.Time) (*snapshot.Snapshot, error) {
	s := snapshot.Snapshot{NodesGoneSince: goneSince}
	var va storagev1.VolumeAttachment
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &va); err != nil {
		if apierrors.IsNotFound(err) {
			return snapshot.New(s), nil
		}
		return nil, fmt.Errorf("reading VolumeAttachment %s: %w", name, err)
	}
	s.VolumeAttachments = []storagev1.VolumeAttachment{va}
	var node corev1.Node
	if err := getOptional(ctx, c, client.ObjectKey{Name: va.Spec.NodeName}, &node); err != nil {
		return nil, err
	} else if node.Name != "" {
		s.Nodes = []corev1.Node{node}
	}
	if pvName := va.Spec.Source.PersistentVolumeName; pvName != nil {
		var pv corev1.PersistentVolume
		if err := getOptional(ctx, c, client.ObjectKey{Name: *pvName}, &pv); err != nil {
			return nil, err
		}
		if pv.Name != "" {
			s.PVs = []corev1.PersistentVolume{pv}
			if ref := pv.Spec.ClaimRef; ref != nil {
				var pvc corev1.PersistentVolumeClaim
				if err := getOptional(ctx, c, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &pvc); err != nil {
					return nil, err
				}
				if pvc.Name != "" {
					s.PVCs = []corev1.PersistentVolumeClaim{pvc}
				}
			}
		}
	}
	var pods corev1.PodList
	if _, err := listAll(ctx, c, &pods, "", o.PageSize, client.MatchingFields{"spec.nodeName": va.Spec.NodeName}); err != nil {
		return nil, fmt.Errorf("listing pods on node %s: %w", va.Spec.NodeName, err)
	}
	s.Pods = pods.Items
	return snapshot.New(s), nil
}

// getOptional reads obj; a missing object leaves it empty.
func getOptional(ctx context.Context, c client.Reader, key client.ObjectKey, obj client.Object) error {
	if err := c.Get(ctx, key, obj); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading %s: %w", key, err)
	}
	return nil
}
