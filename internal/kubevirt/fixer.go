// Package kubevirt plugs KubeVirt (and the Kubernetes storage objects its
// volumes stand on) into tether's plan/apply driver (internal/plan): a
// Fixer surveys the cluster (observe, one paginated LIST per kind the
// chosen checks read, then the pure checks) and repairs one finding at a
// time (act: live re-read, re-check, server-side dry run, guarded write).
// Its stages live beside it: snapshot, observe, check, act, and virtapi,
// the client of virt-api's volume subresources.
//
// One sighting is enough for a one-shot run on KubeVirt for the checks
// that hold what is too young themselves (a VolumeAttachment no pod needs,
// a deletion stuck on a finalizer, an attachment pod). A check whose drift
// the objects do not date (StuckPublish) says how far apart a fix must see
// it twice; the controller keeps the durable first sighting in its Finding
// records.
package kubevirt

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/plan"
)

// Fixer is KubeVirt as the driver drives it.
type Fixer struct {
	Config  *rest.Config
	Policy  check.Policy
	Observe observe.Options
	// MinSeverity drops findings below it.
	MinSeverity drift.Severity
	// ExtraKinds are read beyond what the checks decide from (what an
	// output format shows).
	ExtraKinds snapshot.Kinds
	// Observed, when set, runs when a survey's reads end (the command line
	// clears its progress line).
	Observed func()
	// Last is the snapshot of the latest Survey.
	Last *snapshot.Snapshot
	// DeferText defers the words of the findings whose checks can write
	// them later (check.RunDeferred): a caller that prints the findings one
	// at a time writes each then (drift.Finding.Written), and never holds
	// the words of all of them. Last must then stay unchanged until it has.
	DeferText bool
	// Source, when set, is read in place of the cluster (a support bundle,
	// see internal/bundle): the survey reads it as it reads an API server,
	// and Fix refuses to act on it.
	Source client.Reader
	// Now, when set, is the time the checks decide at (a bundle's
	// collection time); zero is the time of the survey.
	Now time.Time

	// found are the latest Survey's findings (About knows the objects
	// they name).
	found    []drift.Finding
	executor *act.Executor
}

// Survey reads the kinds the policy's checks decide from (and only the
// fields decisions read) and runs the checks.
func (x *Fixer) Survey(ctx context.Context) (plan.Survey, error) {
	obs := x.Observe
	obs.Kinds, obs.Lean = check.Reads(x.Policy.Checks)|x.ExtraKinds, true
	c, err := x.reader(&obs)
	if err != nil {
		return plan.Survey{}, err
	}
	if pr, ok := obs.Pages.(*observe.PageReader); ok {
		pr.CBOR = obs.CBOR // a bundle's pages are read from files
	}
	s, err := observe.Observe(ctx, c, obs)
	if x.Observed != nil {
		x.Observed()
	}
	if err != nil {
		return plan.Survey{}, err
	}
	x.Last = s
	now := x.Now
	if now.IsZero() {
		now = time.Now()
	}
	run := check.Run
	if x.DeferText {
		run = check.RunDeferred
	}
	findings := run(s, x.Policy, now)
	kept := findings[:0]
	for _, f := range findings {
		if f.Severity.Rank() >= x.MinSeverity.Rank() {
			kept = append(kept, f)
		}
	}
	x.found = kept
	return plan.Survey{Findings: kept, Taken: now, Subjects: subjects(s), Anomalies: Anomalies(s)}, nil
}

// reader is what a survey reads: Source, or the cluster (with the page
// reader of VMIs and VMs in obs).
func (x *Fixer) reader(obs *observe.Options) (client.Reader, error) {
	if x.Source != nil {
		obs.PageSize = observe.Unpaged
		if p, ok := x.Source.(observe.Pager); ok {
			obs.Pages = p // VMIs and VMs as the source holds them
		}
		return x.Source, nil
	}
	c, err := clients.New(x.Config)
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster: %v", err)
	}
	if obs.Pages, err = observe.NewPageReader(x.Config); err != nil {
		return nil, fmt.Errorf("connecting to the cluster: %v", err)
	}
	return c, nil
}

// Fix carries out one finding through act, whose live re-check sees the
// durable node records the survey saw. Nothing is done from a Source.
func (x *Fixer) Fix(ctx context.Context, f drift.Finding) drift.Result {
	if x.Source != nil {
		err := fmt.Errorf("not acting on a support bundle: it is a picture of the past")
		return drift.Result{FindingID: f.ID, Outcome: drift.Failed, Cause: drift.ServerError, Message: err.Error(), Err: err}
	}
	if x.executor == nil {
		ex, err := act.NewExecutor(x.Config, x.Policy, x.Observe)
		if err != nil {
			return drift.Result{FindingID: f.ID, Outcome: drift.Failed, Cause: drift.ServerError, Message: "connecting to the cluster: " + err.Error(), Err: err}
		}
		x.executor = ex
	}
	var ev act.Evidence
	if x.Last != nil {
		ev.NodesGoneSince = x.Last.NodesGoneSince
	}
	return x.executor.Apply(ctx, f, ev)
}

// SeenTwice is the check's own (check.SeenTwice): zero for every check
// whose drift the objects date, so one sighting is enough (see the package
// comment).
func (x *Fixer) SeenTwice(f drift.Finding) time.Duration { return check.SeenTwice(x.Policy, f.Check) }
