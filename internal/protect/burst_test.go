package protect_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/protect/inuse"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// burstRounds is how many bursts TestReleaseWindowBurst issues.
const burstRounds = 60

// round is one burst: claim is held by old; newVM is created referencing
// claim while old and claim are deleted, all three at once.
type round struct {
	claim, old, newVM string
	createErr         error
	// created is the resourceVersion at which the new VM was stored.
	created    int64
	deleteErrs [2]error
}

// outcome is where a round settled.
type outcome int

const (
	unsettled outcome = iota
	// heldForNew: the new VM exists and the claim is still there, deletion
	// postponed by the finalizer.
	heldForNew
	// refusedAndGone: the new VM's create was refused and the claim went.
	refusedAndGone
	// lateCreate: the new VM was stored after the claim was gone (its
	// create came late in the burst): a dangling reference by the order of
	// the user's own writes, which no protection can prevent.
	lateCreate
	// lost: the new VM was stored while the claim existed, and the claim
	// went anyway.
	lost
)

// TestReleaseWindowBurst: "create a VM that uses claim X + delete the old VM
// + delete claim X", issued concurrently, many times. Every round must end
// with either the new VM holding the claim (its deletion postponed) or the
// new VM refused at admission and the claim gone; never a VM referencing a
// claim that is gone.
func TestReleaseWindowBurst(t *testing.T) {
	w := newWorld(t)
	w.startWindow()
	rounds := make([]*round, burstRounds)
	for i := range rounds {
		r := &round{claim: fmt.Sprintf("c-%d", i), old: fmt.Sprintf("old-%d", i), newVM: fmt.Sprintf("new-%d", i)}
		rounds[i] = r
		w.create(fixture.PVC(r.claim))
		w.create(usingVM(r.old, r.claim))
	}
	for _, r := range rounds {
		w.protected(r.claim)
	}
	deleted := w.watchDeletions()
	t0 := time.Now()
	var wg sync.WaitGroup
	for i, r := range rounds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.burst(i, r)
		}()
		time.Sleep(burstStagger)
	}
	wg.Wait()
	t.Logf("%d bursts issued in %s", len(rounds), time.Since(t0).Round(time.Millisecond))
	for _, r := range rounds {
		if err := r.unexpected(); err != nil {
			t.Fatal(err)
		}
	}

	counts := w.settle(rounds, deleted, 30*time.Second)
	t.Logf("rounds=%d held=%d refused=%d late-creates=%d losses=%d unsettled=%d",
		len(rounds), counts[heldForNew], counts[refusedAndGone], counts[lateCreate], counts[lost], counts[unsettled])
	if counts[lost] > 0 || counts[unsettled] > 0 {
		t.Errorf("%d of %d rounds lost the claim of a VM that references it; %d did not settle", counts[lost], len(rounds), counts[unsettled])
	}
}

// burstStagger separates the starts of two rounds; rounds overlap.
const burstStagger = 50 * time.Millisecond

// span is a random delay between min and max.
type span struct{ min, max time.Duration }

func (s span) sleep() { time.Sleep(s.min + rand.N(s.max-s.min+1)) }

// burstDelays are the ways a round spreads its writes: the delays before
// the create, the old VM's deletion and the claim's deletion.
var burstDelays = [][3]span{
	// near: all three within 5ms, in any order.
	{{0, 5 * time.Millisecond}, {0, 5 * time.Millisecond}, {0, 5 * time.Millisecond}},
	// create late: it lands while the claim is terminating, or after.
	{{0, createJitter}, {0, 3 * time.Millisecond}, {0, 3 * time.Millisecond}},
	// old VM first: the claim's last user goes before the claim's
	// deletion and the create arrive.
	{{0, 60 * time.Millisecond}, {0, 0}, {0, 60 * time.Millisecond}},
	// create at the release: it lands around the end of the release
	// delay, when the final live LIST runs.
	{{testReleaseDelay, testReleaseDelay + 3*time.Second}, {0, 3 * time.Millisecond}, {0, 3 * time.Millisecond}},
}

// burst issues the three writes of r at once, each after a random delay
// (burstDelays, by round).
func (w *world) burst(i int, r *round) {
	var wg sync.WaitGroup
	delays := burstDelays[i%len(burstDelays)]
	wg.Add(3)
	go func() {
		defer wg.Done()
		delays[0].sleep()
		vm := usingVM(r.newVM, r.claim)
		vm.Namespace = w.ns
		if r.createErr = w.c.Create(w.ctx, vm); r.createErr == nil {
			r.created, r.createErr = revision(vm)
		}
	}()
	go func() {
		defer wg.Done()
		delays[1].sleep()
		r.deleteErrs[0] = w.c.Delete(w.ctx, &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: r.old}})
	}()
	go func() {
		defer wg.Done()
		delays[2].sleep()
		r.deleteErrs[1] = w.c.Delete(w.ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: r.claim}})
	}()
	wg.Wait()
}

