// Package access checks, before the controller starts, that its identity
// holds what its configuration needs: each feature's grants are put to the
// API server (SelfSubjectAccessReview) once each, and a refusal fails the
// start with the missing grants by feature and the fix. What each feature
// needs is the controller's to say (package controller, needs).
package access

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Grant is one permission: a verb on a resource, in every scoped namespace
// (cluster-wide when no scope is set) unless clusterWide, or in namespace
// in when it is set.
type Grant struct {
	Verb, Group, Resource string
	ClusterWide           bool
	In                    string
}

func (g Grant) String() string {
	r := g.Resource
	if g.Group != "" {
		r += "." + g.Group
	}
	return g.Verb + " " + r
}

// Need is what one feature of the configuration needs, and how to grant it.
// An optional need is only logged when missing: the feature then fails
// its actions and says so, and the rest runs.
type Need struct {
	Feature  string
	Fix      string
	Grants   []Grant
	Optional bool
}

// NamespacesOf returns where g is asked: "" for cluster-wide.
func NamespacesOf(g Grant, scope []string) []string {
	switch {
	case g.In != "":
		return []string{g.In}
	case g.ClusterWide || len(scope) == 0:
		return []string{""}
	}
	return scope
}

// Denial is one grant that the API server refused.
type Denial struct {
	Need      *Need
	Grant     Grant
	Namespace string
}

// AskFunc answers whether the caller may do g in namespace ns.
type AskFunc func(ctx context.Context, g Grant, ns string) (bool, error)

// onceEach is an AskFunc that puts each distinct question to review once
// (several features need the same Grant), and a count of the questions
// put.
func OnceEach(review func(context.Context, *authorizationv1.ResourceAttributes) (bool, error)) (AskFunc, func() int) {
	asked := map[string]bool{}
	ask := func(ctx context.Context, g Grant, ns string) (bool, error) {
		key := g.String() + " " + ns
		if allowed, ok := asked[key]; ok {
			return allowed, nil
		}
		res, sub, _ := strings.Cut(g.Resource, "/")
		allowed, err := review(ctx, &authorizationv1.ResourceAttributes{Verb: g.Verb, Group: g.Group, Resource: res, Subresource: sub, Namespace: ns})
		if err != nil {
			return false, fmt.Errorf("%w (asking for %s)", err, g)
		}
		asked[key] = allowed
		return allowed, nil
	}
	return ask, func() int { return len(asked) }
}

// Missing asks about every grant of every need and returns those refused.
func Missing(ctx context.Context, ns []Need, scope []string, ask AskFunc) ([]Denial, error) {
	var out []Denial
	for i := range ns {
		n := &ns[i]
		for _, g := range n.Grants {
			for _, where := range NamespacesOf(g, scope) {
				ok, err := ask(ctx, g, where)
				if err != nil {
					return nil, err
				}
				if !ok {
					out = append(out, Denial{Need: n, Grant: g, Namespace: where})
				}
			}
		}
	}
	return out, nil
}

// SplitOptional separates the denials that stop the start from those of
// optional needs.
func SplitOptional(ds []Denial) (required, optional []Denial) {
	for _, d := range ds {
		if d.Need.Optional {
			optional = append(optional, d)
		} else {
			required = append(required, d)
		}
	}
	return required, optional
}

// Error says which permissions are missing, by feature, and how to
// grant them.
func Error(ds []Denial) error {
	return ErrorFor("controller: this identity lacks permissions that the configuration needs:", ds)
}

// ErrorFor is Error under another heading.
func ErrorFor(head string, ds []Denial) error {
	var b strings.Builder
	b.WriteString(head)
	var last *Need
	for _, d := range ds {
		if d.Need != last {
			last = d.Need
			fmt.Fprintf(&b, "\n  %s (fix: %s):", d.Need.Feature, d.Need.Fix)
		}
		where := "cluster-wide"
		if d.Namespace != "" {
			where = "in namespace " + d.Namespace
		}
		fmt.Fprintf(&b, "\n    - %s %s", d.Grant, where)
	}
	return fmt.Errorf("%s", b.String())
}

// selfReview returns an AskFunc answering with SelfSubjectAccessReviews
// (which every authenticated identity may create) through cs, asking each
// question once, and the answers so far. who names the cluster in errors.
func SelfReview(cs kubernetes.Interface, who string) (AskFunc, func() int) {
	return OnceEach(func(ctx context.Context, ra *authorizationv1.ResourceAttributes) (bool, error) {
		r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: ra}}
		got, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, r, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("%s: checking RBAC (SelfSubjectAccessReview): %w", who, err)
		}
		return got.Status.Allowed, nil
	})
}

// Reads are get, list and watch of each resource of group.
func Reads(group string, resources ...string) []Grant {
	var out []Grant
	for _, r := range resources {
		for _, v := range []string{"get", "list", "watch"} {
			out = append(out, Grant{Verb: v, Group: group, Resource: r})
		}
	}
	return out
}

// ClusterWide marks every grant of gs cluster-wide.
func ClusterWide(gs []Grant) []Grant {
	for i := range gs {
		gs[i].ClusterWide = true
	}
	return gs
}
