package tenant

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// vmiKeys returns n batches of keys that name distinct VMIs in turn.
func vmiKeys(batches, distinct int) [][]metav1.ObjectMeta {
	out := make([][]metav1.ObjectMeta, batches)
	for i := range out {
		out[i] = []metav1.ObjectMeta{{Namespace: "ns", Name: fmt.Sprintf("vmi-%d", i%distinct)}}
	}
	return out
}

// A standby replica runs the tenant watches but not the controller that
// drains their wake-ups: the handlers must never wait for it, and what the
// standby holds stays bounded by the VMIs there are.
func TestTenantEvents_neverBlockOnAStandby(t *testing.T) {
	q := NewWakeQueue() // nobody runs q.Start: a standby
	te := tenantEvents{q: q}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, keys := range vmiKeys(20000, 100) {
			te.send(keys)
		}
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("a tenant event handler blocked: nobody drains the wake-ups on a standby")
	}
	if n := q.size(); n != 100 {
		t.Fatalf("the standby holds %d wake-ups for 100 VMIs", n)
	}
}

// Once leading, every woken VMI reaches the controller, each once however
// often it was woken.
func TestWakeQueue_forwardsEachVMIOnce(t *testing.T) {
	q := NewWakeQueue()
	for _, keys := range vmiKeys(1000, 10) {
		q.add(keys)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = q.Start(ctx) }()
	got := map[types.NamespacedName]int{}
	for len(got) < 10 {
		select {
		case ev := <-q.out:
			got[types.NamespacedName{Namespace: ev.Object.GetNamespace(), Name: ev.Object.GetName()}]++
		case <-time.After(time.Minute):
			t.Fatalf("only %d of 10 VMIs forwarded", len(got))
		}
	}
	select {
	case ev := <-q.out:
		t.Fatalf("%s/%s forwarded twice", ev.Object.GetNamespace(), ev.Object.GetName())
	case <-time.After(200 * time.Millisecond):
	}
	q.add([]metav1.ObjectMeta{{Namespace: "ns", Name: "vmi-3"}})
	select {
	case ev := <-q.out:
		if ev.Object.GetName() != "vmi-3" {
			t.Fatalf("forwarded %s, want vmi-3", ev.Object.GetName())
		}
	case <-time.After(time.Minute):
		t.Fatal("a VMI woken again after it was forwarded never reached the controller")
	}
	for k, n := range got {
		if n != 1 {
			t.Fatalf("%s forwarded %d times", k, n)
		}
	}
}
