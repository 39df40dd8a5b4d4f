package controller

import (
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-dev/tether/config/rbac"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller/access"
	"github.com/tether-dev/tether/internal/kubevirt/check"
)

// needs lists what the configuration's features read and write (the
// informers' list and watch, the live re-reads and the writes), one need per
// enabled feature. ownNS is the controller's namespace (records of
// cluster-scoped subjects). The storage-remediation writes are Optional:
// without them those actions fail and say so, the rest runs.
func needs(cfg *config.Config, checks bool, ownNS string) []access.Need {
	var out []access.Need
	if n := recordsNeed(cfg, checks, ownNS); n != nil {
		out = append(out, *n)
	}
	for _, l := range checkLoops() {
		if n := l.need(cfg); n != nil {
			out = append(out, *n)
		}
	}
	for _, f := range []func(*config.Config) *access.Need{remediationNeed, restartNeed, protectionNeed} {
		if n := f(cfg); n != nil {
			out = append(out, *n)
		}
	}
	return out
}

func recordsNeed(cfg *config.Config, checks bool, ownNS string) *access.Need {
	if !checks && !cfg.DanglingOnRestart.Enabled {
		return nil
	}
	g := slices.Concat(access.Reads("tether.dev", "findings"),
		[]access.Grant{{Verb: "create", Group: "tether.dev", Resource: "findings"}, {Verb: "delete", Group: "tether.dev", Resource: "findings"},
			{Verb: "update", Group: "tether.dev", Resource: "findings/status"}, {Verb: "create", Resource: "events"}})
	if len(cfg.Scope.Namespaces) > 0 {
		// The records' informer watches the controller's namespace too.
		g = append(g, access.Grant{Verb: "list", Group: "tether.dev", Resource: "findings", In: ownNS}, access.Grant{Verb: "watch", Group: "tether.dev", Resource: "findings", In: ownNS})
	}
	return &access.Need{Feature: "records (Finding objects, Events)", Fix: fixBase, Grants: g}
}

// hotplugNeed is what the hot-plug loop reads and writes, when a check of
// that loop (its row's Loop) is enabled.
func hotplugNeed(cfg *config.Config) *access.Need {
	// The need names the loop's enabled checks, the ones that would fail.
	enabled := slices.DeleteFunc(check.InLoop(check.LoopHotplug), func(n string) bool { return !cfg.Enabled(n) })
	if len(enabled) == 0 {
		return nil
	}
	// What its gatherer reads, from the caches and live before an action.
	g := append(kindReads(loopGathers()[check.LoopHotplug], true),
		access.Grant{Verb: "update", Group: "subresources.kubevirt.io", Resource: "virtualmachineinstances/removevolume"},
		// The VM-level route: StuckPublish, and OrphanHotplugVolume with
		// tenantAuthoritative, remove volumes from the VM spec.
		access.Grant{Verb: "update", Group: "subresources.kubevirt.io", Resource: "virtualmachines/removevolume"})
	return &access.Need{Feature: strings.Join(enabled, ", "), Fix: fixBase, Grants: g}
}

// fenceNeed is what the fence loop reads of the infra cluster: the VMs and
// VMIs its tenant nodes resolve to (their caches and the live re-check).
// Its writes are in the tenants (tenantNeeds).
func fenceNeed(cfg *config.Config) *access.Need {
	enabled := slices.DeleteFunc(check.InLoop(check.LoopFence), func(n string) bool { return !cfg.Enabled(n) })
	if len(enabled) == 0 {
		return nil
	}
	return &access.Need{Feature: strings.Join(enabled, ", "), Fix: fixBase, Grants: kindReads(loopGathers()[check.LoopFence], true)}
}

// tenantNeeds is what the identity of each tenant's kubeconfig needs in
// its tenant: what the role of config/rbac/tenant-reader.yaml grants, and,
// when TenantNodeDown may act (enabled, no dry run), what the opt-in
// config/rbac/tenant-fencer.yaml grants. The roles' own rules are asked,
// so the check cannot drift from the roles.
func tenantNeeds(cfg *config.Config) ([]access.Need, error) {
	if len(cfg.Tenants) == 0 {
		return nil, nil
	}
	fence := cfg.Enabled(check.TenantNodeDown) && !cfg.DryRun
	roles, err := rbac.TenantRoles(fence)
	if err != nil {
		return nil, err
	}
	fixes := []string{fixTenantReader, fixTenantFencer}
	features := []string{"tenant evidence (tether-tenant-reader)", check.TenantNodeDown + " fencing (tether-tenant-fencer)"}
	out := make([]access.Need, 0, len(roles))
	for i, role := range roles {
		out = append(out, roleNeed(role, features[i], fixes[i]))
	}
	return out, nil
}

