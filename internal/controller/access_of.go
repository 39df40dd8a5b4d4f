package controller

import (
	"context"
	"errors"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tether-dev/tether/internal/config"
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
	ask, asked := onceEach(func(ctx context.Context, ra *authorizationv1.ResourceAttributes) (bool, error) {
		r := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: ra}}
		got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, r, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("SubjectAccessReview: %w", err)
		}
		return got.Status.Allowed, nil
	})
	ds, err := missing(ctx, needs(cfg, checks, ownNS), cfg.Scope.Namespaces, ask)
	if err != nil {
		return nil, asked(), err
	}
	out := make([]Denial, 0, len(ds))
	for _, d := range ds {
		out = append(out, Denial{Feature: d.need.feature, Grant: d.grant.String(), Namespace: d.namespace, Fix: d.need.fix, Optional: d.need.optional})
	}
	return out, asked(), nil
}
