package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
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

// grant is one permission: a verb on a resource, in every scoped namespace
// (cluster-wide when no scope is set) unless clusterWide, or in namespace
// in when it is set.
type grant struct {
	verb, group, resource string
	clusterWide           bool
	in                    string
}

func (g grant) String() string {
	r := g.resource
	if g.group != "" {
		r += "." + g.group
	}
	return g.verb + " " + r
}

// need is what one feature of the configuration needs, and how to grant it.
// An optional need is only logged when missing: the feature then fails
// its actions and says so, and the rest runs.
type need struct {
	feature  string
	fix      string
	grants   []grant
	optional bool
}

// namespacesOf returns where g is asked: "" for cluster-wide.
func namespacesOf(g grant, scope []string) []string {
	switch {
	case g.in != "":
		return []string{g.in}
	case g.clusterWide || len(scope) == 0:
		return []string{""}
	}
	return scope
}

// denial is one grant that the API server refused.
type denial struct {
	need      *need
	grant     grant
	namespace string
}

// askFunc answers whether the caller may do g in namespace ns.
type askFunc func(ctx context.Context, g grant, ns string) (bool, error)

// onceEach is an askFunc that puts each distinct question to review once
// (several features need the same grant), and a count of the questions
// put.
func onceEach(review func(context.Context, *authorizationv1.ResourceAttributes) (bool, error)) (askFunc, func() int) {
	asked := map[string]bool{}
	ask := func(ctx context.Context, g grant, ns string) (bool, error) {
		key := g.String() + " " + ns
		if allowed, ok := asked[key]; ok {
			return allowed, nil
		}
		res, sub, _ := strings.Cut(g.resource, "/")
		allowed, err := review(ctx, &authorizationv1.ResourceAttributes{Verb: g.verb, Group: g.group, Resource: res, Subresource: sub, Namespace: ns})
		if err != nil {
			return false, fmt.Errorf("%w (asking for %s)", err, g)
		}
		asked[key] = allowed
		return allowed, nil
	}
	return ask, func() int { return len(asked) }
}

// missing asks about every grant of every need and returns those refused.
func missing(ctx context.Context, ns []need, scope []string, ask askFunc) ([]denial, error) {
	var out []denial
	for i := range ns {
		n := &ns[i]
		for _, g := range n.grants {
			for _, where := range namespacesOf(g, scope) {
				ok, err := ask(ctx, g, where)
				if err != nil {
					return nil, err
				}
				if !ok {
					out = append(out, denial{need: n, grant: g, namespace: where})
				}
			}
		}
	}
	return out, nil
}

// splitOptional separates the denials that stop the start from those of
// optional needs.
func splitOptional(ds []denial) (required, optional []denial) {
	for _, d := range ds {
		if d.need.optional {
			optional = append(optional, d)
		} else {
			required = append(required, d)
		}
	}
	return required, optional
}

// accessError says which permissions are missing, by feature, and how to
// grant them.
func accessError(ds []denial) error {
	return accessErrorFor("controller: this identity lacks permissions that the configuration needs:", ds)
}

// accessErrorFor is accessError under another heading.
func accessErrorFor(head string, ds []denial) error {
	var b strings.Builder
	b.WriteString(head)
	var last *need
	for _, d := range ds {
		if d.need != last {
			last = d.need
			fmt.Fprintf(&b, "\n  %s (fix: %s):", d.need.feature, d.need.fix)
		}
		where := "cluster-wide"
		if d.namespace != "" {
			where = "in namespace " + d.namespace
		}
		fmt.Fprintf(&b, "\n    - %s %s", d.grant, where)
	}
	return fmt.Errorf("%s", b.String())
}

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
	ask, asked := selfReview(cs, "controller")
	all := needs(o.Config, checks, o.Namespace)
	if o.MetricsAddr != "0" && !o.MetricsInsecure {
		all = append(all, metricsNeed())
	}
	ds, err := missing(ctx, all, o.Config.Scope.Namespaces, ask)
	if err != nil {
		return err
	}
	required, optional := splitOptional(ds)
	for _, d := range optional {
		o.Log.Info("RBAC lacks an opt-in grant", "feature", d.need.feature, "missing", d.grant.String(), "fix", d.need.fix)
	}
	o.Log.Info("RBAC checked", "questions", asked(), "missing", len(required), "took", time.Since(t0).Round(time.Millisecond).String())
	if len(required) > 0 {
		return accessError(required)
	}
	if checks {
		return checkTenantAccess(ctx, o)
	}
	return nil
}

// selfReview returns an askFunc answering with SelfSubjectAccessReviews
// (which every authenticated identity may create) through cs, asking each
// question once, and the answers so far. who names the cluster in errors.
func selfReview(cs kubernetes.Interface, who string) (askFunc, func() int) {
	return onceEach(func(ctx context.Context, ra *authorizationv1.ResourceAttributes) (bool, error) {
		r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: ra}}
		got, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, r, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("%s: checking RBAC (SelfSubjectAccessReview): %w", who, err)
		}
		return got.Status.Allowed, nil
	})
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
		ask, _ := selfReview(cs, "tenant "+tc.Name)
		ds, err := missing(ctx, ns, nil, ask)
		if err != nil {
			o.Log.Info("tenant RBAC not checked: the tenant did not answer", "tenant", tc.Name, "error", err.Error())
			continue
		}
		if len(ds) > 0 {
			msgs = append(msgs, accessErrorFor(fmt.Sprintf("tenant %q: the identity of its kubeconfig (%s) lacks permissions that the configuration needs there:", tc.Name, tc.Kubeconfig), ds).Error())
		}
	}
	if len(msgs) > 0 {
		return fmt.Errorf("controller: %s", strings.Join(msgs, "\n"))
	}
	return nil
}
