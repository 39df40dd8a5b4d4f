package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
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
