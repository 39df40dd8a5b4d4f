package controller

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/controller/records"
	"github.com/tether-dev/tether/internal/controller/restart"
	"github.com/tether-dev/tether/internal/controller/tenant"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/report/policyreport/writer"
)

// newRecords builds the record keeper every reconciler shares, with the one
// blast-radius budget of the process. Records are written through a live
// client under the controller's field manager.
func newRecords(mgr manager.Manager, o Options) (*records.Keeper, error) {
	c, err := clients.New(o.RestConfig)
	if err != nil {
		return nil, err
	}
	live := client.WithFieldOwner(c, v1alpha1.FieldManager)
	rs := records.New(o.Config)
	rs.Cache, rs.Live = mgr.GetClient(), live
	rs.Recorder = &act.Recorder{Client: live, Component: o.Identity}
	rs.Now, rs.Log = o.Now, o.Log.WithName("records")
	rs.Namespace, rs.Identity = o.Namespace, o.Identity
	if o.Faults != nil {
		rs.AfterClaim, rs.AfterAction = o.Faults.AfterClaim, o.Faults.AfterAction
	}
	return rs, nil
}

// newExecutor builds a live-checking executor for policy, writing under the
// controller's field manager.
func newExecutor(o Options, policy check.Policy, obs observe.Options) (*act.Executor, error) {
	ex, err := act.NewExecutor(o.RestConfig, policy, obs)
	if err != nil {
		return nil, err
	}
	ex.Client = client.WithFieldOwner(ex.Client, v1alpha1.FieldManager)
	ex.WaitTimeout = o.Config.ActionTimeout.Duration
	ex.Recorder.Component = o.Identity
	if o.Faults != nil {
		ex.AfterDryRun = o.Faults.AfterDryRun
	}
	return ex, nil
}

// setupChecks registers the checks' reconcilers (hot-plug, fence, namespace
// and storage, as enabled) and their tenant watches, which it returns.
func setupChecks(mgr manager.Manager, o Options, policy check.Policy, rs *records.Keeper) ([]*tenant.Watch, error) {
	tenants, sources, err := addTenants(mgr, o)
	if err != nil {
		return nil, err
	}
	ex, err := newExecutor(o, policy, observe.Options{Tenants: sources})
	if err != nil {
		return nil, err
	}
	d := loopDeps{mgr: mgr, records: rs, exec: ex, policy: policy, tenants: tenants, o: o}
	for _, l := range checkLoops() {
		// A loop runs when a check whose row names it is enabled.
		if slices.ContainsFunc(check.InLoop(l.name), o.Config.Enabled) {
			if err := l.setup(d); err != nil {
				return nil, err
			}
		}
	}
	return tenants, nil
}

// addTenants starts a watch of every configured tenant cluster.
func addTenants(mgr manager.Manager, o Options) ([]*tenant.Watch, []observe.TenantSource, error) {
	var tenants []*tenant.Watch
	var sources []observe.TenantSource
	for _, tc := range o.Config.Tenants {
		if tc.Namespace == "" && len(o.Config.Scope.Namespaces) == 1 {
			// Validation allows an empty namespace only then: it is the
			// scope's one namespace.
			tc.Namespace = o.Config.Scope.Namespaces[0]
		}
		tw, err := tenant.NewWatch(tc)
		if err != nil {
			return nil, nil, err
		}
		if err := mgr.Add(tw); err != nil {
			return nil, nil, err
		}
		tenants = append(tenants, tw)
		sources = append(sources, tw.Source())
	}
	return tenants, sources, nil
}

// setupRestart registers the "on restart" reconciler; it shares the records'
// budget with the checks.
func setupRestart(mgr manager.Manager, o Options, rs *records.Keeper) error {
	policy, err := o.Config.DanglingPolicy()
	if err != nil {
		return err
	}
	ex, err := newExecutor(o, policy, observe.Options{})
	if err != nil {
		return err
	}
	rr := &restart.Reconciler{
		Cache:       mgr.GetClient(),
		Records:     rs,
		Executor:    ex,
		Config:      o.Config,
		Policy:      policy,
		Now:         o.Now,
		Log:         o.Log.WithName("dangling-restart"),
		DataVolumes: dataVolumesInstalled(mgr.GetRESTMapper()),
	}
	if !rr.DataVolumes {
		rr.Log.Info("DataVolumes are not watched: the API is not installed (no CDI)")
	}
	return rr.Setup(mgr)
}

// dataVolumesInstalled reports whether the API server serves DataVolumes.
func dataVolumesInstalled(m meta.RESTMapper) bool {
	_, err := m.RESTMapping(cdiv1.SchemeGroupVersion.WithKind("DataVolume").GroupKind(), cdiv1.SchemeGroupVersion.Version)
	return err == nil
}

// addReportWriter registers the policy reports' writer (policyReports).
func addReportWriter(mgr manager.Manager, o Options) error {
	pr := o.Config.PolicyReports
	live, err := clients.New(o.RestConfig)
	if err != nil {
		return err
	}
	return mgr.Add(&writer.Writer{
		Cache:    mgr.GetClient(),
		Live:     live,
		Mapper:   mgr.GetRESTMapper(),
		Opts:     writer.Options{API: pr.API.OrDefault(), Namespaces: o.Config.Scope.Namespaces, Scope: records.ScopeID(o.Config.Scope)},
		Interval: pr.Interval.Duration,
		Log:      o.Log.WithName("policyreports"),
	})
}
