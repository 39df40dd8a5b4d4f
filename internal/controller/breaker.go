package controller

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// BreakerLease names the Lease, in the controller's namespace, that records
// a tripped blast-radius limit. It outlives the process: a restarted or new
// leader reads it and does not act. Only an operator clears it, by deleting
// it and restarting the controller (docs/controller.md).
const BreakerLease = "tether-blast-radius-tripped"

// breaker keeps the blast-radius trip durable.
type breaker struct {
	// Live reads and writes the Lease.
	Live      client.Client
	Namespace string
	// Identity names the replica that tripped it.
	Identity string
}

// tripped reports whether the Lease says acting has stopped, and why.
func (b *breaker) tripped(ctx context.Context) (bool, string, error) {
	var l coordinationv1.Lease
	err := b.Live.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: BreakerLease}, &l)
	switch {
	case apierrors.IsNotFound(err):
		return false, "", nil
	case err != nil:
		return false, "", fmt.Errorf("reading the blast-radius breaker (Lease %s/%s): %w", b.Namespace, BreakerLease, err)
	}
	return true, l.Annotations[breakerReason], nil
}

const breakerReason = "tether.dev/reason"

// trip writes the Lease; one that exists already is kept as it is.
func (b *breaker) trip(ctx context.Context, why string, now time.Time) error {
	at := metav1.NewMicroTime(now)
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: BreakerLease, Annotations: map[string]string{breakerReason: why}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &b.Identity, AcquireTime: &at},
	}
	if err := b.Live.Create(ctx, l); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("recording the blast-radius trip (Lease %s/%s): %w", b.Namespace, BreakerLease, err)
	}
	return nil
}
