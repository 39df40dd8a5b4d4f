package emulator_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestLatencyProbe(t *testing.T) {
	e := needEnv(t)
	ctx := context.Background()
	ns := e.namespace(t)
	e.pvc(t, ns, "x")
	for i := 0; i < 3; i++ {
		t0 := time.Now()
		_ = e.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "x"}, &corev1.PersistentVolumeClaim{})
		t1 := time.Now()
		_ = e.cl.List(ctx, &corev1.PersistentVolumeClaimList{}, client.InNamespace(ns))
		t2 := time.Now()
		_ = e.cl.List(ctx, &corev1.PodList{}, client.InNamespace(ns), client.MatchingLabels{"a": "b"})
		t3 := time.Now()
		p := &corev1.PersistentVolumeClaim{}
		_ = e.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "x"}, p)
		t4 := time.Now()
		_ = e.cl.Update(ctx, p)
		t5 := time.Now()
		t.Logf("get %s list %s listpods %s update %s", t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), t5.Sub(t4))
	}
}
