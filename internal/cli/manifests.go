package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/tether-dev/tether/config/rbac"

	"github.com/tether-dev/tether/internal/protect"
)

// newManifests is `tether manifests`: `protection`, the admission policy that
// refuses to delete protected objects, and `rbac`, the namespaced RBAC of
// the controller.
func newManifests() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "manifests",
		Short: "Print manifests to apply with kubectl",
	}
	po := &protectionManifestOptions{}
	prot := &cobra.Command{
		Use:   "protection",
		Short: "Print a ValidatingAdmissionPolicy refusing DELETE of objects labelled " + protect.DeleteProtectionLabel + "=true",
		Long: `Prints a ValidatingAdmissionPolicy and its binding that refuse the deletion of
PVCs, DataVolumes and ControllerRevisions labelled ` + protect.DeleteProtectionLabel + `=true, with a
message saying how to release the protection. The garbage collector and the namespace
controller are always let through (a namespace being deleted can go); --allow adds more
user names. Apply with: tether manifests protection | kubectl apply -f -`,
		Args: cobra.NoArgs,
	}
	prot.Flags().StringArrayVar(&po.allow, "allow", nil, "also let this user through, e.g. system:kube-controller-manager when it runs without --use-service-account-credentials (repeatable)")
	cmd.AddCommand(bind(prot, po), newManifestsRBAC(), newManifestsTenant())
	return cmd
}

// protectionManifestOptions are `tether manifests protection`'s.
type protectionManifestOptions struct {
	allow []string
	out   io.Writer
}

func (o *protectionManifestOptions) Validate() error { return nil }

func (o *protectionManifestOptions) Complete(cmd *cobra.Command) error {
	o.out = cmd.OutOrStdout()
	return nil
}

// Run prints the policy and its binding.
func (o *protectionManifestOptions) Run(context.Context) error {
	p, b := protect.Policy(protect.PolicyOptions{Allow: o.allow})
	for _, obj := range []any{p, b} {
		data, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		fmt.Fprintf(o.out, "---\n%s", data)
	}
	return nil
}

// newManifestsRBAC is `tether manifests rbac`: kustomize cannot repeat a
// Role per namespace, so the namespaced variant of config/rbac is printed.
func newManifestsRBAC() *cobra.Command {
	o := &rbacManifestOptions{}
	cmd := &cobra.Command{
		Use:   "rbac",
		Short: "Print Roles per namespace for a controller limited to scope.namespaces",
		Long: `Prints the RBAC of ` + "`tether controller`" + ` for a configuration whose scope.namespaces
names the --namespace flags: a Role and RoleBinding in each namespace instead of the
cluster-wide ClusterRole of config/rbac, a Role in the controller's namespace for its
records, and a small ClusterRole for what a Role cannot grant (reading the KubeVirt CR).
--protection adds the finalizer patches of config/rbac/protection in those namespaces.
The storage checks read cluster-wide and need config/rbac instead. Use it with
config/rbac/common (ServiceAccount, leader election, metrics), as config/namespaced does:

  tether manifests rbac --namespace tenant-a --namespace tenant-b | kubectl apply -f -`,
		Args: cobra.NoArgs,
	}
	fs := cmd.Flags()
	fs.StringArrayVar(&o.Namespaces, "namespace", nil, "a namespace of scope.namespaces (repeatable, at least one)")
	fs.StringVar(&o.ControllerNamespace, "controller-namespace", "tether-system", "the namespace the controller runs in (its ServiceAccount and records)")
	fs.BoolVar(&o.Protection, "protection", false, "also grant protection's finalizer patches (protection.enabled: true)")
	return bind(cmd, o)
}

// newManifestsTenant is `tether manifests tenant`: the RBAC to apply in a
// tenant cluster for the identity of the kubeconfig tether is given.
func newManifestsTenant() *cobra.Command {
	o := &tenantManifestOptions{}
	cmd := &cobra.Command{
		Use:   "tenant",
		Short: "Print the RBAC to apply in a tenant cluster (reading; fencing with --fence)",
		Long: `Prints, for a TENANT cluster (a cluster running inside the VMs), the ClusterRoles tether
needs there, bound to the service account of the kubeconfig tether is given for it:
tether-tenant-reader (config/rbac/tenant-reader.yaml: the evidence tether reads) and, with
--fence, tether-tenant-fencer (config/rbac/tenant-fencer.yaml: get and update on Nodes and
list on Pods, for TenantNodeDown's out-of-service taint and its careful removal). Apply it in
the tenant:

  tether manifests tenant --service-account kube-system/tether-reader --fence | kubectl --context tenant apply -f -`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&o.ServiceAccount, "service-account", "kube-system/tether-reader", "NAMESPACE/NAME of the tenant kubeconfig's service account")
	cmd.Flags().BoolVar(&o.Fence, "fence", false, "also grant fencing (TenantNodeDown): get and update on Nodes, list on Pods")
	return bind(cmd, o)
}

// tenantManifestOptions are `tether manifests tenant`'s.
type tenantManifestOptions struct {
	rbac.TenantOptions
	out io.Writer
}

func (o *tenantManifestOptions) Validate() error {
	_, err := rbac.Tenant(o.TenantOptions)
	return err
}

func (o *tenantManifestOptions) Complete(cmd *cobra.Command) error {
	o.out = cmd.OutOrStdout()
	return nil
}

// Run prints the tenant RBAC.
func (o *tenantManifestOptions) Run(context.Context) error {
	objs, err := rbac.Tenant(o.TenantOptions)
	if err != nil {
		return err
	}
	return printObjects(o.out, objs)
}

// rbacManifestOptions are `tether manifests rbac`'s.
type rbacManifestOptions struct {
	rbac.Options
	out io.Writer
}

func (o *rbacManifestOptions) Validate() error { return nil }

func (o *rbacManifestOptions) Complete(cmd *cobra.Command) error {
	o.out = cmd.OutOrStdout()
	return nil
}

// Run prints the namespaced RBAC (rbac.Namespaced names what is missing).
func (o *rbacManifestOptions) Run(context.Context) error {
	objs, err := rbac.Namespaced(o.Options)
	if err != nil {
		return err
	}
	return printObjects(o.out, objs)
}

// printObjects writes objs as a YAML stream, without the empty fields a
// typed object carries (creationTimestamp: null).
func printObjects(w io.Writer, objs []runtime.Object) error {
	for _, obj := range objs {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return err
		}
		unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
		data, err := yaml.Marshal(u)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "---\n%s", data)
	}
	return nil
}
