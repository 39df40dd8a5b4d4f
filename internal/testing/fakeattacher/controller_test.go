package fakeattacher_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/testing/testenv"
)

// storageConfig enables the three storage checks in the test namespace,
// with no grace period anywhere.
func (w *world) storageConfig() *config.Config {
	c := config.Default()
	zero := config.CheckConfig{Enabled: true}
	c.Checks = map[string]config.CheckConfig{check.StaleVolumeAttachment: zero, check.MultiAttachConflict: zero, check.BlockedDeletion: zero}
	c.Scope.Namespaces = []string{w.ns}
	c.Storage.StaleAttachmentGrace.Duration = time.Nanosecond
	c.Storage.MultiAttachGrace.Duration = time.Nanosecond
	c.Storage.BlockedDeletionGrace.Duration = time.Nanosecond
	c.Backoff.Base.Duration, c.Backoff.Max.Duration = 200*time.Millisecond, 2*time.Second
	c.ActionTimeout.Duration = 20 * time.Second
	return &c
}

// controller runs `tether controller` as the ServiceAccount of config/rbac
// (plus the opt-in storage-remediation role) until the returned stop.
func (w *world) controller(cfg *config.Config) (stop func()) {
	w.t.Helper()
	w.env.InstallController(w.t, "rbac/storage-remediation")
	return w.controllerAs(cfg, w.env.AsController())
}

// controllerAs runs `tether controller` with the client configuration rc.
// The test's namespace is the controller's own (where it files the records
// of VolumeAttachments), so that tests do not share records.
func (w *world) controllerAs(cfg *config.Config, rc *rest.Config) (stop func()) {
	w.t.Helper()
	return testenv.RunController(w.t, controller.Options{RestConfig: rc, Config: cfg, Namespace: w.ns, Log: testr.New(w.t), SkipNameValidation: true})
}

// record returns the Finding record of check about the named subject, or nil.
func (w *world) record(checkName, subject string) *v1alpha1.Finding {
	var list v1alpha1.FindingList
	w.must(w.c.List(w.ctx, &list, client.InNamespace(w.ns), client.MatchingLabels{v1alpha1.LabelCheck: checkName}))
	for i := range list.Items {
		if list.Items[i].Spec.Subject.Name == subject {
			return &list.Items[i]
		}
	}
	return nil
}

func (w *world) waitRecord(checkName, subject, what string, cond func(*v1alpha1.Finding) bool) *v1alpha1.Finding {
	w.t.Helper()
	var got *v1alpha1.Finding
	testenv.Eventually(w.t, 60*time.Second, fmt.Sprintf("%s record of %s %s", checkName, subject, what), func() (bool, error) {
		got = w.record(checkName, subject)
		return got != nil && cond(got), nil
	})
	return got
}

func phase(p v1alpha1.Phase, reason string) func(*v1alpha1.Finding) bool {
	return func(f *v1alpha1.Finding) bool {
		return f.Status.Phase == p && (reason == "" || f.Status.Reason == reason)
	}
}

// resolvedOrGone waits until the record is Resolved or was deleted with its
// subject (owner reference, garbage collector).
func (w *world) resolvedOrGone(checkName, subject string) {
	w.t.Helper()
	testenv.Eventually(w.t, 90*time.Second, checkName+" record of "+subject+" resolved or gone", func() (bool, error) {
		rec := w.record(checkName, subject)
		return rec == nil || rec.Status.Phase == v1alpha1.PhaseResolved, nil
	})
}

