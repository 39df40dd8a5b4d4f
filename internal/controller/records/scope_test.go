package records

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/kubevirt/check"
)

func TestScopeID_namesTheScopeNotItsSpelling(t *testing.T) {
	a := ScopeID(config.ScopeConfig{Namespaces: []string{"b", "a"}, Selector: "x=y"})
	if b := ScopeID(config.ScopeConfig{Namespaces: []string{"a", "b"}, Selector: "x=y"}); a != b {
		t.Fatal("the order of the namespaces changed the scope")
	}
	for _, other := range []config.ScopeConfig{
		{Namespaces: []string{"a"}, Selector: "x=y"},
		{Namespaces: []string{"a", "b"}},
		{Namespaces: []string{"a", "b"}, Selector: "x=y", VolumePrefix: "pvc-"},
	} {
		if ScopeID(other) == a {
			t.Fatalf("%+v has the same id as another scope", other)
		}
	}
}

// A record filed by a controller of another scope is never resolved by
// this one, though this one does not produce its finding; an unlabelled
// record (from before scopes were recorded) and one of its own scope are.
func TestResolveGone_leavesRecordsOfAnotherScope(t *testing.T) {
	cfg := graceConfig(0, check.OrphanHotplugVolume)
	cfg.Scope.Namespaces = []string{"ns"}
	mine, theirs := ScopeID(cfg.Scope), ScopeID(config.ScopeConfig{Namespaces: []string{"ns", "other"}})
	open := func(name, scope string) *v1alpha1.Finding {
		f := &v1alpha1.Finding{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{}},
			Spec:   v1alpha1.FindingSpec{ID: name, Check: check.OrphanHotplugVolume, Subject: v1alpha1.SubjectRef{Kind: "VirtualMachineInstance", Name: "vm"}},
			Status: v1alpha1.FindingStatus{Phase: v1alpha1.PhaseWaiting}}
		if scope != "" {
			f.Labels[v1alpha1.LabelScope] = scope
		}
		return f
	}
	recs := []*v1alpha1.Finding{open("mine", mine), open("theirs", theirs), open("unlabelled", "")}
	c := fakeClient(interceptor.Funcs{}, recs[0], recs[1], recs[2])
	rs := testRecords(t, c, cfg)
	byID := map[string]*v1alpha1.Finding{}
	for _, r := range recs {
		var stored v1alpha1.Finding
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(r), &stored); err != nil {
			t.Fatal(err)
		}
		byID[r.Name] = &stored
	}
	if err := rs.ResolveGone(context.Background(), nil, byID, t0); err != nil {
		t.Fatal(err)
	}
	want := map[string]v1alpha1.Phase{"mine": v1alpha1.PhaseResolved, "theirs": v1alpha1.PhaseWaiting, "unlabelled": v1alpha1.PhaseResolved}
	for name, phase := range want {
		var got v1alpha1.Finding
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, &got); err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != phase {
			t.Errorf("%s: phase %s, want %s", name, got.Status.Phase, phase)
		}
	}
}
