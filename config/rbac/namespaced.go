package rbac

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Namespaced returns the controller's RBAC for a controller limited to
// o.Namespaces (scope.namespaces), to use instead of config/rbac's
// ClusterRole and ClusterRoleBinding (config/rbac/common still applies):
//
//   - a Role and RoleBinding tether-controller in each namespace, with every
//     rule of config/rbac (and of config/rbac/protection, with o.Protection)
//     that a Role can grant;
//   - a Role and RoleBinding tether-controller-records in the controller's
//     namespace, for the records of cluster-scoped subjects;
//   - a ClusterRole and ClusterRoleBinding tether-controller-namespaced with
//     what a Role cannot grant: reading the KubeVirt CR (feature gates), in
//     KubeVirt's own namespace.
//
// The storage checks' reads (Nodes, PVs, VolumeAttachments, CSIDrivers, and
// every pod on a node) are cluster-wide by nature: they are left out, and
// the controller refuses to start with a storage check enabled on this RBAC.
func Namespaced(o Options) ([]runtime.Object, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	all, err := Rules(o.Protection)
	if err != nil {
		return nil, err
	}
	namespaced, cluster, records := split(all)
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ServiceAccount, Namespace: o.ControllerNamespace}}
	out := []runtime.Object{
		&rbacv1.ClusterRole{TypeMeta: typeMeta("ClusterRole"), ObjectMeta: meta(ClusterRoleName, ""), Rules: cluster},
		&rbacv1.ClusterRoleBinding{TypeMeta: typeMeta("ClusterRoleBinding"), ObjectMeta: meta(ClusterRoleName, ""),
			RoleRef: roleRef("ClusterRole", ClusterRoleName), Subjects: subject},
	}
	role := func(name, ns string, rules []rbacv1.PolicyRule) {
		out = append(out,
			&rbacv1.Role{TypeMeta: typeMeta("Role"), ObjectMeta: meta(name, ns), Rules: rules},
			&rbacv1.RoleBinding{TypeMeta: typeMeta("RoleBinding"), ObjectMeta: meta(name, ns), RoleRef: roleRef("Role", name), Subjects: subject})
	}
	ownScoped := false
	for _, ns := range o.Namespaces {
		role(RoleName, ns, namespaced)
		ownScoped = ownScoped || ns == o.ControllerNamespace
	}
	if !ownScoped {
		role(RecordsRoleName, o.ControllerNamespace, records)
	}
	return out, nil
}

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: kind}
}

func meta(name, ns string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
		"app.kubernetes.io/name": "tether", "app.kubernetes.io/component": "controller",
	}}
}

func roleRef(kind, name string) rbacv1.RoleRef {
	return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: name}
}
