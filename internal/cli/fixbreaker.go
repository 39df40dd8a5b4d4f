package cli

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/findingrecord"
)

// `tether fix --apply` and the controller share one blast-radius limit
// where they share the controller's namespace: fix does not act while the
// controller's breaker is tripped, and records each action it takes there,
// where the controller counts it.

// breakerAllows refuses to act while the breaker in --controller-namespace
// is tripped, unless --ignore-breaker.
func (o *fixOptions) breakerAllows(ctx context.Context) error {
	if o.ignoreBreaker {
		return nil
	}
	c, err := clients.New(o.resolved.config)
	if err != nil {
		return err
	}
	ns := o.scope.controllerNamespace
	br, err := findingrecord.Breaker(ctx, c, ns)
	if err != nil {
		fmt.Fprintf(o.stderr, "warning: the controller's blast-radius breaker cannot be read (%v); acting without it\n", err)
		return nil
	}
	if br.Tripped {
		return fmt.Errorf("the controller's blast-radius breaker %s/%s tripped at %s (%s): nothing was changed; investigate, then run `tether controller reset-breaker -n %s`, or pass --ignore-breaker",
			ns, findingrecord.BreakerName, br.TrippedAt.UTC().Format(time.RFC3339), br.Message, ns)
	}
	return nil
}

// count records an action of fix in --controller-namespace; a failure is
// reported and does not stop the run (the action is done).
func (o *fixOptions) count(ctx context.Context, f drift.Finding, r drift.Result) {
	c, err := clients.New(o.resolved.config)
	if err == nil {
		err = findingrecord.RecordFixAction(ctx, client.WithFieldOwner(c, "tether-fix"), o.scope.controllerNamespace, findingrecord.FixAction{
			Check: f.Check, ID: f.ID, Volume: f.Volume, Message: r.Message, At: time.Now(),
			Subject: v1alpha1.SubjectRef{Kind: f.Object.Kind, Name: f.Object.Name, UID: f.Object.UID},
		})
	}
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		// No Finding CRD, or no controller namespace: no controller
		// counts there, nothing to share.
		return
	}
	if err != nil && !o.warnedCount {
		o.warnedCount = true
		fmt.Fprintf(o.stderr, "warning: actions not recorded in namespace %s for the controller's blast-radius limit: %v\n", o.scope.controllerNamespace, err)
	}
}
