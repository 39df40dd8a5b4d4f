package realkv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
	"github.com/tether-dev/tether/internal/protect"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// The drain that pulls a disk, on real virt-api and virt-controller v1.9,
// through the eviction API `kubectl drain` calls (POST
// pods/NAME/eviction; a whole `kubectl drain` would cordon a node the
// other tests share). A standalone VMI has a hot-plug Ready through its
// attachment pod:
//   - with virt-api-validator as virt-operator writes it, real virt-api
//     refuses the attachment pod's eviction ("cannot evict hotplug pod"),
//     tether reports nothing and `doctor --node` says OK;
//   - without its webhook hotplug-pod-eviction-interceptor, nothing
//     refuses it (a dry-run eviction passes), tether reports
//     DrainEvictsHotplug (EvictionGuardNotRegistered) and `doctor --node`
//     FAILs naming the VMI;
//   - with tether's opt-in guard registered, the eviction is refused with
//     tether's message, the VMI's migration runs (the target's attachment
//     pod may be evicted while it is under way), and once the VMI runs on
//     the target the source node's attachment pod may go.
func TestReal_drain_evictsAttachmentPod_guardedByKubeVirtOrTether(t *testing.T) {
	env := testenv.Get(t)
	if env.Real == nil || len(env.Real.Nodes()) < 2 {
		t.Fatal("the migration needs real KubeVirt with two nodes")
	}
	w := newWorldIn(t, env)
	w.sharedClaims("pvc-1")
	w.standaloneVMI("mover")
	w.hotplug(virtapi.VMI, "mover", "pvc-1")
	vmi, err := w.vmi("mover")
	if err != nil {
		t.Fatal(err)
	}
	source, pod := vmi.Status.NodeName, w.VolumeStatus("mover", "pvc-1").HotplugVolume.AttachPodName
	scope := []string{"-n", w.NS, "--checks", "DrainEvictsHotplug"}

	// KubeVirt v1.9's own guard.
	if out, err := evict(t, w, pod, false); err == nil || !strings.Contains(out, "cannot evict hotplug pod: "+pod) {
		t.Fatalf("real virt-api let the attachment pod's eviction through: %v\n%s", err, out)
	}
	if fs := audit(t, env, scope); len(fs) != 0 {
		t.Fatalf("KubeVirt guards the pod, yet tether reports %+v", fs)
	}
	if _, lines := doctor(t, env, "-n", w.NS, "--node", source); !drainLine(t, lines, "OK", "KubeVirt refuses their eviction", "VMI "+w.NS+"/mover") {
		t.FailNow()
	}

	// Without the guard's webhook: nothing refuses the eviction.
	dropGuardWebhook(t, w)
	testenv.Eventually(t, 30*time.Second, "a dry-run eviction passes once the webhook is gone", func() (bool, error) {
		_, err := evict(t, w, pod, true)
		return err == nil, nil
	})
	f := only(t, audit(t, env, scope), "DrainEvictsHotplug", "pvc-1")
	if f.Severity != "warning" || f.Action.BlockedBy != "EvictionGuardNotRegistered" || !contains(f.Evidence, "attachment pod "+pod+" on node "+source) {
		t.Fatalf("finding %+v", f)
	}
	if _, lines := doctor(t, env, "-n", w.NS, "--node", source); !drainLine(t, lines, "FAIL", "VMI "+w.NS+"/mover hot-plug(s) pvc-1 through "+pod, "has no webhook") {
		t.FailNow()
	}

	// tether's opt-in guard.
	serveEvictionGuard(t, w)
	testenv.Eventually(t, 30*time.Second, "tether refuses the attachment pod's eviction", func() (bool, error) {
		out, err := evict(t, w, pod, false)
		return err != nil && strings.Contains(out, "tether: attachment pod "+w.NS+"/"+pod+" holds hot-plug(s) pvc-1 of VMI "+w.NS+"/mover, which still runs on node "+source), nil
	})
	env.Real.Handler.HoldMigration(w.NS, "mover", true)
	defer env.Real.Handler.HoldMigration(w.NS, "mover", false)
	mig := &kubevirtv1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Name: "mover-away", Namespace: w.NS}, Spec: kubevirtv1.VirtualMachineInstanceMigrationSpec{VMIName: "mover"}}
	if err := w.C.Create(context.Background(), mig); err != nil {
		t.Fatalf("creating the migration: %v", err)
	}
	var target *corev1.Pod
	testenv.Eventually(t, 90*time.Second, "the migration runs, with a target attachment pod", func() (bool, error) {
		vmi, err := w.vmi("mover")
		if err != nil || vmi.Status.MigrationState == nil || vmi.Status.MigrationState.TargetAttachmentPodUID == "" {
			return false, err
		}
		var pods corev1.PodList
		if err := w.C.List(context.Background(), &pods, client.InNamespace(w.NS), client.MatchingLabels{snapshot.AttachmentPodLabel: snapshot.AttachmentPodLabelValue}); err != nil {
			return false, err
		}
		for i := range pods.Items {
			if pods.Items[i].UID == vmi.Status.MigrationState.TargetAttachmentPodUID {
				target = &pods.Items[i]
			}
		}
		return target != nil && target.Spec.NodeName != "" && target.Spec.NodeName != source, nil
	})
	if out, err := evict(t, w, target.Name, true); err != nil {
		t.Fatalf("the migration target's attachment pod %s (node %s) may be evicted, yet: %v\n%s", target.Name, target.Spec.NodeName, err, out)
	}
	if out, err := evict(t, w, pod, true); err == nil || !strings.Contains(out, "tether: attachment pod") {
		t.Fatalf("while the VMI still runs on %s, its attachment pod there was let go: %s", source, out)
	}
	env.Real.Handler.HoldMigration(w.NS, "mover", false)
	testenv.Eventually(t, 90*time.Second, "the migration succeeds and the VMI runs on "+target.Spec.NodeName, func() (bool, error) {
		vmi, err := w.vmi("mover")
		return err == nil && w.migrationPhase("mover-away") == kubevirtv1.MigrationSucceeded && vmi.Status.NodeName == target.Spec.NodeName, err
	})
	if out, err := evict(t, w, pod, true); err != nil && !strings.Contains(out, "NotFound") && !strings.Contains(out, "not found") {
		t.Fatalf("the VMI runs on %s, yet the old node's attachment pod %s may not go: %v\n%s", target.Spec.NodeName, pod, err, out)
	}
}

