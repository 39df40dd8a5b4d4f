package rbac

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// namespacedKinds are the kinds a Role can grant (the API server's scope
// of each, as `kubectl api-resources --namespaced=true` lists them).
var namespacedKinds = []string{"virtualmachines", "virtualmachineinstances", "pods", "persistentvolumeclaims", "datavolumes",
	"controllerrevisions", "virtualmachines/removevolume", "virtualmachineinstances/removevolume", "findings", "findings/status", "events",
	// A namespace is named by itself: a Role in it grants get on it.
	"namespaces"}

func TestNamespaced(t *testing.T) {
	for _, protection := range []bool{false, true} {
		t.Run(fmt.Sprintf("protection=%v", protection), func(t *testing.T) {
			objs, err := Namespaced(Options{Namespaces: []string{"a", "b"}, Protection: protection})
			if err != nil {
				t.Fatal(err)
			}
			all, err := Rules(protection)
			if err != nil {
				t.Fatal(err)
			}
			var roles, cluster []string
			rolesIn := map[string]string{}
			for _, o := range objs {
				switch o := o.(type) {
				case *rbacv1.Role:
					rolesIn[o.Namespace] = o.Name
					if o.Name == RoleName {
						roles = Grants(o.Rules)
					} else if g := Grants(o.Rules); !slices.Equal(g, Grants(recordsOf(all))) {
						t.Errorf("records Role grants %v", g)
					}
				case *rbacv1.ClusterRole:
					cluster = Grants(o.Rules)
				case *rbacv1.RoleBinding:
					if o.RoleRef.Kind != "Role" || o.RoleRef.Name != o.Name || o.Subjects[0].Namespace != "tether-system" {
						t.Errorf("RoleBinding %s/%s: %+v %+v", o.Namespace, o.Name, o.RoleRef, o.Subjects)
					}
				}
			}
			want := map[string]string{"a": RoleName, "b": RoleName, "tether-system": RecordsRoleName}
			if fmt.Sprint(rolesIn) != fmt.Sprint(want) {
				t.Errorf("Roles %v, want %v", rolesIn, want)
			}
			for _, g := range roles {
				res := strings.SplitN(strings.SplitN(g, "/", 2)[1], ":", 2)[0]
				if !slices.Contains(namespacedKinds, res) {
					t.Errorf("the Role grants %s, which a Role cannot grant", g)
				}
			}
			if !slices.Equal(cluster, []string{"kubevirt.io/kubevirts:get", "kubevirt.io/kubevirts:list", "kubevirt.io/kubevirts:watch"}) {
				t.Errorf("ClusterRole grants %v, want reading kubevirts only", cluster)
			}
			// Every rule of config/rbac is in the Role, the ClusterRole, or
			// is a storage check's cluster-wide read.
			for _, g := range Grants(all) {
				res := strings.SplitN(strings.SplitN(g, "/", 2)[1], ":", 2)[0]
				if !slices.Contains(roles, g) && !slices.Contains(cluster, g) && !slices.Contains(storageOnly, res) {
					t.Errorf("%s of config/rbac is lost", g)
				}
			}
			if got := slices.Contains(roles, "/persistentvolumeclaims:patch"); got != protection {
				t.Errorf("patch on PVCs granted=%v with protection=%v", got, protection)
			}
		})
	}
}

func recordsOf(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	_, _, records := split(rules)
	return records
}

func TestNamespaced_ownNamespaceInScope_noRecordsRole(t *testing.T) {
	objs, err := Namespaced(Options{Namespaces: []string{"a", "ctl"}, ControllerNamespace: "ctl"})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if r, ok := o.(*rbacv1.Role); ok && r.Name == RecordsRoleName {
			t.Errorf("a records Role in %s although the Role there grants the records", r.Namespace)
		}
	}
}

func TestNamespaced_badInput(t *testing.T) {
	cases := []struct {
		name string
		o    Options
		want string
	}{
		{"no namespace -> names the flag", Options{}, "--namespace"},
		{"invalid name -> names it", Options{Namespaces: []string{"Tenant_A"}}, `"Tenant_A" is not a valid namespace name`},
		{"twice -> says so", Options{Namespaces: []string{"a", "a"}}, `"a" is named twice`},
		{"invalid controller namespace -> names it", Options{Namespaces: []string{"a"}, ControllerNamespace: "-x"}, `"-x" is not a valid`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Namespaced(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %s", err, tc.want)
			}
		})
	}
}
