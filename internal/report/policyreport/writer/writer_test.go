package writer

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/findingrecord"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/report/policyreport"
	"github.com/tether-dev/tether/internal/report/reportapi"
)

func reportRecord(ns, name, chk, kind string, phase v1alpha1.Phase, sev drift.Severity) v1alpha1.Finding {
	first := metav1.NewTime(time.Unix(1_790_000_000, 0))
	return v1alpha1.Finding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{v1alpha1.LabelScope: "s1"}},
		Spec:       v1alpha1.FindingSpec{ID: name, Check: chk, Subject: v1alpha1.SubjectRef{Kind: kind, Name: "subj-" + name, UID: types.UID("uid-" + name)}, Volume: "data"},
		Status: v1alpha1.FindingStatus{Phase: phase, Severity: string(sev), Message: "why " + name, FirstObserved: &first,
			LastObserved: &first, Evidence: []string{"fact"}, Action: v1alpha1.ProposedAction{Type: string(check.VMRemoveVolume), Safe: true}},
	}
}

// TestWantedReports: open findings of this scope become results, in their
// namespace's report or the cluster report; resolved ones, records not yet
// judged, the breaker, `tether fix`'s records and other scopes' do not; a
// namespaced scope writes no cluster report.
func TestWantedReports(t *testing.T) {
	recs := []v1alpha1.Finding{
		reportRecord("a", "r1", check.OrphanHotplugVolume, "VirtualMachineInstance", v1alpha1.PhaseWaiting, drift.SeverityWarning),
		reportRecord("a", "r2", check.OrphanHotplugVolume, "VirtualMachineInstance", v1alpha1.PhaseResolved, drift.SeverityWarning),
		reportRecord("b", "r3", check.MultiAttachConflict, "Pod", v1alpha1.PhaseObserved, drift.SeverityInfo),
		reportRecord("tether-system", "r4", check.StaleVolumeAttachment, "VolumeAttachment", v1alpha1.PhaseBlocked, drift.SeverityWarning),
		reportRecord("c", "r5", check.OrphanHotplugVolume, "VirtualMachineInstance", "", drift.SeverityWarning),
		reportRecord("tether-system", findingrecord.BreakerName, findingrecord.BreakerCheck, "Namespace", v1alpha1.PhaseBlocked, drift.SeverityCritical),
		reportRecord("tether-system", "fix", findingrecord.FixCheck, "VirtualMachine", v1alpha1.PhaseResolved, drift.SeverityWarning),
		reportRecord("d", "r6", check.OrphanHotplugVolume, "VirtualMachineInstance", v1alpha1.PhaseWaiting, drift.SeverityWarning),
	}
	recs[7].Labels[v1alpha1.LabelScope] = "other"
	got := wantedReports(recs, Options{API: reportapi.WGPolicy, Scope: "s1"})
	var keys []reportKey
	for _, r := range got {
		keys = append(keys, keyOf(r))
	}
	want := []reportKey{{"a", "tether"}, {"b", "tether"}, {"", "tether"}}
	if !slices.Equal(keys, want) {
		t.Fatalf("reports %v, want %v", keys, want)
	}
	a := got[0]
	if len(a.Results) != 1 || a.Results[0].Properties["findingID"] != "r1" || a.Results[0].Result != policyreport.Fail {
		t.Fatalf("report a: %+v", a.Results)
	}
	if p := a.Results[0].Properties; p["phase"] != "Waiting" || p["record"] != "a/r1" || p["evidence.1"] != "fact" {
		t.Errorf("properties %v: want the phase, the record and the evidence", p)
	}
	if ts := a.Results[0].Timestamp; ts.Seconds != 1_790_000_000 {
		t.Errorf("timestamp %v, want firstObserved", ts)
	}
	cl := got[2]
	if cl.Kind != "ClusterPolicyReport" || len(cl.Results) != 1 || cl.Results[0].Resources[0].Namespace != "" || cl.Results[0].Properties["namespace"] != "" {
		t.Errorf("cluster report %+v: want the VolumeAttachment's result without the records' namespace", cl)
	}

	// Nothing open: only the cluster report, empty.
	if got := wantedReports(recs[1:2], Options{API: reportapi.OpenReports, Scope: "s1"}); len(got) != 1 || got[0].Kind != "ClusterReport" || len(got[0].Results) != 0 {
		t.Errorf("no open finding: %+v, want one empty ClusterReport", got)
	}
	// A namespaced scope: no cluster report.
	for _, r := range wantedReports(recs, Options{API: reportapi.WGPolicy, Namespaces: []string{"a", "b"}, Scope: "s1"}) {
		if r.Metadata.Namespace == "" {
			t.Errorf("namespaced scope wrote cluster report %+v", r)
		}
	}
}

