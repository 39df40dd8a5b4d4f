package controller_test

import (
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller"
	"github.com/tether-dev/tether/internal/protect"
	"github.com/tether-dev/tether/internal/testing/fixture"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// The controller as deployed (its service account and RBAC from
// config/rbac) with --webhook-bind-address: the API server's reviews reach
// it, and a VM that starts referencing a claim being deleted in the scope's
// namespace is refused with the claim named.
func TestController_webhook_refusesReferenceToClaimBeingDeleted(t *testing.T) {
	w := newWorld(t)
	cfg := config.Default()
	cfg.Scope.Namespaces = []string{w.ns}
	cfg.Protection.Enabled = true
	wh := testenv.NewWebhook(t)
	w.start(&cfg, func(o *controller.Options) { o.WebhookAddr, o.WebhookCertDir = wh.Addr(), wh.CertDir })
	wh.Register(t, w.env, w.ns)

	claim := fixture.PVC("going", fixture.InNamespace(w.ns))
	claim.Finalizers = []string{"example.com/hold"}
	w.create(claim)
	t.Cleanup(func() {
		claim.Finalizers = nil
		_ = w.c.Update(w.ctx, claim)
	})
	if err := w.c.Delete(w.ctx, claim); err != nil {
		t.Fatal(err)
	}
	if err := w.c.Get(w.ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
		t.Fatal(err)
	}
	var last error
	testenv.Eventually(t, 30*time.Second, "the webhook's refusal", func() (bool, error) {
		vm := fixture.VM("vm", fixture.InNamespace(w.ns), fixture.WithVolume("disk", fixture.PVC("going")))
		vm.UID = ""
		last = w.c.Create(w.ctx, vm, client.DryRunAll)
		return apierrors.IsForbidden(last) && strings.Contains(last.Error(), protect.RefusalAdvice), last
	})
	if !strings.Contains(last.Error(), "PersistentVolumeClaim "+w.ns+"/going") {
		t.Errorf("the refusal does not name the claim: %v", last)
	}
}
