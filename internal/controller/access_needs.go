package controller

import (
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tether-dev/tether/config/rbac"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/kubevirt/check"
)

// needs lists what the configuration's features read and write (the
// informers' list and watch, the live re-reads and the writes), one need per
// enabled feature. ownNS is the controller's namespace (records of
// cluster-scoped subjects). The storage-remediation writes are optional:
// without them those actions fail and say so, the rest runs.
func needs(cfg *config.Config, checks bool, ownNS string) []need {
	var out []need
	if n := recordsNeed(cfg, checks, ownNS); n != nil {
		out = append(out, *n)
	}
	for _, l := range checkLoops() {
		if n := l.need(cfg); n != nil {
			out = append(out, *n)
		}
	}
	for _, f := range []func(*config.Config) *need{remediationNeed, restartNeed, protectionNeed} {
		if n := f(cfg); n != nil {
			out = append(out, *n)
		}
	}
	return out
}

func recordsNeed(cfg *config.Config, checks bool, ownNS string) *need {
	if !checks && !cfg.DanglingOnRestart.Enabled {
		return nil
	}
	g := slices.Concat(reads("tether.dev", "findings"),
		[]grant{{verb: "create", group: "tether.dev", resource: "findings"}, {verb: "delete", group: "tether.dev", resource: "findings"},
			{verb: "update", group: "tether.dev", resource: "findings/status"}, {verb: "create", resource: "events"}})
	if len(cfg.Scope.Namespaces) > 0 {
		// The records' informer watches the controller's namespace too.
		g = append(g, grant{verb: "list", group: "tether.dev", resource: "findings", in: ownNS}, grant{verb: "watch", group: "tether.dev", resource: "findings", in: ownNS})
	}
	return &need{feature: "records (Finding objects, Events)", fix: fixBase, grants: g}
}

// hotplugNeed is what the hot-plug loop reads and writes, when a check of
// that loop (its row's Loop) is enabled.
func hotplugNeed(cfg *config.Config) *need {
	// The need names the loop's enabled checks, the ones that would fail.
	enabled := slices.DeleteFunc(check.InLoop(check.LoopHotplug), func(n string) bool { return !cfg.Enabled(n) })
	if len(enabled) == 0 {
		return nil
	}
	// What its gatherer reads, from the caches and live before an action.
	g := append(kindReads(loopGathers()[check.LoopHotplug], true),
		grant{verb: "update", group: "subresources.kubevirt.io", resource: "virtualmachineinstances/removevolume"},
		// The VM-level route: StuckPublish, and OrphanHotplugVolume with
		// tenantAuthoritative, remove volumes from the VM spec.
		grant{verb: "update", group: "subresources.kubevirt.io", resource: "virtualmachines/removevolume"})
	return &need{feature: strings.Join(enabled, ", "), fix: fixBase, grants: g}
}

// fenceNeed is what the fence loop reads of the infra cluster: the VMs and
// VMIs its tenant nodes resolve to (their caches and the live re-check).
// Its writes are in the tenants (tenantNeeds).
func fenceNeed(cfg *config.Config) *need {
	enabled := slices.DeleteFunc(check.InLoop(check.LoopFence), func(n string) bool { return !cfg.Enabled(n) })
	if len(enabled) == 0 {
		return nil
	}
	return &need{feature: strings.Join(enabled, ", "), fix: fixBase, grants: kindReads(loopGathers()[check.LoopFence], true)}
}

// tenantNeeds is what the identity of each tenant's kubeconfig needs in
// its tenant: what the role of config/rbac/tenant-reader.yaml grants, and,
// when TenantNodeDown may act (enabled, no dry run), what the opt-in
// config/rbac/tenant-fencer.yaml grants. The roles' own rules are asked,
// so the check cannot drift from the roles.
func tenantNeeds(cfg *config.Config) ([]need, error) {
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
	out := make([]need, 0, len(roles))
	for i, role := range roles {
		out = append(out, roleNeed(role, features[i], fixes[i]))
	}
	return out, nil
}