// TestPlanReports: a pass writes only what changed since the last write,
// deletes tether's reports nobody wants, and rewrites what a resync found
// (digest unknown).
func TestPlanReports(t *testing.T) {
	recs := []v1alpha1.Finding{
		reportRecord("a", "r1", check.OrphanHotplugVolume, "VirtualMachineInstance", v1alpha1.PhaseWaiting, drift.SeverityWarning),
		reportRecord("b", "r2", check.OrphanHotplugVolume, "VirtualMachineInstance", v1alpha1.PhaseWaiting, drift.SeverityWarning),
	}
	o := Options{API: reportapi.WGPolicy, Scope: "s1"}
	st := reportState{}
	write := func(p reportPlan) {
		for _, r := range p.apply {
			st[keyOf(r)] = digest(r)
		}
		for _, k := range p.delete {
			delete(st, k)
		}
	}
	p := planReports(wantedReports(recs, o), st)
	if len(p.apply) != 3 || len(p.delete) != 0 {
		t.Fatalf("first pass: %d applies, %d deletes; want 3, 0", len(p.apply), len(p.delete))
	}
	write(p)

	// Unchanged findings, and a refreshed lastObserved: nothing to write.
	later := metav1.NewTime(time.Unix(1_790_000_600, 0))
	recs[0].Status.LastObserved = &later
	if p := planReports(wantedReports(recs, o), st); len(p.apply)+len(p.delete) != 0 {
		t.Fatalf("nothing changed, yet the plan is %+v", p)
	}

	// r1 is blocked now: only a's report is written again.
	recs[0].Status.Phase, recs[0].Status.Action.Safe, recs[0].Status.Action.BlockedBy = v1alpha1.PhaseBlocked, false, string(check.VMIMigrating)
	p = planReports(wantedReports(recs, o), st)
	if len(p.apply) != 1 || keyOf(p.apply[0]) != (reportKey{"a", "tether"}) || p.apply[0].Results[0].Result != policyreport.Skip || len(p.delete) != 0 {
		t.Fatalf("one finding changed: %+v", p)
	}
	write(p)

	// r2 resolves: b's report is deleted, the others stay.
	recs[1].Status.Phase = v1alpha1.PhaseResolved
	p = planReports(wantedReports(recs, o), st)
	if len(p.apply) != 0 || !slices.Equal(p.delete, []reportKey{{"b", "tether"}}) {
		t.Fatalf("finding resolved: %+v", p)
	}
	write(p)

	// A resync found c's report (left by an earlier run) and a's: c's is
	// deleted, a's written again although its content is unchanged.
	st = reportState{{"a", "tether"}: "", {"c", "tether"}: "", {"", "tether"}: st[reportKey{"", "tether"}]}
	p = planReports(wantedReports(recs, o), st)
	if len(p.apply) != 1 || keyOf(p.apply[0]) != (reportKey{"a", "tether"}) || !slices.Equal(p.delete, []reportKey{{"c", "tether"}}) {
		t.Fatalf("after a resync: %+v", p)
	}
}
