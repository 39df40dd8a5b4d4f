package runstate

import (
	"context"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/config/crd"
	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/findingrecord"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}) }

var testSwitch = findingrecord.Switch{Name: "test-blast-radius", Check: "TestBlastRadius", Reason: findingrecord.BreakerTripped, What: "test breaker"}

// recordStore is a RecordStore in a fresh namespace of the real API server,
// with the Finding CRD installed.
func recordStore(t *testing.T) (func() *RecordStore, client.Client, string) {
	t.Helper()
	env := testenv.Get(t)
	if err := crd.Install(context.Background(), env.Config); err != nil {
		t.Fatal(err)
	}
	c, err := clients.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	return func() *RecordStore { return &RecordStore{Client: c, Namespace: ns, Switch: testSwitch} }, c, ns
}

// On a real API server: one run holds the record's lock and a second is
// refused (naming the first) until it ends or its lock runs out; the trip
// is the record's phase, as the controller's breaker shows it, and a reset
// through the store lets runs act again, not counting what came before.
func TestRecordStore_lockTripReset(t *testing.T) {
	ctx := context.Background()
	store, c, ns := recordStore(t)
	a, b := store(), store()
	if err := a.Lock(ctx, "run A", t0, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := b.Lock(ctx, "run B", t0.Add(time.Minute), 10*time.Minute); err == nil || !strings.Contains(err.Error(), "run A") {
		t.Fatalf("second run's lock: %v; want refused, naming run A", err)
	}
	// A stale read cannot take it either: the write carries the
	// resourceVersion.
	stale := store()
	if _, err := stale.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Save(ctx, State{Lock: &Lock{Holder: "run A", Until: t0.Add(10 * time.Minute)}, Actions: []Action{{At: t0, Finding: "f0"}}}); err != nil {
		t.Fatal(err)
	}
	if err := stale.write(ctx, State{Lock: &Lock{Holder: "run C", Until: t0.Add(time.Hour)}}); err == nil {
		t.Fatal("a write on a stale read succeeded")
	}

	l := Limits{Max: 1, Interval: time.Hour}
	now := t0.Add(time.Minute)
	br := &Breaker{Store: a, Limits: l, ResetCommand: "reset", Now: func() time.Time { return now }}
	f := drift.Finding{ID: "f1", Check: "C", Object: drift.ObjectRef{Kind: "Server", UID: "s"}}
	if err := br.Allows(ctx); err != nil {
		t.Fatal(err)
	}
	if err := br.Take(ctx, f); err == nil {
		t.Fatal("an action beyond the limit was let through")
	}
	var rec v1alpha1.Finding
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: testSwitch.Name}, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Status.Phase != v1alpha1.PhaseBlocked || rec.Status.Reason != findingrecord.BreakerTripped || !findingrecord.NoFinding(&rec) {
		t.Fatalf("record after the trip: %+v (labels %v); want Blocked %s, no finding", rec.Status, rec.Labels, findingrecord.BreakerTripped)
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// The lock ran out for a run that died: the next run takes it.
	dead := store()
	if err := dead.Lock(ctx, "run D", now, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := b.Lock(ctx, "run B", now.Add(2*time.Minute), 10*time.Minute); err != nil {
		t.Fatalf("lock after the dead run's ran out: %v", err)
	}
	br = &Breaker{Store: b, Limits: l, ResetCommand: "reset", Now: func() time.Time { return now }}
	if err := br.Allows(ctx); err == nil {
		t.Fatal("a run acted while the record shows the trip")
	}
	b.Unlock(ctx)

	before, cleared, err := Reset(ctx, store(), "reset", "ops", now.Add(3*time.Minute))
	if err != nil || !cleared || !before.Tripped {
		t.Fatalf("reset: %+v %v %v", before, cleared, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: testSwitch.Name}, &rec); err != nil || rec.Status.Phase != v1alpha1.PhaseResolved || rec.Status.ResolvedAt == nil {
		t.Fatalf("record after the reset: %+v, %v", rec.Status, err)
	}
	s := store()
	if err := s.Lock(ctx, "run E", now.Add(4*time.Minute), time.Minute); err != nil {
		t.Fatal(err)
	}
	br = &Breaker{Store: s, Limits: l, ResetCommand: "reset", Now: func() time.Time { return now.Add(4 * time.Minute) }}
	if err := br.Allows(ctx); err != nil {
		t.Fatalf("run after the reset: %v", err)
	}
	if err := br.Take(ctx, f); err != nil {
		t.Fatalf("first action after the reset (the earlier one no longer counts): %v", err)
	}
}