// roleNeed is what a tenant ClusterRole grants, as one need: every verb on
// every resource of its rules, cluster-wide.
func roleNeed(role rbacv1.ClusterRole, feature, fix string) need {
	n := need{feature: feature, fix: fix}
	for _, r := range role.Rules {
		for _, group := range r.APIGroups {
			for _, res := range r.Resources {
				for _, verb := range r.Verbs {
					n.grants = append(n.grants, grant{verb: verb, group: group, resource: res, clusterWide: true})
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
func namespaceNeed(cfg *config.Config) *need {
	names, kinds, err := namespaceLoop(cfg.Enabled)
	if err != nil || len(names) == 0 {
		return nil
	}
	return &need{feature: strings.Join(names, ", "), fix: fixBase, grants: kindReads(kinds, false)}
}

// storageNeed is what the storage loop reads, when a check of that loop is
// enabled.
func storageNeed(cfg *config.Config) *need {
	if !slices.ContainsFunc(check.InLoop(check.LoopStorage), cfg.Enabled) {
		return nil
	}
	g := append(kindReads(loopGathers()[check.LoopStorage], true),
		// The live re-check lists the pods on a node in every namespace
		// and reads the claim of a PV wherever it is.
		grant{verb: "list", resource: "pods", clusterWide: true}, grant{verb: "get", resource: "persistentvolumeclaims", clusterWide: true},
		// Events on cluster-scoped subjects.
		grant{verb: "create", resource: "events", in: metav1.NamespaceDefault})
	return &need{feature: "storage checks", fix: fixStorage, grants: g}
}

func remediationNeed(cfg *config.Config) *need {
	if !cfg.Enabled(check.StaleVolumeAttachment) || cfg.DryRun {
		return nil
	}
	g := clusterWide([]grant{{verb: "delete", resource: "pods"}})
	if cfg.Storage.ForceDetach {
		g = append(g, clusterWide([]grant{{verb: "delete", group: "storage.k8s.io", resource: "volumeattachments"},
			{verb: "patch", group: "storage.k8s.io", resource: "volumeattachments"}})...)
	}
	return &need{feature: "storage remediation", fix: fixRemediation, grants: g, optional: true}
}

func restartNeed(cfg *config.Config) *need {
	if !cfg.DanglingOnRestart.Enabled {
		return nil
	}
	g := slices.Concat(reads("kubevirt.io", "virtualmachines", "virtualmachineinstances"), clusterWide(reads("kubevirt.io", "kubevirts")),
		reads("", "persistentvolumeclaims"), reads("cdi.kubevirt.io", "datavolumes"),
		[]grant{{verb: "list", resource: "pods"}, {verb: "update", group: "subresources.kubevirt.io", resource: "virtualmachines/removevolume"}})
	return &need{feature: "danglingOnRestart", fix: fixBase, grants: g}
}

func protectionNeed(cfg *config.Config) *need {
	if !cfg.Protection.Enabled {
		return nil
	}
	g := slices.Concat(reads("", "persistentvolumeclaims"), reads("cdi.kubevirt.io", "datavolumes"), reads("apps", "controllerrevisions"),
		reads("kubevirt.io", "virtualmachines"),
		[]grant{{verb: "patch", resource: "persistentvolumeclaims"}, {verb: "patch", group: "cdi.kubevirt.io", resource: "datavolumes"},
			{verb: "patch", group: "apps", resource: "controllerrevisions"}, {verb: "create", resource: "events"},
			// Its own namespace, for each scoped one (a namespaced Role
			// can grant that), else every namespace.
			{verb: "get", resource: "namespaces"}})
	return &need{feature: "protection", fix: fixProtection, grants: g}
}

// metricsNeed is what the HTTPS metrics endpoint asks the API server.
func metricsNeed() need {
	return need{feature: "metrics", fix: fixMetrics, grants: []grant{
		{verb: "create", group: "authentication.k8s.io", resource: "tokenreviews", clusterWide: true},
		{verb: "create", group: "authorization.k8s.io", resource: "subjectaccessreviews", clusterWide: true},
	}}
}

func reads(group string, resources ...string) []grant {
	var out []grant
	for _, r := range resources {
		for _, v := range []string{"get", "list", "watch"} {
			out = append(out, grant{verb: v, group: group, resource: r})
		}
	}
	return out
}

func clusterWide(gs []grant) []grant {
	for i := range gs {
		gs[i].clusterWide = true
	}
	return gs
}
