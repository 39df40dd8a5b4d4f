package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/metrics"
	"github.com/tether-dev/tether/internal/testing/localenv"
)

const storageNS = "bench-storage"

// runStorage measures the controller's storage checks over N volumes, each a
// claim, a PV, a VolumeAttachment and a pod using it, 40 pods to a node; one
// volume in a hundred is attached to a node that is gone (a stale
// attachment, and its pod waiting on a volume held elsewhere). It reports
// the heap the caches take per volume, the time to the first complete set
// of records, the duration of one pass, and the API requests per minute
// once settled (45 s after the first records; watches aside).
func runStorage(sizes string, window time.Duration) error {
	ctx := context.Background()
	env, c, err := controllerEnv(ctx)
	if err != nil {
		return err
	}
	defer env.Stop()
	for _, ns := range []string{storageNS, controller.DefaultNamespace} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	fmt.Printf("%-8s %-14s %-18s %-14s %-22s %s\n", "VOLUMES", "HEAP/VOLUME", "FIRST RECORDS", "PASS (avg)", "REQUESTS/MIN (steady)", "STEADY-STATE REQUESTS")
	return growing(sizes, "-volumes", func(from, to int) error {
		if err := seedStorage(ctx, c, from, to); err != nil {
			return err
		}
		return measureStorage(ctx, env, c, to, window)
	})
}

func seedStorage(ctx context.Context, c client.Client, from, to int) error {
	work := make(chan int)
	errs := make(chan error, to-from)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := seedVolume(ctx, c, i); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := from; i < to; i++ {
		if i%40 == 0 {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%05d", i/40)}}
			if err := c.Create(ctx, node); err != nil {
				return err
			}
		}
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs // nil when none
}

func seedVolume(ctx context.Context, c client.Client, i int) error {
	claim, pv, node := fmt.Sprintf("data-%06d", i), fmt.Sprintf("pv-%06d", i), fmt.Sprintf("node-%05d", i/40)
	vaNode := node
	if i%100 == 3 {
		vaNode = "gone-" + node
	}
	q := resource.MustParse("1Gi")
	rwo := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	objs := []client.Object{
		&corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: storageNS, Name: claim},
			Spec:       corev1.PersistentVolumeClaimSpec{AccessModes: rwo, VolumeName: pv, Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: q}}},
		},
		&corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: pv},
			Spec: corev1.PersistentVolumeSpec{
				Capacity: corev1.ResourceList{corev1.ResourceStorage: q}, AccessModes: rwo,
				ClaimRef:               &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: storageNS, Name: claim},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "csi.bench.tether.dev", VolumeHandle: pv}},
			},
		},
		&storagev1.VolumeAttachment{
			ObjectMeta: metav1.ObjectMeta{Name: "va-" + pv},
			Spec:       storagev1.VolumeAttachmentSpec{Attacher: "csi.bench.tether.dev", NodeName: vaNode, Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}},
		},
		&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: storageNS, Name: "app-" + claim, Labels: map[string]string{"app": "bench"}},
			Spec: corev1.PodSpec{
				NodeName:   node,
				Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:bench"}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
			},
		},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("seeding %s: %w", o.GetName(), err)
		}
	}
	return nil
}

func measureStorage(ctx context.Context, env *localenv.Env, c client.Client, n int, window time.Duration) error {
	cfg := config.Default()
	on := config.CheckConfig{Enabled: true}
	cfg.Checks = map[string]config.CheckConfig{check.StaleVolumeAttachment: on, check.MultiAttachConflict: on, check.BlockedDeletion: on}
	cfg.Scope.Namespaces = []string{storageNS}
	cfg.DryRun = true
	cfg.Storage.StaleAttachmentGrace.Duration = time.Nanosecond
	cfg.Storage.MultiAttachGrace.Duration = time.Nanosecond
	run, err := startController(ctx, env, &cfg, "")
	if err != nil {
		return err
	}
	cctx, before, t0 := run.ctx, run.heapBefore, run.synced
	want := 2 * n / 100 // each stale attachment, and its pod
	if err := waitFor(cctx, 10*time.Minute, func() bool {
		var list v1alpha1.FindingList
		return c.List(cctx, &list, client.InNamespace(storageNS)) == nil && len(list.Items) >= want
	}); err != nil {
		return fmt.Errorf("first records: %w", err)
	}
	first := time.Since(t0)
	perVolume := float64(heap()-before) / float64(n)

	// Settle: the first passes write the new records while the cache
	// catches up with them (conflicts are retried); steady state is after.
	time.Sleep(45 * time.Second)
	sum0, count0 := passes()
	// The records' writes as one entry ("PUT findings/status").
	perMin, detail := run.steady(window, func(k string) string {
		verb, path, _ := strings.Cut(k, " ")
		if _, rest, ok := strings.Cut(path, "/findings/"); ok {
			path = "findings"
			if strings.HasSuffix(rest, "/status") {
				path += "/status"
			}
		}
		return verb + " " + path
	})
	sum, count := passes()
	pass := "none"
	if count > count0 {
		pass = fmt.Sprintf("%s (%d)", time.Duration((sum-sum0)/float64(count-count0)*float64(time.Second)).Round(time.Millisecond), count-count0)
	}
	fmt.Printf("%-8d %-14s %-18s %-14s %-22.1f %s\n", n, fmt.Sprintf("%.1f KiB", perVolume/1024), first.Round(10*time.Millisecond), pass, perMin, detail)
	return run.stop()
}

// passes returns the sum and count of reconcile durations so far (only the
// storage reconciler runs in this mode).
func passes() (float64, uint64) {
	var m dto.Metric
	if err := metrics.ReconcileSeconds.Write(&m); err != nil || m.Histogram == nil {
		return 0, 0
	}
	return m.Histogram.GetSampleSum(), m.Histogram.GetSampleCount()
}
