// Package openstack plugs OpenStack into tether's plan/apply driver
// (internal/plan): a Fixer surveys Nova and Cinder (observe, then the pure
// checks) and repairs one finding at a time (act, after its live re-read
// and re-check). Its stages live beside it: snapshot, observe, check, act.
//
// OpenStack findings must be seen twice, --grace apart, before a one-shot
// run acts on them: Nova and Cinder pass through states (reserved,
// attaching, detaching) that look like drift for a moment.
package openstack

import (
	"context"
	"fmt"
	"time"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/openstack/act"
	"github.com/tether-dev/tether/internal/openstack/check"
	"github.com/tether-dev/tether/internal/openstack/observe"
	"github.com/tether-dev/tether/internal/openstack/snapshot"
	"github.com/tether-dev/tether/internal/plan"
)

// Fixer is OpenStack as the driver drives it.
type Fixer struct {
	Clients *observe.Clients
	Policy  check.Policy
	Observe observe.Options
	// Last is the snapshot of the latest Survey.
	Last *snapshot.Snapshot

	executor *act.Executor
}

// Survey reads Nova and Cinder once and runs the policy's checks.
func (x *Fixer) Survey(ctx context.Context) (plan.Survey, error) {
	s, err := observe.Observe(ctx, x.Clients, x.Observe)
	if err != nil {
		return plan.Survey{}, err
	}
	x.Last = s
	return plan.Survey{Findings: check.Run(s, x.Policy, s.Taken), Taken: s.Taken, Subjects: subjects(s), Anomalies: Anomalies(s)}, nil
}

// Fix repairs one finding through act's live re-read and re-check.
func (x *Fixer) Fix(ctx context.Context, f drift.Finding) drift.Result {
	if x.executor == nil {
		x.executor = &act.Executor{Clients: x.Clients, Policy: x.Policy}
	}
	return x.executor.Apply(ctx, f)
}

// SeenTwice is the policy's grace: findings are seen twice that far apart.
func (x *Fixer) SeenTwice(drift.Finding) time.Duration {
	if x.Policy.Grace > 0 {
		return x.Policy.Grace
	}
	return check.DefaultGrace
}

// About resolves --object in the latest survey (Resolve): the findings
// about that server, volume or attachment.
func (x *Fixer) About(object string) (func(drift.Finding) bool, error) {
	if x.Last == nil {
		return nil, fmt.Errorf("--object %q: nothing observed yet", object)
	}
	t, err := Resolve(x.Last, object)
	if err != nil {
		return nil, err
	}
	s := x.Last
	return func(f drift.Finding) bool { return t.About(s, f) }, nil
}