func (w *world) eventsWith(reason string) []corev1.Event {
	var evs corev1.EventList
	w.must(w.c.List(w.ctx, &evs, client.InNamespace(w.ns)))
	var out []corev1.Event
	for _, e := range evs.Items {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// The controller front end of the partitioned-node story: while the old node
// is NotReady without the taint, the stale attachment is recorded as Blocked
// (NodeNotFenced) and the waiting pod as a MultiAttachConflict with a
// Warning Event in its namespace that names the holder; nothing is done.
// Once the node carries the out-of-service taint, the controller deletes the
// pod stuck on it, the real attach/detach controller detaches, the new
// attachment proceeds, and both records close.
func TestController_partitionedNode_blockedThenRemediatedWhenFenced(t *testing.T) {
	w := newWorld(t)
	oldNode, newNode := w.ns+"-a", w.ns+"-b"
	w.node(newNode)
	pv, va := w.attachedPod("old", oldNode)
	w.partition(oldNode, pv, "old")
	time.Sleep(2 * time.Second)
	w.pod("new", newNode, corev1.PodPending)

	w.controller(w.storageConfig())
	stale := w.waitRecord(check.StaleVolumeAttachment, va.Name, "Blocked by NodeNotFenced", phase(v1alpha1.PhaseBlocked, string(check.NodeNotFenced)))
	if stale.Spec.Node != oldNode || stale.Spec.Volume != pv || stale.Status.Action.Type != string(check.DeletePodsOnFencedNode) ||
		!strings.Contains(strings.Join(stale.Status.Evidence, "\n"), "stuck terminating") {
		t.Fatalf("stale record: spec %+v, status %+v", stale.Spec, stale.Status)
	}
	if own := stale.OwnerReferences; len(own) != 1 || own[0].Kind != "VolumeAttachment" || own[0].UID != va.UID {
		t.Fatalf("the record must be owned by its VolumeAttachment, got %+v", own)
	}
	multi := w.waitRecord(check.MultiAttachConflict, "new", "Blocked by VolumeHeldElsewhere", phase(v1alpha1.PhaseBlocked, string(check.VolumeHeldElsewhere)))
	if multi.Spec.Node != newNode {
		t.Errorf("multi-attach record node = %q, want %q", multi.Spec.Node, newNode)
	}
	var ev []corev1.Event
	testenv.Eventually(t, 30*time.Second, "a "+controller.EventMultiAttach+" Event", func() (bool, error) {
		ev = w.eventsWith(controller.EventMultiAttach)
		return len(ev) > 0, nil
	})
	if e := ev[0]; e.Type != corev1.EventTypeWarning || e.InvolvedObject.Name != "new" || !strings.Contains(e.Message, "used there by pod(s) old") ||
		!strings.Contains(e.Message, "remedy:") {
		t.Errorf("event: %s %s %q", e.Type, e.InvolvedObject.Name, e.Message)
	}
	// Not fenced: nothing is done, however long we look.
	time.Sleep(3 * time.Second)
	w.attachment(pv, oldNode, true)
	if err := w.c.Get(w.ctx, client.ObjectKey{Namespace: w.ns, Name: "old"}, &corev1.Pod{}); err != nil {
		t.Fatalf("the pod on the unfenced node was touched: %v", err)
	}

	w.taintOutOfService(oldNode)
	testenv.Eventually(t, 60*time.Second, "the pod on the fenced node to go", func() (bool, error) {
		err := w.c.Get(w.ctx, client.ObjectKey{Namespace: w.ns, Name: "old"}, &corev1.Pod{})
		return apierrors.IsNotFound(err), nil
	})
	w.attachment(pv, newNode, true)
	w.resolvedOrGone(check.StaleVolumeAttachment, va.Name)
	w.resolvedOrGone(check.MultiAttachConflict, "new")
	if evs := w.eventsWith(act.ReasonActionRefused); len(evs) != 0 {
		t.Errorf("unexpected refusals: %v", evs)
	}
}

// A node object deleted under an attached volume: the controller records
// since when it has been gone (status.nodeGoneSince, with lastObserved kept
// fresh), a successor credits the time that was watched, and with the
// opt-in rule the node is fenced once it has been gone long enough: the pod
// still bound to it is deleted.
func TestController_nodeGone_durableRecordThenFenced(t *testing.T) {
	w := newWorld(t)
	node := w.ns + "-c"
	_, va := w.attachedPod("app", node)
	w.must(w.c.Delete(w.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}))

	after := check.MinFenceGoneNodesAfter
	cfg := w.storageConfig()
	cfg.Storage.FenceGoneNodesAfter.Duration = after
	cfg.DryRun = true
	stop := w.controller(cfg)
	first := w.waitRecord(check.StaleVolumeAttachment, va.Name, "with nodeGoneSince", func(f *v1alpha1.Finding) bool {
		return f.Status.NodeGoneSince != nil && f.Status.Phase == v1alpha1.PhaseBlocked
	})
	if first.Status.Reason != string(check.NodeNotFenced) || !strings.Contains(strings.Join(first.Status.Evidence, "\n"), "node "+node+" does not exist (missing since") {
		t.Fatalf("before the period: want NodeNotFenced with the missing-since evidence, got %s: %v", first.Status.Reason, first.Status.Evidence)
	}
	// Watch for half the period: lastObserved follows.
	w.waitRecord(check.StaleVolumeAttachment, va.Name, "watched for half the period", func(f *v1alpha1.Finding) bool {
		return f.Status.LastObserved != nil && f.Status.NodeGoneSince != nil && f.Status.LastObserved.Sub(f.Status.NodeGoneSince.Time) >= after/2
	})
	stop()
	final := w.record(check.StaleVolumeAttachment, va.Name)
	credit := final.Status.LastObserved.Sub(final.Status.NodeGoneSince.Time)

	// A one-shot audit credits the same watched time.
	snap, err := observe.Observe(w.ctx, w.c, observe.Options{GoneNodeRecordsIn: w.ns})
	w.must(err)
	if got, ok := snap.NodesGoneSince[node]; !ok || time.Since(got) < credit {
		t.Fatalf("audit read the node as gone since %v (found %v), want at least %s ago", got, ok, credit)
	}

	// A new controller (a restart, or another leader) credits the watched
	// time instead of starting from zero.
	restarted := time.Now()
	cfg.DryRun = false
	w.controller(cfg)
	testenv.Eventually(t, 2*after, "the pod bound to the gone node to go", func() (bool, error) {
		err := w.c.Get(w.ctx, client.ObjectKey{Namespace: w.ns, Name: "app"}, &corev1.Pod{})
		return apierrors.IsNotFound(err), nil
	})
	acted := time.Now()
	if acted.Sub(restarted) >= after {
		t.Fatalf("acted %s after the restart: the clock started again instead of crediting the %s watched before", acted.Sub(restarted), credit)
	}
	if acted.Sub(restarted)+credit < after {
		t.Fatalf("acted %s after the restart with %s credited: before the node had been gone for %s", acted.Sub(restarted), credit, after)
	}
	t.Logf("acted %s after the restart, with %s of watch credited from the durable record", acted.Sub(restarted).Round(time.Millisecond), credit)
	w.resolvedOrGone(check.StaleVolumeAttachment, va.Name)
}

// A claim deleted while a finished pod still references it: the controller
// records a BlockedDeletion that names the pod, and closes it once the pod
// is deleted and the PVC protection controller lets the claim go.
func TestController_blockedDeletion_namesFinishedPod(t *testing.T) {
	w := newWorld(t)
	w.volume(w.ns + "-pv")
	w.pod("job", w.ns+"-nowhere", corev1.PodSucceeded)
	pvc := &corev1.PersistentVolumeClaim{}
	w.must(w.c.Get(w.ctx, client.ObjectKey{Namespace: w.ns, Name: "data"}, pvc))
	w.must(w.c.Delete(w.ctx, pvc))
	w.controller(w.storageConfig())
	rec := w.waitRecord(check.BlockedDeletion, "data", "Blocked by HeldByUsers", phase(v1alpha1.PhaseBlocked, string(check.HeldByUsers)))
	if ev := strings.Join(rec.Status.Evidence, "\n"); !strings.Contains(ev, "pod job (phase Succeeded, finished)") ||
		!strings.Contains(rec.Status.Action.Remedy, "kubectl delete pod job -n "+w.ns) {
		t.Fatalf("want the finished pod named with its remedy, got %v / %s", rec.Status.Evidence, rec.Status.Action.Remedy)
	}
	// Someone removes the record's labels: the controller no longer finds
	// it by them, and puts them back rather than failing on every pass.
	edited := rec.DeepCopy()
	edited.Labels = nil
	w.must(w.c.Update(w.ctx, edited))
	testenv.Eventually(t, 90*time.Second, "the record's labels restored", func() (bool, error) {
		var got v1alpha1.Finding
		err := w.c.Get(w.ctx, client.ObjectKeyFromObject(rec), &got)
		return err == nil && got.Labels[v1alpha1.LabelCheck] == check.BlockedDeletion, err
	})
	var all v1alpha1.FindingList
	w.must(w.c.List(w.ctx, &all, client.InNamespace(w.ns), client.MatchingLabels{v1alpha1.LabelCheck: check.BlockedDeletion}))
	if len(all.Items) != 1 {
		t.Fatalf("want the one record, got %d", len(all.Items))
	}
	w.must(w.c.Delete(w.ctx, w.podRef("job"), client.GracePeriodSeconds(0)))
	w.resolvedOrGone(check.BlockedDeletion, "data")
}

// Without the opt-in storage-remediation role, a fenced finding's action is
// refused by RBAC: the record says Forbidden and how to grant it, nothing
// changes, and the refused attempts give their blast-radius token back (with
// a limit of one action, repeated attempts never trip it).
func TestController_withoutRemediationRole_forbiddenNotCounted(t *testing.T) {
	w := newWorld(t)
	w.env.InstallController(t)
	// A user bound to the base role only.
	user := "tether-base-only-" + w.ns
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "tether-controller"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	w.must(w.c.Create(w.ctx, binding))
	t.Cleanup(func() { _ = w.c.Delete(context.Background(), binding) })
	rc := rest.CopyConfig(w.env.Config)
	rc.Impersonate = rest.ImpersonationConfig{UserName: user}

	node := w.ns + "-d"
	pv, va := w.attachedPod("stuck", node)
	w.partition(node, pv, "stuck")
	w.taintOutOfService(node)

	cfg := w.storageConfig()
	cfg.BlastRadius.MaxActions = 1
	w.controllerAs(cfg, rc)
	rec := w.waitRecord(check.StaleVolumeAttachment, va.Name, "refused by RBAC three times", func(f *v1alpha1.Finding) bool {
		return f.Status.Reason == controller.ReasonForbidden && f.Status.Attempts >= 3
	})
	if !strings.Contains(rec.Status.Message, "config/rbac/storage-remediation") || rec.Status.Phase != v1alpha1.PhaseFailed {
		t.Fatalf("record %s/%s: %s", rec.Status.Phase, rec.Status.Reason, rec.Status.Message)
	}
	if err := w.c.Get(w.ctx, client.ObjectKey{Namespace: w.ns, Name: "stuck"}, &corev1.Pod{}); err != nil {
		t.Fatalf("the pod must still be there: %v", err)
	}
	// (Had a refused attempt kept its token, the second decision would have
	// been BlastRadiusExceeded and the attempts would have stopped at one.)
	var evs corev1.EventList
	w.must(w.c.List(w.ctx, &evs, client.InNamespace(metav1.NamespaceDefault)))
	for _, e := range evs.Items {
		if e.Reason == controller.EventBlastRadius && e.InvolvedObject.Name == va.Name {
			t.Fatalf("refused attempts tripped the blast-radius limit: %s", e.Message)
		}
	}
}

// Review F6 on the real control plane: a node-gone record whose status was
// edited by hand (another field manager) to claim a future lastObserved is
// no evidence for `tether audit --fence-gone-nodes-after`; it is reported.
func TestAudit_handEditedNodeGoneRecord_ignoredAndReported(t *testing.T) {
	w := newWorld(t)
	node := w.ns + "-e"
	_, va := w.attachedPod("app", node)
	w.must(w.c.Delete(w.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}))
	cfg := w.storageConfig()
	cfg.Storage.FenceGoneNodesAfter.Duration = check.MinFenceGoneNodesAfter
	cfg.DryRun = true
	stop := w.controller(cfg)
	w.waitRecord(check.StaleVolumeAttachment, va.Name, "with nodeGoneSince", func(f *v1alpha1.Finding) bool { return f.Status.NodeGoneSince != nil })
	stop()

	snap, err := observe.Observe(w.ctx, w.c, observe.Options{GoneNodeRecordsIn: w.ns})
	w.must(err)
	if _, ok := snap.NodesGoneSince[node]; !ok {
		t.Fatalf("the controller's own record is not used: warnings %q", snap.Warnings)
	}

	rec := w.record(check.StaleVolumeAttachment, va.Name)
	future := metav1.NewTime(time.Now().Add(time.Hour))
	rec.Status.LastObserved = &future
	w.must(w.c.Status().Update(w.ctx, rec, client.FieldOwner("kubectl-edit")))
	snap, err = observe.Observe(w.ctx, w.c, observe.Options{GoneNodeRecordsIn: w.ns})
	w.must(err)
	if since, ok := snap.NodesGoneSince[node]; ok {
		t.Fatalf("a hand-edited record made node %s count as gone since %s", node, since)
	}
	if ws := strings.Join(snap.Warnings, "\n"); !strings.Contains(ws, rec.Name) || !strings.Contains(ws, "kubectl-edit") {
		t.Fatalf("want a warning naming the record and the other field manager, got %q", snap.Warnings)
	}
	// Read from another namespace than the controller's, it is no evidence either.
	snap, err = observe.Observe(w.ctx, w.c, observe.Options{GoneNodeRecordsIn: "tether-system"})
	w.must(err)
	if _, ok := snap.NodesGoneSince[node]; ok {
		t.Fatal("a record outside the controller's namespace was used")
	}
}
