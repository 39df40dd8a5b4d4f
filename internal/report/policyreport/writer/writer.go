// Package writer keeps the controller's policy reports (policyReports.enabled,
// --policy-reports) in step with its open Finding records: a runnable of its
// own reads the records from the cache every interval, plans the reports
// that changed (a pure plan), and applies and deletes them. The reports are
// output only: nothing that decides or acts waits for the writer or reads
// what it writes, and a failed write is logged and retried on the next pass.
//
// It must never write a Finding record nor decide about a finding; it reads
// the records through their contract (package findingrecord) and imports
// nothing of package controller.
package writer

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/findingrecord"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/report/policyreport"
	"github.com/tether-dev/tether/internal/report/reportapi"
)

// reportResync is how often the reports are listed live again (to find
// reports edited or deleted by hand, and after a restart) and a missing
// report API is looked for again.
const reportResync = 10 * time.Minute

// reportKey names one report: its namespace ("" for the cluster report)
// and name.
type reportKey struct{ namespace, name string }

func (k reportKey) String() string {
	if k.namespace == "" {
		return k.name
	}
	return k.namespace + "/" + k.name
}

// reportPlan is what one pass writes: the reports to apply (changed since
// they were last written) and those to delete (tether's, no longer wanted).
type reportPlan struct {
	apply  []policyreport.Report
	delete []reportKey
}

// reportState is what the writer knows of the reports in the cluster: the
// digest of each report as it last wrote it ("" for one found in the
// cluster that it has not written since it started).
type reportState map[reportKey]string

