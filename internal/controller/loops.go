package controller

import (
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller/access"
	"github.com/tether-dev/tether/internal/controller/records"
	"github.com/tether-dev/tether/internal/controller/tenant"
	"github.com/tether-dev/tether/internal/kubevirt/act"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// loopDeps are what every check loop is set up with: the manager, the
// shared records and executor, the checks' policy, the tenants' watches
// and the options.
type loopDeps struct {
	mgr     manager.Manager
	records *records.Keeper
	exec    *act.Executor
	policy  check.Policy
	tenants []*tenant.Watch
	o       Options
}

// checkLoop is one of the controller's check loops. Its checks are those
// whose row names it (check.InLoop); it runs when one of them is enabled.
type checkLoop struct {
	name check.Loop
	// gathers are the kinds its gatherer reads (loopGathers).
	gathers snapshot.Kinds
	// setup registers it with the manager.
	setup func(loopDeps) error
	// need is what it reads and writes (the start-up access check); nil
	// when none of its checks is enabled.
	need func(*config.Config) *access.Need
}

// checkLoops are the controller's check loops, set up in this order: one
// row each, from which the loops' setup (setupChecks), what they gather
// and watch (loopGathers) and the access they need (needs) derive.
func checkLoops() []checkLoop {
	return []checkLoop{
		{name: check.LoopHotplug, gathers: observe.VMIKinds, need: hotplugNeed, setup: func(d loopDeps) error {
			r := &HotplugReconciler{Cache: d.mgr.GetClient(), Records: d.records, Executor: d.exec, Policy: d.policy, Tenants: d.tenants}
			return r.setup(d.mgr)
		}},
		// Config validation has made sure there are tenants.
		{name: check.LoopFence, gathers: observe.InfraOfNodeKinds, need: fenceNeed, setup: func(d loopDeps) error {
			return setupFence(d.mgr, d.records, d.exec, d.policy, d.tenants, d.o)
		}},
		{name: check.LoopNamespace, gathers: observe.NamespaceKinds, need: namespaceNeed, setup: func(d loopDeps) error {
			return setupNamespace(d.mgr, d.records, d.policy, d.o)
		}},
		{name: check.LoopStorage, gathers: observe.StorageKinds, need: storageNeed, setup: func(d loopDeps) error {
			return setupStorage(d.mgr, d.records, d.exec, d.policy, d.o)
		}},
	}
}
