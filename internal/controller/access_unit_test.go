package controller

import (
	"context"
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller/access"
	"github.com/tether-dev/tether/internal/kubevirt/check"
)

// allowAllBut answers like an authorizer that refuses only the verbs named
// "verb resource" in deny (in any namespace).
func allowAllBut(deny ...string) access.AskFunc {
	return func(_ context.Context, g access.Grant, _ string) (bool, error) {
		for _, d := range deny {
			if g.String() == d {
				return false, nil
			}
		}
		return true, nil
	}
}

func TestAccess(t *testing.T) {
	protection := func(scope ...string) *config.Config {
		c := config.Default()
		c.Protection.Enabled = true
		c.Scope.Namespaces = scope
		return &c
	}
	hotplug := func(scope ...string) *config.Config {
		c := config.Default()
		c.Checks = map[string]config.CheckConfig{check.OrphanHotplugVolume: {Enabled: true}}
		c.Scope.Namespaces = scope
		return &c
	}
	storage := func(scope ...string) *config.Config {
		c := config.Default()
		c.Checks = map[string]config.CheckConfig{check.StaleVolumeAttachment: {Enabled: true}}
		c.Scope.Namespaces = scope
		return &c
	}
	namespace := func(checks ...string) *config.Config {
		c := config.Default()
		for _, n := range checks {
			c.Checks[n] = config.CheckConfig{Enabled: true}
		}
		c.Scope.Namespaces = []string{"a"}
		return &c
	}
	cases := []struct {
		name   string
		cfg    *config.Config
		checks bool
		ask    access.AskFunc
		want   []string // substrings of the error; none: no error
	}{
		{"protection, all granted -> starts", protection("a"), false, allowAllBut(), nil},
		{"protection without its overlay -> names config/rbac/protection and each namespace", protection("a", "b"), false,
			allowAllBut("patch persistentvolumeclaims", "patch datavolumes.cdi.kubevirt.io", "list controllerrevisions.apps"),
			[]string{"protection (fix: apply the opt-in config/rbac/protection", "patch persistentvolumeclaims in namespace a",
				"patch persistentvolumeclaims in namespace b", "patch datavolumes.cdi.kubevirt.io in namespace a", "list controllerrevisions.apps in namespace b"}},
		{"protection unscoped without patch -> asks cluster-wide", protection(), false, allowAllBut("patch controllerrevisions.apps"),
			[]string{"patch controllerrevisions.apps cluster-wide"}},
		{"protection off, patch refused -> starts", hotplug("a"), true, allowAllBut("patch persistentvolumeclaims", "get namespaces"), nil},
		{"hot-plug check without VMI reads -> names config/rbac", hotplug("a"), true, allowAllBut("watch virtualmachineinstances.kubevirt.io"),
			[]string{"OrphanHotplugVolume (fix: apply config/rbac", "watch virtualmachineinstances.kubevirt.io in namespace a"}},
		{"hot-plug check without the VM-level removevolume (StuckPublish acts there) -> names it", hotplug("a"), true,
			allowAllBut("update virtualmachines/removevolume.subresources.kubevirt.io"),
			[]string{"update virtualmachines/removevolume.subresources.kubevirt.io in namespace a"}},
		{"scoped records without the controller's namespace -> names it", hotplug("a"), true, allowAllBut("list findings.tether.dev"),
			[]string{"list findings.tether.dev in namespace a", "list findings.tether.dev in namespace tether-system"}},
		{"hot-plug, scoped, no cluster-wide pods -> starts", hotplug("a"), true, func(_ context.Context, g access.Grant, ns string) (bool, error) {
			return !(g.Resource == "pods" && ns == ""), nil
		}, nil},
		{"namespace loop without claim reads -> names its checks and the namespace", namespace(check.SharedClaimConflict, check.StuckHotplugPhase), true,
			allowAllBut("watch persistentvolumeclaims", "list kubevirts.kubevirt.io"),
			[]string{"StuckHotplugPhase, SharedClaimConflict (fix: apply config/rbac", "watch persistentvolumeclaims in namespace a", "list kubevirts.kubevirt.io cluster-wide"}},
		{"namespace loop, one check -> asks only what it reads", namespace(check.InterruptedVolumeMigration), true,
			allowAllBut("list pods", "list kubevirts.kubevirt.io", "get virtualmachines.kubevirt.io"), nil},
		{"namespace loop with namespaced RBAC -> starts", namespace(check.StuckHotplugPhase, check.SharedClaimConflict, check.InterruptedVolumeMigration), true,
			func(_ context.Context, g access.Grant, ns string) (bool, error) {
				return ns != "" || g.Resource == "kubevirts", nil
			}, nil},
		{"storage checks with namespaced RBAC -> says they need cluster-wide reads", storage("a"), true, func(_ context.Context, g access.Grant, ns string) (bool, error) {
			return ns != "", nil
		}, []string{"storage checks (fix: the storage checks read cluster-wide", "list nodes cluster-wide", "list pods cluster-wide"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			all, err := access.Missing(context.Background(), needs(tc.cfg, tc.checks, "tether-system"), tc.cfg.Scope.Namespaces, tc.ask)
			if err != nil {
				t.Fatal(err)
			}
			ds, _ := access.SplitOptional(all)
			if len(tc.want) == 0 {
				if len(ds) > 0 {
					t.Fatalf("want no denial, got %v", access.Error(ds))
				}
				return
			}
			if len(ds) == 0 {
				t.Fatal("want denials, got none")
			}
			msg := access.Error(ds).Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error lacks %q:\n%s", w, msg)
				}
			}
		})
	}
}

