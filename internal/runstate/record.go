package runstate

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/findingrecord"
)

// RecordStore keeps the state in a switch record (findingrecord.Switch) in
// a Kubernetes namespace: the breaker's trip and reset as the controller's
// breaker shows them (phase Blocked, then Resolved with resolvedAt), the
// window and the lock in the record's state annotation. Every write carries
// the resourceVersion of the last read, so two runs never both take the
// lock.
type RecordStore struct {
	Client    client.Client
	Namespace string
	Switch    findingrecord.Switch

	// rv is the resourceVersion of the last read or write ("" before the
	// record exists); tripped, what the record last showed.
	rv      string
	tripped bool
}

// Where implements Store.
func (r *RecordStore) Where() string {
	return fmt.Sprintf("record %s/%s (kubectl get finding -n %s %s)", r.Namespace, r.Switch.Name, r.Namespace, r.Switch.Name)
}

// Load implements Store.
func (r *RecordStore) Load(ctx context.Context) (State, error) {
	rec, err := r.Switch.Read(ctx, r.Client, r.Namespace)
	if err != nil {
		return State{}, err
	}
	var s State
	if rec.State != "" {
		if s, err = decode([]byte(rec.State), r.Where()); err != nil {
			return State{}, err
		}
	}
	// The switch is the truth of the trip: an operator may have reset it
	// with the controller's tools.
	s.Tripped, s.TrippedAt, s.Message, s.ResetAt = rec.Tripped, rec.TrippedAt, rec.Message, rec.ResetAt
	r.rv, r.tripped = rec.ResourceVersion, rec.Tripped
	return s, nil
}

// Lock implements Store: the lock is the record's, written with the
// resourceVersion just read.
func (r *RecordStore) Lock(ctx context.Context, holder string, now time.Time, ttl time.Duration) error {
	s, err := r.Load(ctx)
	if err != nil {
		return err
	}
	if l := s.Lock; l != nil && l.Holder != holder && now.Before(l.Until) {
		return fmt.Errorf("another run holds the lock of the %s (%s, until %s): it acts now; this run changes nothing (run it again once that one ended)",
			r.Where(), l.Holder, l.Until.UTC().Format(time.RFC3339))
	}
	s.Lock = &Lock{Holder: holder, Until: now.Add(ttl)}
	if err := r.write(ctx, s); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("another run took the lock of the %s first: this run changes nothing", r.Where())
		}
		return err
	}
	return nil
}

// Save implements Store: the state, the trip when this run tripped it,
// and the reset when this run cleared it.
func (r *RecordStore) Save(ctx context.Context, s State) error {
	if err := r.write(ctx, s); err != nil {
		return err
	}
	if !s.Tripped && r.tripped {
		if _, err := r.Switch.Reset(ctx, r.Client, r.Namespace, s.ResetAt, s.ResetBy); err != nil {
			return fmt.Errorf("resetting the %s: %w", r.Where(), err)
		}
		_, err := r.Load(ctx)
		return err
	}
	return nil
}

// Unlock implements Store.
func (r *RecordStore) Unlock(ctx context.Context) error {
	s, err := r.Load(ctx)
	if err != nil || s.Lock == nil {
		return err
	}
	s.Lock = nil
	return r.write(ctx, s)
}

// write stores s with the last resourceVersion, tripping the switch when s
// is tripped and the record is not.
func (r *RecordStore) write(ctx context.Context, s State) error {
	trip := s.Tripped && !r.tripped
	stored := s
	// The trip lives in the switch, not in the annotation.
	stored.Tripped, stored.TrippedAt, stored.Message, stored.ResetAt = false, time.Time{}, "", time.Time{}
	rv, err := r.Switch.Write(ctx, r.Client, r.Namespace, r.rv, stored, trip, s.TrippedAt, s.Message)
	if err != nil {
		return err
	}
	r.rv = rv
	r.tripped = r.tripped || trip
	return nil
}
