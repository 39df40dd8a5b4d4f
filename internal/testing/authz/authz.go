// Package authz asks the real authorizer of a test control plane what an
// identity may do: a client impersonates the identity and sends real
// requests (writes as server-side dry runs), so RBAC decides each one
// exactly as it would for the controller. It never changes an object.
package authz

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// Resources as "resource.group/version" ("pods/v1" for the core group).
const (
	Pods          = "pods/v1"
	PVCs          = "persistentvolumeclaims/v1"
	DataVolumes   = "datavolumes.cdi.kubevirt.io/v1beta1"
	Revisions     = "controllerrevisions.apps/v1"
	Namespaces    = "namespaces/v1"
	VMIs          = "virtualmachineinstances.kubevirt.io/v1"
	VMs           = "virtualmachines.kubevirt.io/v1"
	KubeVirts     = "kubevirts.kubevirt.io/v1"
	Findings      = "findings.tether.dev/v1alpha1"
	Nodes         = "nodes/v1"
	PVs           = "persistentvolumes/v1"
	Attachments   = "volumeattachments.storage.k8s.io/v1"
	Secrets       = "secrets/v1"
	Leases        = "leases.coordination.k8s.io/v1"
	PolicyReports = "policyreports.wgpolicyk8s.io/v1alpha2"
)

// Client sends requests as one user.
type Client struct {
	t    testing.TB
	user string
	dyn  dynamic.Interface
}

// As returns a client of cfg that impersonates user; the API server adds a
// ServiceAccount's groups.
func As(t testing.TB, cfg *rest.Config, user string) *Client {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user}
	return &Client{t: t, user: user, dyn: dynamic.NewForConfigOrDie(c)}
}

// GVR parses "resource.group/version" ("pods/v1" for the core group).
func GVR(s string) schema.GroupVersionResource {
	rg, v, _ := strings.Cut(s, "/")
	r, g, _ := strings.Cut(rg, ".")
	return schema.GroupVersionResource{Group: g, Version: v, Resource: r}
}

// Allowed sends one real request as the user: verb (list, get, patch,
// delete) on resource in ns ("" for all namespaces or a cluster-scoped
// kind), on a named object that need not exist. Writes are server-side dry
// runs. It returns whether RBAC let it through: the authorizer runs before
// the object is looked up, so 404 means allowed.
func (a *Client) Allowed(verb, resource, ns string) bool {
	a.t.Helper()
	ctx := context.Background()
	r := a.dyn.Resource(GVR(resource))
	var c dynamic.ResourceInterface = r
	if ns != "" {
		c = r.Namespace(ns)
	}
	obj := "no-such-object"
	if r := GVR(resource); r.Resource == "namespaces" && ns != "" {
		// A namespace is named by itself: RBAC sees the request in it.
		c, obj = a.dyn.Resource(r), ns
	}
	dry := []string{metav1.DryRunAll}
	var err error
	switch verb {
	case "list":
		_, err = c.List(ctx, metav1.ListOptions{Limit: 1})
	case "get":
		_, err = c.Get(ctx, obj, metav1.GetOptions{})
	case "patch":
		_, err = c.Patch(ctx, obj, types.JSONPatchType, []byte(`[{"op":"test","path":"/metadata/name","value":"x"}]`), metav1.PatchOptions{DryRun: dry})
	case "delete":
		err = c.Delete(ctx, obj, metav1.DeleteOptions{DryRun: dry})
	default:
		a.t.Fatalf("verb %s not supported", verb)
	}
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
		a.t.Fatalf("%s %s in %q as %s: unexpected %v", verb, resource, ns, a.user, err)
	}
	return !apierrors.IsForbidden(err)
}

// Want asserts that RBAC allows (or refuses) verb on resource in ns.
func (a *Client) Want(allowed bool, verb, resource, ns string) {
	a.t.Helper()
	if got := a.Allowed(verb, resource, ns); got != allowed {
		where := ns
		if where == "" {
			where = "all namespaces / cluster"
		}
		a.t.Errorf("%s %s in %s as %s: allowed=%v, want %v", verb, resource, where, a.user, got, allowed)
	}
}

// WaitAllowed waits until RBAC allows verb on resource: the authorizer
// learns new bindings from its informers.
func (a *Client) WaitAllowed(verb, resource, ns string) {
	a.t.Helper()
	a.waitFor(true, verb, resource, ns)
}

// WaitRefused waits until RBAC refuses verb on resource, after a grant
// was taken away.
func (a *Client) WaitRefused(verb, resource, ns string) {
	a.t.Helper()
	a.waitFor(false, verb, resource, ns)
}

func (a *Client) waitFor(allowed bool, verb, resource, ns string) {
	a.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for a.Allowed(verb, resource, ns) != allowed {
		if time.Now().After(deadline) {
			a.t.Fatalf("%s %s in %q as %s: still allowed=%v after 10s", verb, resource, ns, a.user, !allowed)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
