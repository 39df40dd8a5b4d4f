package protect_test

import (
	"context"
	"testing"

	"github.com/go-logr/logr/testr"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/protect"
	"github.com/tether-dev/tether/internal/protect/inuse"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// sweeper builds a Sweeper acting as cfg's user, for protection off.
func sweeper(t *testing.T, cfg *rest.Config, o protect.SweepOptions) *protect.Sweeper {
	t.Helper()
	c, err := clients.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	o.Log = testr.New(t)
	return protect.NewSweeper(c, c, c.RESTMapper(), o)
}

// strandedIn returns the stranded objects of namespace ns.
func strandedIn(got []protect.Stranded, ns string) map[string]protect.Stranded {
	out := map[string]protect.Stranded{}
	for _, st := range got {
		if st.Ref.Namespace == ns {
			out[st.Ref.Name] = st
		}
	}
	return out
}

// markedPVC creates an unused PVC that carries the finalizer.
func (w *world) markedPVC(name string) {
	w.t.Helper()
	p := fixture.PVC(name)
	p.Finalizers = []string{inuse.Finalizer}
	w.create(p)
}

// TestSweep_userAppearsBeforeLiveCheck: the LIST finds an unused stranded
// PVC; a VM that uses it is created before the live check. The finalizer
// stays, reported as in use by that VM.
func TestSweep_userAppearsBeforeLiveCheck(t *testing.T) {
	w := newWorld(t)
	w.markedPVC("claim")
	s := sweeper(t, w.env.Config, protect.SweepOptions{BeforeLiveCheck: func(_ context.Context, ref inuse.Ref) {
		if ref.Namespace == w.ns && ref.Name == "claim" {
			w.create(usingVM("late", "claim"))
		}
	}})
	got := strandedIn(s.Sweep(w.ctx), w.ns)
	if st, ok := got["claim"]; !ok || st.Reason != protect.StrandedInUse || len(st.Users) != 1 || st.Users[0] != "late" {
		t.Fatalf("stranded %+v, want claim in use by late", got)
	}
	if p, err := w.pvc("claim"); err != nil || !inuse.HasFinalizer(p) {
		t.Fatalf("the finalizer went although VM late uses the claim: %v", err)
	}
}

// TestSweep_noPatchRight: a controller that may list but not patch PVCs
// changes nothing and reports the unused stranded PVC as NoPatchRight; with
// the right, the same sweep releases it.
func TestSweep_noPatchRight(t *testing.T) {
	w := newWorld(t)
	w.markedPVC("claim")
	user := "strand-reader-" + w.ns
	w.grant(user, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachines"}, Verbs: []string{"list"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
	})
	cfg := rest.CopyConfig(w.env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	got := strandedIn(sweeper(t, cfg, protect.SweepOptions{}).Sweep(w.ctx), w.ns)
	if st, ok := got["claim"]; !ok || st.Reason != protect.StrandedNoPatchRight {
		t.Fatalf("stranded %+v, want claim with reason %s", got, protect.StrandedNoPatchRight)
	}
	if p, err := w.pvc("claim"); err != nil || !inuse.HasFinalizer(p) {
		t.Fatalf("changed without the right: %v", err)
	}
	got = strandedIn(sweeper(t, w.env.Config, protect.SweepOptions{}).Sweep(w.ctx), w.ns)
	if len(got) != 0 {
		t.Fatalf("still stranded with the right: %+v", got)
	}
	if p, err := w.pvc("claim"); err != nil || inuse.HasFinalizer(p) {
		t.Fatalf("not released with the right: %v %v", err, p.Finalizers)
	}
}

// grant binds a ClusterRole with rules to user until the test ends.
func (w *world) grant(user string, rules []rbacv1.PolicyRule) {
	w.t.Helper()
	rb := w.env.Client.RbacV1()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}
	bind := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := rb.ClusterRoles().Create(w.ctx, role, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { _ = rb.ClusterRoles().Delete(context.Background(), user, metav1.DeleteOptions{}) })
	if _, err := rb.ClusterRoleBindings().Create(w.ctx, bind, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { _ = rb.ClusterRoleBindings().Delete(context.Background(), user, metav1.DeleteOptions{}) })
}

// TestSweep_everyKind: with protection off, unused DataVolumes and
// ControllerRevisions that carry the finalizer are released like PVCs;
// the sweep reads page by page (a page of one object here).
func TestSweep_everyKind(t *testing.T) {
	w := newWorld(t)
	w.markedPVC("claim")
	dv := fixture.DataVolume("data")
	dv.Finalizers = []string{inuse.Finalizer}
	w.create(dv)
	cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "vm-u1.small-1", Finalizers: []string{inuse.Finalizer}},
		Data: runtime.RawExtension{Raw: []byte("{}")}}
	w.create(cr)
	got := strandedIn(sweeper(t, w.env.Config, protect.SweepOptions{PageSize: 1}).Sweep(w.ctx), w.ns)
	if len(got) != 0 {
		t.Fatalf("still stranded: %+v", got)
	}
	for _, o := range []client.Object{fixture.PVC("claim"), fixture.DataVolume("data"), &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: cr.Name}}} {
		if err := w.c.Get(w.ctx, client.ObjectKey{Namespace: w.ns, Name: o.GetName()}, o); err != nil {
			t.Fatal(err)
		}
		if inuse.HasFinalizer(o) {
			t.Errorf("%T %s keeps the finalizer: %v", o, o.GetName(), o.GetFinalizers())
		}
	}
}
