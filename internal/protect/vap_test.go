package protect_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tether-dev/tether/internal/protect"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// TestAdmissionPolicy: on the real API server, the policy refuses deleting
// a labelled PVC with the documented message, lets an unlabelled one go,
// and lets the garbage collector's identity delete a labelled one.
func TestAdmissionPolicy(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	installPolicy(t, w, protect.PolicyOptions{})

	w.create(fixture.PVC("guarded", fixture.Labels(protect.DeleteProtectionLabel, "true")))
	w.create(fixture.PVC("plain"))
	w.create(fixture.PVC("collected", fixture.Labels(protect.DeleteProtectionLabel, "true")))
	pvcs := w.env.Client.CoreV1().PersistentVolumeClaims(w.ns)

	// The policy takes effect once the API server has loaded it.
	var err error
	w.eventually("the policy refuses a labelled delete", func() (bool, error) {
		err = pvcs.Delete(ctx, "guarded", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil, nil
	})
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Errorf("refusal is %v, want Forbidden", err)
	}
	want := "tether: persistentvolumeclaims " + w.ns + "/guarded" + protect.DeletionRefusedMessage +
		": kubectl label -n " + w.ns + " persistentvolumeclaims guarded " + protect.DeleteProtectionLabel + "-"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("message %v\nwant it to contain %q", err, want)
	}
	if err := pvcs.Delete(ctx, "plain", metav1.DeleteOptions{}); err != nil {
		t.Errorf("an unlabelled PVC: %v", err)
	}

	gcCfg := rest.CopyConfig(w.env.Config)
	gcCfg.Impersonate = rest.ImpersonationConfig{UserName: protect.GarbageCollector, Groups: []string{"system:serviceaccounts", "system:authenticated"}}
	gc := kubernetes.NewForConfigOrDie(gcCfg)
	if err := gc.CoreV1().PersistentVolumeClaims(w.ns).Delete(ctx, "collected", metav1.DeleteOptions{}); err != nil {
		t.Errorf("the garbage collector's delete: %v", err)
	}

	// Releasing the protection as the message says lets the delete through.
	if _, err := w.env.Kubectl(t, "label", "-n", w.ns, "persistentvolumeclaims", "guarded", protect.DeleteProtectionLabel+"-"); err != nil {
		t.Fatal(err)
	}
	w.eventually("delete after releasing", func() (bool, error) {
		err := pvcs.Delete(ctx, "guarded", metav1.DeleteOptions{})
		return err == nil || apierrors.IsNotFound(err), err
	})
}

// installPolicy creates the admission policy and its binding until the test
// ends.
func installPolicy(t *testing.T, w *world, o protect.PolicyOptions) {
	t.Helper()
	p, b := protect.Policy(o)
	adm := w.env.Client.AdmissionregistrationV1()
	if _, err := adm.ValidatingAdmissionPolicies().Create(w.ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.ValidatingAdmissionPolicies().Delete(w.ctx, p.Name, metav1.DeleteOptions{}) })
	if _, err := adm.ValidatingAdmissionPolicyBindings().Create(w.ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.ValidatingAdmissionPolicyBindings().Delete(w.ctx, b.Name, metav1.DeleteOptions{}) })
}
