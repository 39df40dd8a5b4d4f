package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/blastradius"
	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/findingrecord"
)

// controllerBreaker is the driver's Breaker of `tether fix`: fix and the
// controller share one blast-radius limit where they share the
// controller's namespace. fix does not act while the controller's breaker
// is tripped, and records each action it takes there, where the controller
// counts it.
type controllerBreaker struct {
	config    *rest.Config
	namespace string
	// ignore: act although the breaker is tripped (--ignore-breaker).
	ignore bool
	stderr io.Writer
	// warned: the failure to record an action was reported once.
	warned bool
}

// Allows refuses to act while the breaker in the controller's namespace
// is tripped, unless --ignore-breaker.
func (b *controllerBreaker) Allows(ctx context.Context) error {
	if b.ignore {
		return nil
	}
	c, err := clients.New(b.config)
	if err != nil {
		return err
	}
	br, err := findingrecord.Breaker(ctx, c, b.namespace)
	if err != nil {
		fmt.Fprintf(b.stderr, "warning: the controller's blast-radius breaker cannot be read (%v); acting without it\n", err)
		return nil
	}
	if br.Tripped {
		return fmt.Errorf("the controller's blast-radius breaker %s/%s tripped at %s (%s): nothing was changed; investigate, then run `tether controller reset-breaker -n %s`, or pass --ignore-breaker",
			b.namespace, findingrecord.BreakerName, br.TrippedAt.UTC().Format(time.RFC3339), br.Message, b.namespace)
	}
	return nil
}

// Count records an action of fix in the controller's namespace; a failure
// is reported and does not stop the run (the action is done).
func (b *controllerBreaker) Count(ctx context.Context, f drift.Finding, r drift.Result) {
	c, err := clients.New(b.config)
	if err == nil {
		err = findingrecord.RecordFixAction(ctx, client.WithFieldOwner(c, "tether-fix"), b.namespace, findingrecord.FixAction{
			Check: f.Check, ID: f.ID, Volume: f.Volume, Message: r.Message, At: time.Now(),
			Subject: v1alpha1.SubjectRef{Kind: f.Object.Kind, Name: f.Object.Name, UID: f.Object.UID},
		})
	}
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		// No Finding CRD, or no controller namespace: no controller
		// counts there, nothing to share.
		return
	}
	if err != nil && !b.warned {
		b.warned = true
		fmt.Fprintf(b.stderr, "warning: actions not recorded in namespace %s for the controller's blast-radius limit: %v\n", b.namespace, err)
	}
}

// Tell says what this run's planned actions do to the controller's
// blast-radius window (issue: one budget, said out loud): fix records them
// where the controller counts them, so they fill its window, but they never
// trip its breaker. Read from the limit the controller publishes beside its
// breaker and from the records of the window. A dry run says what --apply
// would do.
func (b *controllerBreaker) Tell(ctx context.Context, planned int) string {
	if planned == 0 {
		return ""
	}
	c, err := clients.New(b.config)
	if err != nil {
		return ""
	}
	l, found, err := findingrecord.ReadLimits(ctx, c, b.namespace)
	switch {
	case err != nil:
		return fmt.Sprintf("warning: the controller's blast-radius limit in %s cannot be read (%v): what this run does to it cannot be told", b.namespace, err)
	case !found:
		var nsObj corev1.Namespace
		if err := c.Get(ctx, client.ObjectKey{Name: b.namespace}, &nsObj); apierrors.IsNotFound(err) {
			return "" // no controller namespace: nothing is recorded, nothing shared
		}
		return fmt.Sprintf("note: no tether controller publishes its blast-radius limit in namespace %s (--controller-namespace): this run's actions are recorded there all the same, where a controller would count them (never tripping its breaker)", b.namespace)
	}
	br, err := findingrecord.Breaker(ctx, c, b.namespace)
	if err != nil {
		return fmt.Sprintf("warning: the controller's blast-radius breaker in %s cannot be read: %v", b.namespace, err)
	}
	var list v1alpha1.FindingList
	scope := "in every namespace"
	if err := c.List(ctx, &list); err != nil {
		// Without a cluster-wide list, the controller's namespace (fix's
		// own records, and those of cluster-scoped subjects) is a lower
		// bound.
		scope = "in namespace " + b.namespace + " (the other namespaces could not be listed)"
		list.Items = nil
		if err := c.List(ctx, &list, client.InNamespace(b.namespace)); err != nil {
			return fmt.Sprintf("warning: the controller's window in %s cannot be read (%v): what this run does to it cannot be told", b.namespace, err)
		}
	}
	return budgetNote(b.namespace, l, br, list.Items, scope, planned, time.Now())
}

// budgetNote is Tell's sentence, from the controller's limit l, its
// breaker, the records recs (read scope) and the planned actions at now.
func budgetNote(ns string, l findingrecord.Limits, br findingrecord.BreakerState, recs []v1alpha1.Finding, scope string, planned int, now time.Time) string {
	if br.Tripped {
		return fmt.Sprintf("note: the controller's blast-radius breaker %s/%s is tripped: it acts on nothing until `tether controller reset-breaker -n %s`", ns, findingrecord.BreakerName, ns)
	}
	w := blastradius.Count(l, now, br.ResetAt, func(yield func(blastradius.Action) bool) {
		for i := range recs {
			rec := &recs[i]
			if findingrecord.InWindow(rec, now, l.Interval) && !yield(blastradius.Action{At: rec.Status.LastAttempt.Time, Supervised: findingrecord.Supervised(rec)}) {
				return
			}
		}
	})
	head := fmt.Sprintf("note: the controller in %s allows %d actions per %s; its window holds %d now (%d of them by tether fix), counted %s; this run's %d planned action(s) are recorded there",
		ns, l.Max, l.Interval, w.Total(), w.Supervised, scope, planned)
	after := w.Total() + planned
	if after >= l.Max {
		return head + fmt.Sprintf(" and fill it (%d of %d): the controller then waits, acting on nothing, until enough actions leave its window (at the latest about %s); they never trip its breaker",
			after, l.Max, now.Add(l.Interval).UTC().Format("15:04 MST"))
	}
	return head + fmt.Sprintf(", leaving it room for %d action(s) of its own; they never trip its breaker", l.Max-after)
}