// The storage remediations' writes are opt-in: missing, they are logged,
// not a reason to refuse to start; asked only when they can be used.
func TestAccess_storageRemediationIsOptional(t *testing.T) {
	cfg := func(dryRun, force bool) *config.Config {
		c := config.Default()
		c.Checks = map[string]config.CheckConfig{check.StaleVolumeAttachment: {Enabled: true}}
		c.DryRun, c.Storage.ForceDetach = dryRun, force
		return &c
	}
	deny := allowAllBut("delete pods", "delete volumeattachments.storage.k8s.io", "patch volumeattachments.storage.k8s.io")
	cases := []struct {
		name     string
		cfg      *config.Config
		optional int
	}{
		{"acting, no remediation role -> delete pods logged", cfg(false, false), 1},
		{"acting with forceDetach, no remediation role -> the VolumeAttachment writes logged too", cfg(false, true), 3},
		{"dry run -> not asked", cfg(true, true), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			all, err := access.Missing(context.Background(), needs(tc.cfg, true, "tether-system"), nil, deny)
			if err != nil {
				t.Fatal(err)
			}
			required, optional := access.SplitOptional(all)
			if len(required) > 0 || len(optional) != tc.optional {
				t.Errorf("required %d, optional %d; want 0 and %d", len(required), len(optional), tc.optional)
			}
			for _, d := range optional {
				if !strings.Contains(d.Need.Fix, "config/rbac/storage-remediation") {
					t.Errorf("fix %q does not name config/rbac/storage-remediation", d.Need.Fix)
				}
			}
		})
	}
}

func TestAccess_metrics(t *testing.T) {
	ds, err := access.Missing(context.Background(), []access.Need{metricsNeed()}, []string{"a"}, allowAllBut("create tokenreviews.authentication.k8s.io"))
	if err != nil {
		t.Fatal(err)
	}
	msg := access.Error(ds).Error()
	for _, want := range []string{"create tokenreviews.authentication.k8s.io cluster-wide", "config/rbac/common", "--metrics-secure=false"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
}

// What the tenant identity needs in its tenant: the reader role's rights
// whenever tenants are configured, and the fencer role's only when
// TenantNodeDown may act (enabled, no dry run); each names its role and the
// command that binds it.
func TestAccess_tenantNeeds(t *testing.T) {
	withTenant := func(fence, dryRun bool) *config.Config {
		c := config.Default()
		c.Tenants = []config.TenantConfig{{Name: "guest", Kubeconfig: "/k", Namespace: "a"}}
		c.Checks[check.OrphanHotplugVolume] = config.CheckConfig{Enabled: true}
		if fence {
			c.Checks[check.TenantNodeDown] = config.CheckConfig{Enabled: true}
		}
		c.DryRun = dryRun
		return &c
	}
	for _, tc := range []struct {
		name     string
		cfg      *config.Config
		features int
	}{
		{"no tenant -> nothing", func() *config.Config { c := config.Default(); return &c }(), 0},
		{"tenant, no fencing -> reader", withTenant(false, false), 1},
		{"fencing in dry run -> reader", withTenant(true, true), 1},
		{"fencing -> reader and fencer", withTenant(true, false), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns, err := tenantNeeds(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(ns) != tc.features {
				t.Fatalf("%d needs, want %d: %+v", len(ns), tc.features, ns)
			}
		})
	}
	ns, err := tenantNeeds(withTenant(true, false))
	if err != nil {
		t.Fatal(err)
	}
	ds, err := access.Missing(context.Background(), ns, nil, allowAllBut("update nodes"))
	if err != nil {
		t.Fatal(err)
	}
	msg := access.Error(ds).Error()
	for _, want := range []string{"update nodes cluster-wide", "tether-tenant-fencer", "tether manifests tenant", "--fence"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if ds, _ := access.Missing(context.Background(), ns, nil, allowAllBut("watch nodes")); len(ds) != 1 || !strings.Contains(ds[0].Need.Fix, "tenant-reader") {
		t.Errorf("a reader without watch on nodes: %+v", ds)
	}
}
