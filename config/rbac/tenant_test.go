package rbac

import (
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// The tenant RBAC is the two files' roles, each bound to the service
// account; fencing only on request; a malformed account is refused by name.
func TestTenant(t *testing.T) {
	for _, fence := range []bool{false, true} {
		objs, err := Tenant(TenantOptions{ServiceAccount: "kube-system/tether-reader", Fence: fence})
		if err != nil {
			t.Fatal(err)
		}
		var roles []string
		canUpdateNodes := false
		for _, o := range objs {
			switch o := o.(type) {
			case *rbacv1.ClusterRole:
				roles = append(roles, o.Name)
				for _, r := range o.Rules {
					canUpdateNodes = canUpdateNodes || (slices.Contains(r.Resources, "nodes") && slices.Contains(r.Verbs, "update"))
				}
			case *rbacv1.ClusterRoleBinding:
				if s := o.Subjects; len(s) != 1 || s[0].Kind != "ServiceAccount" || s[0].Namespace != "kube-system" || s[0].Name != "tether-reader" || o.RoleRef.Name != o.Name {
					t.Errorf("binding %s: %+v -> %+v", o.Name, o.Subjects, o.RoleRef)
				}
			}
		}
		want := []string{"tether-tenant-reader"}
		if fence {
			want = append(want, "tether-tenant-fencer")
		}
		if !slices.Equal(roles, want) || canUpdateNodes != fence || len(objs) != 2*len(want) {
			t.Errorf("fence=%v: roles %v (update nodes %v), %d objects", fence, roles, canUpdateNodes, len(objs))
		}
	}
	if _, err := Tenant(TenantOptions{ServiceAccount: "tether-reader"}); err == nil || !strings.Contains(err.Error(), "NAMESPACE/NAME") {
		t.Errorf("an account without a namespace: %v", err)
	}
}
