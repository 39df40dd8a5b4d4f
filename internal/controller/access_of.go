package controller

import (
	"context"
	"errors"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tether-dev/tether/config/rbac"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller/access"
	"github.com/tether-dev/tether/internal/kubevirt/check"
)

// Denial is one permission a controller identity lacks for its
// configuration.
type Denial struct {
	Feature, Grant, Namespace, Fix string
	// Optional: the controller starts without it, and the feature's
	// actions fail and say so.
	Optional bool
}

// AccessOf asks the API server (SubjectAccessReview, which the caller must
// be allowed to create) whether user — the controller's identity, e.g.
// system:serviceaccount:tether-system:tether-controller, in groups — holds
// what cfg needs, as the controller asks about itself at start
// (checkAccess); ownNS is the controller's namespace. It returns the
// grants refused and how many were asked about. It changes nothing.
func AccessOf(ctx context.Context, cs kubernetes.Interface, cfg *config.Config, ownNS, user string, groups []string) ([]Denial, int, error) {
	if err := cfg.Validate(); err != nil {
		return nil, 0, err
	}
	_, err := cfg.Policy()
	checks := err == nil
	if err != nil && !errors.Is(err, config.ErrNoChecks) {
		return nil, 0, err
	}
	ask, asked := access.OnceEach(func(ctx context.Context, ra *authorizationv1.ResourceAttributes) (bool, error) {
		r := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: ra}}
		got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, r, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("SubjectAccessReview: %w", err)
		}
		return got.Status.Allowed, nil
	})
	ds, err := access.Missing(ctx, needs(cfg, checks, ownNS), cfg.Scope.Namespaces, ask)
	if err != nil {
		return nil, asked(), err
	}
	out := make([]Denial, 0, len(ds))
	for _, d := range ds {
		out = append(out, Denial{Feature: d.Need.Feature, Grant: d.Grant.String(), Namespace: d.Namespace, Fix: d.Need.Fix, Optional: d.Need.Optional})
	}
	return out, asked(), nil
}

// TenantFenceAccessOf asks a tenant, as the identity cs authenticates as
// (SelfSubjectAccessReview), whether it holds what the opt-in
// config/rbac/tenant-fencer.yaml Grants: what TenantNodeDown needs there to
// taint and untaint a Node. It returns the grants refused (empty: it may
// fence) and changes nothing. The role's own rules are asked, as at the
// controller's start.
func TenantFenceAccessOf(ctx context.Context, cs kubernetes.Interface) ([]Denial, error) {
	roles, err := rbac.TenantRoles(true)
	if err != nil {
		return nil, err
	}
	n := roleNeed(roles[len(roles)-1], check.TenantNodeDown+" fencing (tether-tenant-fencer)", fixTenantFencer)
	ask, _ := access.SelfReview(cs, "tenant")
	ds, err := access.Missing(ctx, []access.Need{n}, nil, ask)
	if err != nil {
		return nil, err
	}
	out := make([]Denial, 0, len(ds))
	for _, d := range ds {
		out = append(out, Denial{Feature: d.Need.Feature, Grant: d.Grant.String(), Fix: d.Need.Fix})
	}
	return out, nil
}
