package realkv

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// A storage live migration that completes (kubevirt/kubevirt#19157): a
// running VM with updateVolumesStrategy Migration has its disk's claim
// changed from src to dst; real virt-controller migrates it, the emulated
// virt-handler completes the migration on the target and reports the source
// launcher pod Succeeded (as the kubelet would), and real virt-controller
// keeps that pod (it deletes a completed migration's source pod only when
// it garbage-collects the migration, after five newer ones). tether
// reports the pod pinning pvc-src; fix --apply without the flag changes
// nothing; with --delete-migration-source-pods it deletes the pod, and the
// VMI keeps running on the target.
func TestReal_migrationSourcePod_reportedAndDeletedOnRequest(t *testing.T) {
	w := newWorld(t)
	w.liveMigrateWorkloads()
	w.claims("pvc-src", "pvc-dst")
	w.vmWithClaim("mover", "pvc-src", kubevirtv1.RunStrategyAlways)
	w.PatchVM("mover", `{"spec":{"updateVolumesStrategy":"Migration"}}`)
	w.running("mover")
	w.PatchVM("mover", `{"spec":{"template":{"spec":{"volumes":[{"name":"data","persistentVolumeClaim":{"claimName":"pvc-dst"}}]}}}}`)
	var source string
	testenv.Eventually(t, 120*time.Second, "the volume migration of mover completes and its source pod ends", func() (bool, error) {
		vmi, err := w.vmi("mover")
		if err != nil {
			return false, err
		}
		ms := vmi.Status.MigrationState
		if ms == nil || !ms.Completed || ms.Failed || vmi.Status.NodeName != ms.TargetNode || ms.SourcePod == "" {
			return false, nil
		}
		var pod corev1.Pod
		if err := w.C.Get(context.Background(), client.ObjectKey{Namespace: w.NS, Name: ms.SourcePod}, &pod); err != nil {
			return false, err
		}
		source = pod.Name
		return pod.Status.Phase == corev1.PodSucceeded, nil
	})

	scope := []string{"-n", w.NS}
	f := only(t, audit(t, w.Env, scope), check.MigrationSourcePodLeftover, "")
	if f.Object.Kind != "Pod" || f.Object.Name != source || !contains(f.Evidence, "it names claim pvc-src (exists), which no volume of the VMI names: PVC protection counts the pod as a user of it") {
		t.Fatalf("want the finding on source pod %s pinning pvc-src, got %+v", source, f)
	}
	fixChangesNothing(t, w.Env, scope)

	if r := tether(t, w.Env, append([]string{"fix", "--apply", "--check", check.MigrationSourcePodLeftover, "--delete-migration-source-pods"}, scope...)...); !strings.Contains(r.Stdout, "Applied") {
		t.Fatalf("fix --apply --delete-migration-source-pods: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	testenv.Eventually(t, 30*time.Second, "the source pod is gone", func() (bool, error) {
		var pod corev1.Pod
		err := w.C.Get(context.Background(), client.ObjectKey{Namespace: w.NS, Name: source}, &pod)
		return apierrors.IsNotFound(err) || (err == nil && pod.DeletionTimestamp != nil), nil
	})
	if vmi, err := w.vmi("mover"); err != nil || vmi.Status.Phase != kubevirtv1.Running {
		t.Fatalf("the VMI should still run: %v", err)
	}
}
