// Package rbac holds the controller's RBAC as config/rbac defines it
// (role.yaml and the opt-in protection/role.yaml, embedded here), and
// derives from those same rules the namespaced variant that
// `tether manifests rbac` prints: Roles in each scoped namespace instead of
// cluster-wide grants, where the kinds allow it.
//
// The YAML files are the one definition; this package never adds a rule
// they do not hold.
package rbac

import (
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Names of the controller's account and of the objects Namespaced returns.
const (
	ServiceAccount = "tether-controller"
	// ClusterRoleName is the small ClusterRole of the namespaced variant.
	ClusterRoleName = "tether-controller-namespaced"
	// RoleName is the Role (and RoleBinding) in each scoped namespace.
	RoleName = "tether-controller"
	// RecordsRoleName is the Role in the controller's own namespace: the
	// records of cluster-scoped subjects live there.
	RecordsRoleName = "tether-controller-records"
)

var (
	//go:embed role.yaml
	baseRole []byte
	//go:embed protection/role.yaml
	protectionRole []byte
)

// clusterOnly are the kinds a Role cannot grant: cluster-scoped kinds, and
// the KubeVirt CR, which lives in KubeVirt's own namespace (outside any
// scope) and is read wherever it is.
var clusterOnly = []string{"kubevirts"}

// storageOnly are cluster-scoped kinds only the storage checks read. The
// storage checks also list the pods on a node in every namespace, so they
// cannot run with namespaced RBAC: the namespaced variant leaves these out.
var storageOnly = []string{"nodes", "persistentvolumes", "volumeattachments", "csidrivers"}

// records are the controller's own kinds, also granted in its namespace.
const recordsGroup = "tether.dev"

// Options choose the namespaced variant.
type Options struct {
	// Namespaces are scope.namespaces of the controller's configuration.
	Namespaces []string
	// ControllerNamespace is where the controller runs (default
	// tether-system).
	ControllerNamespace string
	// Protection adds the rules of config/rbac/protection.
	Protection bool
}

// rules returns the ClusterRole rules of file.
func rules(file []byte) ([]rbacv1.PolicyRule, error) {
	doc, _, _ := strings.Cut(string(file), "\n---")
	var cr rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict([]byte(doc), &cr); err != nil {
		return nil, fmt.Errorf("rbac: embedded role: %w", err)
	}
	return cr.Rules, nil
}

// Rules returns the rules of config/rbac's ClusterRole, plus those of
// config/rbac/protection when protection is set.
func Rules(protection bool) ([]rbacv1.PolicyRule, error) {
	out, err := rules(baseRole)
	if err != nil || !protection {
		return out, err
	}
	p, err := rules(protectionRole)
	return append(out, p...), err
}

// validate checks the options and fills the default.
func (o *Options) validate() error {
	if len(o.Namespaces) == 0 {
		return errors.New("name at least one namespace (--namespace NS, repeatable): the namespaces of scope.namespaces in the controller's configuration")
	}
	if o.ControllerNamespace == "" {
		o.ControllerNamespace = "tether-system"
	}
	for _, ns := range append([]string{o.ControllerNamespace}, o.Namespaces...) {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("namespace %q is not a valid namespace name: %s", ns, strings.Join(errs, "; "))
		}
	}
	for i, ns := range o.Namespaces {
		if slices.Contains(o.Namespaces[:i], ns) {
			return fmt.Errorf("namespace %q is named twice", ns)
		}
	}
	return nil
}

// split sorts rules into those a Role in each scoped namespace can grant,
// those that must stay cluster-wide, and the records' rules (for the
// controller's namespace).
func split(in []rbacv1.PolicyRule) (namespaced, cluster, records []rbacv1.PolicyRule) {
	for _, r := range in {
		var ns, cl []string
		for _, res := range r.Resources {
			switch {
			case slices.Contains(storageOnly, res):
			case slices.Contains(clusterOnly, res):
				cl = append(cl, res)
			default:
				ns = append(ns, res)
			}
		}
		if len(ns) > 0 {
			nr := *r.DeepCopy()
			nr.Resources = ns
			namespaced = append(namespaced, nr)
			if slices.Contains(r.APIGroups, recordsGroup) {
				records = append(records, nr)
			}
		}
		if len(cl) > 0 {
			cr := *r.DeepCopy()
			cr.Resources = cl
			cluster = append(cluster, cr)
		}
	}
	return namespaced, cluster, records
}

// Grants flattens rules into sorted, distinct "group/resource:verb" strings
// (the core group is empty), for comparing what two sets of rules allow.
func Grants(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, g+"/"+res+":"+v)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
