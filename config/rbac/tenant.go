package rbac

import (
	_ "embed"
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

var (
	//go:embed tenant-reader.yaml
	tenantReaderYAML []byte
	//go:embed tenant-fencer.yaml
	tenantFencerYAML []byte
)

// TenantOptions say whom the tenant roles are for.
type TenantOptions struct {
	// ServiceAccount is NAMESPACE/NAME of the identity of the tenant's
	// kubeconfig.
	ServiceAccount string
	// Fence adds tenant-fencer.yaml (TenantNodeDown's writes).
	Fence bool
}

// Tenant returns the RBAC to apply in a tenant cluster: the ClusterRole of
// tenant-reader.yaml (and of tenant-fencer.yaml with o.Fence), each bound to
// the service account.
func Tenant(o TenantOptions) ([]runtime.Object, error) {
	ns, name, ok := strings.Cut(o.ServiceAccount, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("--service-account %q: want NAMESPACE/NAME, e.g. kube-system/tether-reader", o.ServiceAccount)
	}
	roles, err := TenantRoles(o.Fence)
	if err != nil {
		return nil, err
	}
	var out []runtime.Object
	for _, role := range roles {
		role.TypeMeta = typeMeta("ClusterRole")
		out = append(out, &role, &rbacv1.ClusterRoleBinding{TypeMeta: typeMeta("ClusterRoleBinding"), ObjectMeta: meta(role.Name, ""),
			RoleRef:  roleRef("ClusterRole", role.Name),
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}})
	}
	return out, nil
}

// TenantRoles returns the tenant ClusterRoles: tenant-reader.yaml, and
// tenant-fencer.yaml with fence (the start-up RBAC check asks for exactly
// what they grant).
func TenantRoles(fence bool) ([]rbacv1.ClusterRole, error) {
	files := [][]byte{tenantReaderYAML}
	if fence {
		files = append(files, tenantFencerYAML)
	}
	out := make([]rbacv1.ClusterRole, 0, len(files))
	for _, f := range files {
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal(f, &role); err != nil {
			return nil, fmt.Errorf("rbac: embedded tenant role: %w", err)
		}
		out = append(out, role)
	}
	return out, nil
}