// unexpected is the first error of r's writes other than the webhook's
// refusal.
func (r *round) unexpected() error {
	for _, err := range r.deleteErrs {
		if err != nil {
			return fmt.Errorf("round %s: delete: %w", r.claim, err)
		}
	}
	if r.createErr != nil && !refusedForWindow(r.createErr) {
		return fmt.Errorf("round %s: creating %s failed for another reason: %w", r.claim, r.newVM, r.createErr)
	}
	return nil
}

// refusedForWindow reports whether err is the admission refusal of a VM
// that references an object being deleted.
func refusedForWindow(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status) && apierrors.IsForbidden(err) && isRefusal(status.Status().Message)
}

// settle polls every round until it reaches a final state or timeout
// passes, and counts the outcomes. A round whose new VM exists is final
// only when the claim is gone (lost) or, after the release delay has long
// passed, still held.
func (w *world) settle(rounds []*round, deleted *deletions, timeout time.Duration) map[outcome]int {
	w.t.Helper()
	deadline := time.Now().Add(timeout)
	holdSince := time.Now().Add(settleHold)
	got := make([]outcome, len(rounds))
	for {
		open := 0
		for i, r := range rounds {
			if got[i] == lost || got[i] == refusedAndGone || got[i] == lateCreate {
				continue
			}
			got[i] = w.outcome(r, deleted, time.Now().After(holdSince))
			if got[i] == unsettled {
				open++
			}
		}
		if open == 0 && time.Now().After(holdSince) || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	counts := map[outcome]int{}
	for i, o := range got {
		counts[o]++
		if o == lost {
			w.t.Logf("lost: %s references %s, which is gone or unprotected", rounds[i].newVM, rounds[i].claim)
		}
	}
	return counts
}

// outcome reads r's state; held says enough time has passed for a held
// claim to count as held for good.
func (w *world) outcome(r *round, deleted *deletions, held bool) outcome {
	claim, err := w.pvc(r.claim)
	gone := apierrors.IsNotFound(err)
	if err != nil && !gone {
		w.t.Fatalf("reading %s: %v", r.claim, err)
	}
	if r.createErr != nil {
		if gone {
			return refusedAndGone
		}
		return unsettled
	}
	var vm kubevirtv1.VirtualMachine
	if err := w.c.Get(w.ctx, types.NamespacedName{Namespace: w.ns, Name: r.newVM}, &vm); err != nil {
		w.t.Fatalf("reading %s: %v", r.newVM, err)
	}
	switch {
	case gone:
		at, ok := deleted.at(r.claim)
		switch {
		case !ok:
			return unsettled // the watch has not caught up yet
		case r.created < at:
			return lost
		}
		return lateCreate
	case !inuse.HasFinalizer(claim):
		return unsettled // released; gone in a moment
	case held:
		return heldForNew
	}
	return unsettled
}

// deletions records at which resourceVersion each PVC of the namespace was
// removed from storage.
type deletions struct {
	mu sync.Mutex
	rv map[string]int64
}

func (d *deletions) at(name string) (int64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	rv, ok := d.rv[name]
	return rv, ok
}

// watchDeletions watches the PVCs of the namespace until the test ends.
// The test compares resourceVersions of different objects: on one etcd they
// are the store's revisions, ordered in time (the API calls them opaque).
func (w *world) watchDeletions() *deletions {
	w.t.Helper()
	d := &deletions{rv: map[string]int64{}}
	pvcs := w.env.Client.CoreV1().PersistentVolumeClaims(w.ns)
	list, err := pvcs.List(w.ctx, metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	wi, err := pvcs.Watch(w.ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(wi.Stop)
	go func() {
		for ev := range wi.ResultChan() {
			if p, ok := ev.Object.(*corev1.PersistentVolumeClaim); ok && ev.Type == watch.Deleted {
				rv, err := revision(p)
				if err != nil {
					w.t.Error(err)
				}
				d.mu.Lock()
				d.rv[p.Name] = rv
				d.mu.Unlock()
			}
		}
	}()
	return d
}

func revision(o metav1.Object) (int64, error) {
	rv, err := strconv.ParseInt(o.GetResourceVersion(), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("resourceVersion %q of %s is not a number", o.GetResourceVersion(), o.GetName())
	}
	return rv, nil
}
