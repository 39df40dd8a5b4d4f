package emulator

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Pods are listed from the informer cache, which can lag behind our own
// writes. Expectations remember the pods a VMI's last pass created or
// deleted; until the cache shows all of them, the VMI's pods are not judged
// again (else a late cache would make us create a second pod).

const expectationTTL = 5 * time.Second

// podState is what the cache must show of an expected pod.
type podState int

const (
	podExists  podState = iota // created
	podRunning                 // marked Running
	podGone                    // deleted (gone or terminating)
)

type podExpectation struct {
	name    string
	want    podState
	expires time.Time
}

type expectations struct {
	mu  sync.Mutex
	set map[types.NamespacedName][]podExpectation
}

func (x *expectations) expect(vmi types.NamespacedName, pod string, want podState) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.set == nil {
		x.set = map[types.NamespacedName][]podExpectation{}
	}
	x.set[vmi] = append(x.set[vmi], podExpectation{name: pod, want: want, expires: time.Now().Add(expectationTTL)})
}

// satisfied reports whether the cache shows every expected change for vmi,
// dropping those it shows (and those that expired).
func (x *expectations) satisfied(ctx context.Context, c client.Reader, vmi types.NamespacedName) bool {
	x.mu.Lock()
	pending := x.set[vmi]
	x.mu.Unlock()
	if len(pending) == 0 {
		return true
	}
	var left []podExpectation
	for _, p := range pending {
		if time.Now().After(p.expires) {
			continue
		}
		pod := &corev1.Pod{}
		err := c.Get(ctx, client.ObjectKey{Namespace: vmi.Namespace, Name: p.name}, pod)
		var seen bool
		switch p.want {
		case podExists:
			seen = err == nil
		case podRunning:
			seen = err == nil && pod.Status.Phase == corev1.PodRunning
		case podGone:
			seen = apierrors.IsNotFound(err) || (err == nil && pod.DeletionTimestamp != nil)
		}
		if !seen {
			left = append(left, p)
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(left) == 0 {
		delete(x.set, vmi)
		return true
	}
	x.set[vmi] = left
	return false
}
