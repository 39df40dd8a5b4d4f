package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Where the missing permissions of each feature come from.
const (
	fixBase        = "apply config/rbac (kubectl apply -k config/rbac), or for a controller limited to scope.namespaces the output of `tether manifests rbac` with one --namespace per scoped namespace"
	fixStorage     = "the storage checks read cluster-wide (Nodes, VolumeAttachments, PVs, every pod on a node): apply config/rbac (kubectl apply -k config/rbac); namespaced RBAC cannot grant them"
	fixMetrics     = "the HTTPS metrics endpoint asks the API server about each scraper: apply config/rbac/common (kubectl apply -k config/rbac/common), or serve plain HTTP with --metrics-secure=false"
	fixRemediation = "StaleVolumeAttachment actions will be refused until you apply the opt-in config/rbac/storage-remediation (kubectl apply -k config/rbac/storage-remediation)"
	fixProtection  = "apply the opt-in config/rbac/protection (kubectl apply -k config/rbac/protection), or for a controller limited to scope.namespaces add --protection to `tether manifests rbac`"
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
	var b strings.Builder
	b.WriteString("controller: this identity lacks permissions that the configuration needs:")
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
	ask, asked := onceEach(func(ctx context.Context, ra *authorizationv1.ResourceAttributes) (bool, error) {
		r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: ra}}
		got, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, r, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("controller: checking RBAC (SelfSubjectAccessReview): %w", err)
		}
		return got.Status.Allowed, nil
	})
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
	return nil
}