// planReports compares the wanted reports with the state: a wanted report
// whose digest differs is applied, a report in the state that is not
// wanted is deleted. It is pure.
func planReports(want []policyreport.Report, st reportState) reportPlan {
	var p reportPlan
	wanted := map[reportKey]bool{}
	for _, r := range want {
		k := keyOf(r)
		wanted[k] = true
		if d, ok := st[k]; !ok || d != digest(r) {
			p.apply = append(p.apply, r)
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(st), compareKeys) {
		if !wanted[k] {
			p.delete = append(p.delete, k)
		}
	}
	return p
}

func compareKeys(a, b reportKey) int {
	if a.namespace != b.namespace {
		if a.namespace < b.namespace {
			return -1
		}
		return 1
	}
	switch {
	case a.name < b.name:
		return -1
	case a.name > b.name:
		return 1
	}
	return 0
}

func keyOf(r policyreport.Report) reportKey {
	return reportKey{r.Metadata.Namespace, r.Metadata.Name}
}

// digest identifies a report's content.
func digest(r policyreport.Report) string {
	data, _ := json.Marshal(r) // a Report always marshals
	sum := sha256.Sum256(data)
	return fmt.Sprintf("%x", sum[:])
}

// Options say which reports the controller keeps.
type Options struct {
	API reportapi.API
	// Namespaces is the scope: empty for all namespaces, which also keeps
	// the cluster report. A controller limited to namespaces writes no
	// cluster report (its RBAC has none), so findings about cluster-scoped
	// subjects are not reported.
	Namespaces []string
	// Scope is the controller's scope id: records of other scopes are not
	// its findings.
	Scope string
}

// wantedReports are the reports of the open findings among recs: a report
// per namespace with results and, for all namespaces, the cluster report,
// empty if need be.
func wantedReports(recs []v1alpha1.Finding, o Options) []policyreport.Report {
	var es []policyreport.Entry
	for i := range recs {
		if e, ok := entryOf(&recs[i], o.Scope); ok {
			es = append(es, e)
		}
	}
	all := len(o.Namespaces) == 0
	var out []policyreport.Report
	for _, r := range policyreport.Build(es, policyreport.Options{API: o.API, Classify: check.BlockClassOf, Cluster: all}) {
		if r.Metadata.Namespace == "" && !all {
			continue
		}
		out = append(out, r)
	}
	return out
}

// entryOf is the report entry of an open finding's record; false for a
// record that is no open finding of this scope (resolved, not yet judged,
// the breaker, `tether fix`'s records, another scope's).
func entryOf(rec *v1alpha1.Finding, scope string) (policyreport.Entry, bool) {
	st := rec.Status
	if _, err := check.Lookup(rec.Spec.Check); err != nil || findingrecord.OfOtherScope(rec, scope) ||
		st.Phase == "" || findingrecord.Finished(rec) {
		return policyreport.Entry{}, false
	}
	f := drift.Finding{
		ID: rec.Spec.ID, Check: rec.Spec.Check, Namespace: rec.Namespace,
		Object:   drift.ObjectRef{Kind: rec.Spec.Subject.Kind, Name: rec.Spec.Subject.Name, UID: rec.Spec.Subject.UID},
		Volume:   rec.Spec.Volume,
		Severity: drift.Severity(st.Severity), Message: st.Message, Evidence: st.Evidence,
		Action: drift.Action{Type: drift.ActionType(st.Action.Type), Safe: st.Action.Safe,
			BlockedBy: drift.BlockReason(st.Action.BlockedBy), Remedy: st.Action.Remedy},
	}
	if policyreport.ClusterScoped(f.Object.Kind) {
		// Filed in the controller's namespace: no namespace of its own.
		f.Namespace = ""
	}
	seen := rec.CreationTimestamp.Time
	if st.FirstObserved != nil {
		seen = st.FirstObserved.Time
	}
	return policyreport.Entry{Finding: f, Seen: seen, Properties: map[string]string{
		"phase":  string(st.Phase),
		"record": rec.Namespace + "/" + rec.Name,
	}}, true
}

// Writer is the runnable that keeps the reports; only the leader
// writes.
type Writer struct {
	Cache  client.Reader
	Live   client.Client
	Mapper meta.RESTMapper
	Opts   Options
	// Interval is the time between passes: at most one write per report.
	Interval time.Duration
	Log      logr.Logger

	state reportState
	// installed: the report API was found; resynced: when the reports
	// were last listed live.
	installed bool
	resynced  time.Time
	// lastErr is the last error logged, so that a lasting one is logged
	// once and not every pass.
	lastErr string
}

var _ manager.LeaderElectionRunnable = (*Writer)(nil)

// NeedLeaderElection: only the leader writes reports.
func (w *Writer) NeedLeaderElection() bool { return true }

// Start implements manager.Runnable; it never returns an error, so the
// reports cannot stop the controller.
func (w *Writer) Start(ctx context.Context) error {
	t := time.NewTicker(w.Interval)
	defer t.Stop()
	for {
		w.pass(ctx, time.Now())
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// pass brings the reports in step once.
func (w *Writer) pass(ctx context.Context, now time.Time) {
	due := w.resynced.IsZero() || now.Sub(w.resynced) >= reportResync
	if !w.installed {
		if !due {
			return
		}
		w.resynced = now
		if !w.findAPI() {
			return
		}
		due = true
	}
	if due {
		if err := w.resync(ctx); err != nil {
			w.failed(err)
			return
		}
		w.resynced = now
	}
	var recs v1alpha1.FindingList
	if err := w.Cache.List(ctx, &recs); err != nil {
		w.failed(fmt.Errorf("reading the Finding records: %w", err))
		return
	}
	var errs []error
	p := planReports(wantedReports(recs.Items, w.Opts), w.state)
	for _, r := range p.apply {
		if err := w.apply(ctx, r); err != nil {
			errs = append(errs, err)
			continue
		}
		w.state[keyOf(r)] = digest(r)
	}
	for _, k := range p.delete {
		if err := w.delete(ctx, k); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(w.state, k)
	}
	if err := errors.Join(errs...); err != nil {
		w.failed(err)
		return
	}
	if w.lastErr != "" {
		w.Log.Info("policy reports are written again")
		w.lastErr = ""
	}
	if len(p.apply)+len(p.delete) > 0 {
		w.Log.V(1).Info("policy reports written", "applied", len(p.apply), "deleted", len(p.delete))
	}
}

// findAPI reports whether the report API is served; when it is not, it
// says so once, naming the fix.
func (w *Writer) findAPI() bool {
	namespaced, cluster := w.Opts.API.Kinds()
	var missing []string
	for _, kind := range []string{namespaced, cluster} {
		if _, err := w.Mapper.RESTMapping(schema.GroupKind{Group: w.Opts.API.Group(), Kind: kind}, w.Opts.API.Version()); err != nil {
			missing = append(missing, kind)
		}
	}
	if len(missing) == 0 {
		w.installed = true
		if w.lastErr != "" {
			w.Log.Info("the policy report API is installed now: writing the reports", "api", w.Opts.API)
			w.lastErr = ""
		}
		return true
	}
	w.failed(fmt.Errorf("policy reports are on, but the API server does not serve %s %v: install the report CRDs "+
		"(Kyverno and Policy Reporter install those of wgpolicyk8s.io; OpenReports' of openreports.io), or pick the API installed with "+
		"--report-api (policyReports.api); the controller runs on without reports and looks again every %s",
		w.Opts.API, missing, reportResync))
	return false
}

// failed logs err unless it is the one logged last.
func (w *Writer) failed(err error) {
	if msg := err.Error(); msg != w.lastErr {
		w.Log.Error(err, "policy reports not written; retrying")
		w.lastErr = msg
	}
}

// resync lists tether's reports live: each one is written again on this
// pass, and those no open finding wants any more are deleted.
func (w *Writer) resync(ctx context.Context) error {
	st := reportState{}
	namespaced, cluster := w.Opts.API.Kinds()
	sel := client.MatchingLabels{policyreport.LabelManagedBy: policyreport.ManagedBy}
	// A controller of all namespaces lists both kinds everywhere; one
	// limited to namespaces lists its namespaced reports there.
	type listing struct {
		kind string
		opts []client.ListOption
	}
	lists := []listing{{namespaced, []client.ListOption{sel}}, {cluster, []client.ListOption{sel}}}
	if len(w.Opts.Namespaces) > 0 {
		lists = nil
		for _, ns := range w.Opts.Namespaces {
			lists = append(lists, listing{namespaced, []client.ListOption{sel, client.InNamespace(ns)}})
		}
	}
	for _, l := range lists {
		var list unstructured.UnstructuredList
		list.SetGroupVersionKind(w.gvk(l.kind + "List"))
		if err := w.Live.List(ctx, &list, l.opts...); err != nil {
			return fmt.Errorf("listing tether's %s: %w", l.kind, err)
		}
		for _, it := range list.Items {
			if it.GetName() == policyreport.Name {
				st[reportKey{it.GetNamespace(), it.GetName()}] = ""
			}
		}
	}
	w.state = st
	return nil
}

func (w *Writer) gvk(kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: w.Opts.API.Group(), Version: w.Opts.API.Version(), Kind: kind}
}

// apply writes r with a server-side apply under the controller's field
// manager; the results list is replaced as a whole.
func (w *Writer) apply(ctx context.Context, r policyreport.Report) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return err
	}
	if err := w.Live.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(v1alpha1.FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w", r.Kind, keyOf(r), err)
	}
	return nil
}

// delete removes tether's report k.
func (w *Writer) delete(ctx context.Context, k reportKey) error {
	namespaced, cluster := w.Opts.API.Kinds()
	kind := namespaced
	if k.namespace == "" {
		kind = cluster
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(w.gvk(kind))
	u.SetNamespace(k.namespace)
	u.SetName(k.name)
	if err := w.Live.Delete(ctx, u); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s %s: %w", kind, k, err)
	}
	return nil
}