// roleNeed is what a tenant ClusterRole grants, as one need: every verb on
// every resource of its rules, cluster-wide.
func roleNeed(role rbacv1.ClusterRole, feature, fix string) access.Need {
	n := access.Need{Feature: feature, Fix: fix}
	for _, r := range role.Rules {
		for _, group := range r.APIGroups {
			for _, res := range r.Resources {
				for _, verb := range r.Verbs {
					n.Grants = append(n.Grants, access.Grant{Verb: verb, Group: group, Resource: res, ClusterWide: true})
				}
			}
		}
	}
	return n
}

// namespaceNeed is what the namespace loop's caches list and watch: the
// kinds its enabled checks read (their rows' Reads), in every scoped
// namespace, and the KubeVirt CR wherever it is. It reads nothing live
// and writes only records and Events (recordsNeed).
func namespaceNeed(cfg *config.Config) *access.Need {
	names, kinds, err := namespaceLoop(cfg.Enabled)
	if err != nil || len(names) == 0 {
		return nil
	}
	return &access.Need{Feature: strings.Join(names, ", "), Fix: fixBase, Grants: kindReads(kinds, false)}
}

// storageNeed is what the storage loop reads, when a check of that loop is
// enabled.
func storageNeed(cfg *config.Config) *access.Need {
	if !slices.ContainsFunc(check.InLoop(check.LoopStorage), cfg.Enabled) {
		return nil
	}
	g := append(kindReads(loopGathers()[check.LoopStorage], true),
		// The live re-check lists the pods on a node in every namespace
		// and reads the claim of a PV wherever it is.
		access.Grant{Verb: "list", Resource: "pods", ClusterWide: true}, access.Grant{Verb: "get", Resource: "persistentvolumeclaims", ClusterWide: true},
		// Events on cluster-scoped subjects.
		access.Grant{Verb: "create", Resource: "events", In: metav1.NamespaceDefault})
	return &access.Need{Feature: "storage checks", Fix: fixStorage, Grants: g}
}

func remediationNeed(cfg *config.Config) *access.Need {
	if !cfg.Enabled(check.StaleVolumeAttachment) || cfg.DryRun {
		return nil
	}
	g := access.ClusterWide([]access.Grant{{Verb: "delete", Resource: "pods"}})
	if cfg.Storage.ForceDetach {
		g = append(g, access.ClusterWide([]access.Grant{{Verb: "delete", Group: "storage.k8s.io", Resource: "volumeattachments"},
			{Verb: "patch", Group: "storage.k8s.io", Resource: "volumeattachments"}})...)
	}
	return &access.Need{Feature: "storage remediation", Fix: fixRemediation, Grants: g, Optional: true}
}

func restartNeed(cfg *config.Config) *access.Need {
	if !cfg.DanglingOnRestart.Enabled {
		return nil
	}
	g := slices.Concat(access.Reads("kubevirt.io", "virtualmachines", "virtualmachineinstances"), access.ClusterWide(access.Reads("kubevirt.io", "kubevirts")),
		access.Reads("", "persistentvolumeclaims"), access.Reads("cdi.kubevirt.io", "datavolumes"),
		[]access.Grant{{Verb: "list", Resource: "pods"}, {Verb: "update", Group: "subresources.kubevirt.io", Resource: "virtualmachines/removevolume"}})
	return &access.Need{Feature: "danglingOnRestart", Fix: fixBase, Grants: g}
}

func protectionNeed(cfg *config.Config) *access.Need {
	if !cfg.Protection.Enabled {
		return nil
	}
	g := slices.Concat(access.Reads("", "persistentvolumeclaims"), access.Reads("cdi.kubevirt.io", "datavolumes"), access.Reads("apps", "controllerrevisions"),
		access.Reads("kubevirt.io", "virtualmachines"),
		[]access.Grant{{Verb: "patch", Resource: "persistentvolumeclaims"}, {Verb: "patch", Group: "cdi.kubevirt.io", Resource: "datavolumes"},
			{Verb: "patch", Group: "apps", Resource: "controllerrevisions"}, {Verb: "create", Resource: "events"},
			// Its own namespace, for each scoped one (a namespaced Role
			// can grant that), else every namespace.
			{Verb: "get", Resource: "namespaces"}})
	return &access.Need{Feature: "protection", Fix: fixProtection, Grants: g}
}

// metricsNeed is what the HTTPS metrics endpoint asks the API server.
func metricsNeed() access.Need {
	return access.Need{Feature: "metrics", Fix: fixMetrics, Grants: []access.Grant{
		{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews", ClusterWide: true},
		{Verb: "create", Group: "authorization.k8s.io", Resource: "subjectaccessreviews", ClusterWide: true},
	}}
}