// evict posts an Eviction of pod, as `kubectl drain` does (a dry run
// when dryRun), and returns kubectl's output.
func evict(t *testing.T, w *world, pod string, dryRun bool) (string, error) {
	t.Helper()
	ev := map[string]any{"apiVersion": "policy/v1", "kind": "Eviction", "metadata": map[string]any{"name": pod, "namespace": w.NS}}
	if dryRun {
		ev["deleteOptions"] = map[string]any{"dryRun": []string{"All"}}
	}
	data, _ := json.Marshal(ev)
	file := filepath.Join(t.TempDir(), "eviction.json")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return w.Env.Kubectl(t, "create", "--raw", fmt.Sprintf("/api/v1/namespaces/%s/pods/%s/eviction", w.NS, pod), "-f", file)
}

// drainLine checks doctor's drain.hotplug line.
func drainLine(t *testing.T, lines []doctorLine, status string, says ...string) bool {
	t.Helper()
	l, ok := lineOf(lines, "drain.hotplug", "")
	if !ok || l.Status != status {
		t.Errorf("drain.hotplug: want %s, got %+v", status, l)
		return false
	}
	for _, s := range says {
		if !strings.Contains(l.Why, s) {
			t.Errorf("drain.hotplug does not say %q: %s", s, l.Why)
			return false
		}
	}
	return true
}

// dropGuardWebhook takes KubeVirt's hot-plug eviction webhook out of
// virt-api-validator (as a hand-edited or partly reconciled install
// would), and puts it back when the test ends.
func dropGuardWebhook(t *testing.T, w *world) {
	t.Helper()
	vwcs := w.Env.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	vwc, err := vwcs.Get(context.Background(), snapshot.VirtAPIValidatorName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var kept []admissionregistrationv1.ValidatingWebhook
	for _, h := range vwc.Webhooks {
		if h.Name != snapshot.HotplugEvictionWebhook {
			kept = append(kept, h)
		}
	}
	if len(kept) == len(vwc.Webhooks) {
		t.Fatalf("%s has no webhook %s", snapshot.VirtAPIValidatorName, snapshot.HotplugEvictionWebhook)
	}
	whole := vwc.Webhooks
	vwc.Webhooks = kept
	if _, err := vwcs.Update(context.Background(), vwc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cur, err := vwcs.Get(context.Background(), snapshot.VirtAPIValidatorName, metav1.GetOptions{})
		if err == nil {
			cur.Webhooks = whole
			_, err = vwcs.Update(context.Background(), cur, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Errorf("putting %s back: %v", snapshot.HotplugEvictionWebhook, err)
		}
	})
}

// serveEvictionGuard serves tether's guard of attachment pods, as the
// controller does, and registers it (protect.EvictionWebhook, as the
// chart renders it) for the world's namespace only.
func serveEvictionGuard(t *testing.T, w *world) {
	t.Helper()
	wh := testenv.NewWebhook(t)
	srv := webhook.NewServer(webhook.Options{Host: wh.Host, Port: wh.Port, CertDir: wh.CertDir})
	srv.Register(protect.EvictionPath, &webhook.Admission{Handler: &protect.EvictionAdmission{Live: w.C}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	url := "https://" + wh.Addr() + protect.EvictionPath
	hook := protect.EvictionWebhook(admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: wh.CA}, admissionregistrationv1.Ignore)
	hook.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": w.NS}}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: w.NS + "." + protect.EvictionWebhookName},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{hook}}
	vwcs := w.Env.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := vwcs.Create(context.Background(), cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vwcs.Delete(context.Background(), cfg.Name, metav1.DeleteOptions{}) })
}
