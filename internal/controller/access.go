package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tether-dev/tether/internal/controller/access"
)

// Where the missing permissions of each feature come from.
const (
	fixBase         = "apply config/rbac (kubectl apply -k config/rbac), or for a controller limited to scope.namespaces the output of `tether manifests rbac` with one --namespace per scoped namespace"
	fixStorage      = "the storage checks read cluster-wide (Nodes, VolumeAttachments, PVs, every pod on a node): apply config/rbac (kubectl apply -k config/rbac); namespaced RBAC cannot grant them"
	fixMetrics      = "the HTTPS metrics endpoint asks the API server about each scraper: apply config/rbac/common (kubectl apply -k config/rbac/common), or serve plain HTTP with --metrics-secure=false"
	fixRemediation  = "StaleVolumeAttachment actions will be refused until you apply the opt-in config/rbac/storage-remediation (kubectl apply -k config/rbac/storage-remediation)"
	fixTenantReader = "in the tenant, bind config/rbac/tenant-reader.yaml to the identity of its kubeconfig: `tether manifests tenant --service-account NAMESPACE/NAME | kubectl --context TENANT apply -f -`"
	fixTenantFencer = "in the tenant, bind the opt-in config/rbac/tenant-fencer.yaml too: `tether manifests tenant --service-account NAMESPACE/NAME --fence | kubectl --context TENANT apply -f -`; or set checks.TenantNodeDown.enabled: false (or dryRun: true)"
	fixProtection   = "apply the opt-in config/rbac/protection (kubectl apply -k config/rbac/protection), or for a controller limited to scope.namespaces add --protection to `tether manifests rbac`"
)

// checkAccess asks the API server (SelfSubjectAccessReview, which every
// authenticated identity may create) whether this identity holds what the
// configuration needs, and fails with the list and the fix if not: a
// missing grant would otherwise show up later as informers that never
// sync, or as protection that silently protects nothing.
func checkAccess(ctx context.Context, o Options, checks bool) error {
	cs, err := kubernetes.NewForConfig(o.RestConfig)
	if err != nil {
		return err
	}
	t0 := time.Now()
	ask, asked := access.SelfReview(cs, "controller")
	all := needs(o.Config, checks, o.Namespace)
	if o.MetricsAddr != "0" && !o.MetricsInsecure {
		all = append(all, metricsNeed())
	}
	ds, err := access.Missing(ctx, all, o.Config.Scope.Namespaces, ask)
	if err != nil {
		return err
	}
	required, optional := access.SplitOptional(ds)
	for _, d := range optional {
		o.Log.Info("RBAC lacks an opt-in grant", "feature", d.Need.Feature, "missing", d.Grant.String(), "fix", d.Need.Fix)
	}
	o.Log.Info("RBAC checked", "questions", asked(), "missing", len(required), "took", time.Since(t0).Round(time.Millisecond).String())
	if len(required) > 0 {
		return access.Error(required)
	}
	if checks {
		return checkTenantAccess(ctx, o)
	}
	return nil
}

// checkTenantAccess asks each tenant whether the identity of its kubeconfig
// holds what tenantNeeds lists there, and fails with the list and the fix
// if not (a tenant reader that cannot list is a tenant whose evidence never
// counts; a fencer that cannot update Nodes fails every fence). A tenant
// that cannot be asked (unreachable now) is logged and not checked: its
// evidence counts as unknown until it answers.
func checkTenantAccess(ctx context.Context, o Options) error {
	ns, err := tenantNeeds(o.Config)
	if err != nil || len(ns) == 0 {
		return err
	}
	var msgs []string
	for _, tc := range o.Config.Tenants {
		rc, err := clientcmd.BuildConfigFromFlags("", tc.Kubeconfig)
		if err != nil {
			return fmt.Errorf("config: tenants[%s].kubeconfig %s: %v", tc.Name, tc.Kubeconfig, err)
		}
		rc.Timeout = 10 * time.Second
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return err
		}
		ask, _ := access.SelfReview(cs, "tenant "+tc.Name)
		ds, err := access.Missing(ctx, ns, nil, ask)
		if err != nil {
			o.Log.Info("tenant RBAC not checked: the tenant did not answer", "tenant", tc.Name, "error", err.Error())
			continue
		}
		if len(ds) > 0 {
			msgs = append(msgs, access.ErrorFor(fmt.Sprintf("tenant %q: the identity of its kubeconfig (%s) lacks permissions that the configuration needs there:", tc.Name, tc.Kubeconfig), ds).Error())
		}
	}
	if len(msgs) > 0 {
		return fmt.Errorf("controller: %s", strings.Join(msgs, "\n"))
	}
	return nil
}
