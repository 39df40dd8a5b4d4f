package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/config"
	"github.com/tether-dev/tether/internal/controller"
	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	kvdoctor "github.com/tether-dev/tether/internal/kubevirt/doctor"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	osdoctor "github.com/tether-dev/tether/internal/openstack/doctor"
	osobserve "github.com/tether-dev/tether/internal/openstack/observe"
)

// doctorExitHelp is the exit-code contract of both doctor commands.
const doctorExitHelp = `Output: one line per check, OK, WARN or FAIL, the subject, why, and the fix;
-o json prints a list of {check, subject, status, why, fix, source}, where
source is the public issue, advisory or upstream source the check comes from
(docs/doctor.md lists them all). What cannot be read or proved is WARN, never OK.
Exit code: 0 every line OK, 1 some line WARN (and none FAIL), 2 some line FAIL
or an error.`

// newDoctor is `tether doctor`: what tether's repairs on KubeVirt depend
// on, checked line by line.
func newDoctor() *cobra.Command {
	o := &doctorOptions{}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check what the repairs depend on: hot-plug gates and routes, tenants, force detach, RBAC",
		Long: `Checks what tether's repairs depend on and says, per line, OK, WARN or FAIL:
KubeVirt's effective hot-plug gates and what the next KubeVirt or HyperConverged
upgrade changes about them; virt-api's answer to a server-side dry run of
removevolume through the VM-level route and the VMI-level route, for a VM-owned
and a standalone VMI (it asks to remove a volume that does not exist, so
nothing can change); each --tenant's reachability, read rights, node mapping,
CSIDriver, driver version and the route its driver hot-plugs through; the
attach/detach controller's force-detach timer and the out-of-service taint;
and whether the controller's account holds what its configuration needs (the
Deployment in --controller-namespace and its ConfigMap, or --controller-config
and --controller-account). With --node NODE, before kubectl drain NODE: the
running VMIs on NODE whose hot-plug attachment pods the drain may evict before
the VMIs have left, unless KubeVirt's guard refuses it. It changes nothing.

` + doctorExitHelp,
		Args: cobra.NoArgs,
	}
	fs := cmd.Flags()
	o.scope.clusterFlags.register(fs, "unused by doctor")
	_ = fs.MarkHidden("selector")
	fs.StringArrayVar(&o.scope.tenants, "tenant", nil, "tenant cluster to check: NAME=KUBECONFIG[:NAMESPACE] (repeatable), as for audit")
	fs.StringVar(&o.scope.tenantDriver, "tenant-driver", "", "the tenants' KubeVirt CSI driver name (default csi.kubevirt.io)")
	fs.BoolVar(&o.scope.matchNodesByName, "match-tenant-nodes-by-name", false, "as for audit: a tenant node that names no infra VM is the VM of its own name")
	fs.StringVar(&o.node, "node", "", "the node about to be drained: name the running VMIs whose hot-plug attachment pods a drain of it evicts before they have left (line drain.hotplug; run it before kubectl drain)")
	fs.StringVar(&o.controllerConfig, "controller-config", "", "check the controller's RBAC for this configuration file (as given to tether controller --config)")
	fs.StringVar(&o.controllerAccount, "controller-account", v1alpha1.DefaultNamespace+":tether-controller", "the controller's service account, NAMESPACE:NAME, for --controller-config")
	fs.StringVar(&o.scope.controllerNamespace, "controller-namespace", v1alpha1.DefaultNamespace, "without --controller-config: where to find the controller's Deployment (labelled app.kubernetes.io/name=tether, component=controller), whose account and ConfigMap are checked")
	return bind(cmd, o)
}

// doctorOptions are `tether doctor`'s.
type doctorOptions struct {
	scope             scopeFlags
	node              string
	controllerConfig  string
	controllerAccount string

	// Set by Complete.
	src    kvdoctor.Sources
	stdout io.Writer
}

// Validate checks the flags alone.
func (o *doctorOptions) Validate() error {
	if err := o.scope.checkOutput(); err != nil {
		return err
	}
	if err := o.scope.checkNamespaces(); err != nil {
		return err
	}
	if o.node != "" {
		if errs := validation.IsDNS1123Subdomain(o.node); len(errs) > 0 {
			return fmt.Errorf("--node %q is not a node name: %s", o.node, strings.Join(errs, "; "))
		}
	}
	if o.controllerConfig != "" {
		ns, name, ok := strings.Cut(o.controllerAccount, ":")
		if !ok || ns == "" || name == "" {
			return fmt.Errorf("--controller-account %q: use NAMESPACE:NAME, e.g. tether-system:tether-controller", o.controllerAccount)
		}
	}
	return nil
}

// Complete loads the kubeconfigs and the controller's configuration.
func (o *doctorOptions) Complete(cmd *cobra.Command) error {
	o.stdout = cmd.OutOrStdout()
	cfg, ns, err := o.scope.restConfig()
	if err != nil {
		return err
	}
	o.src = kvdoctor.Sources{Config: cfg, Namespace: ns, Node: o.node}
	for _, spec := range o.scope.tenants {
		t, err := o.scope.tenant(spec, ns)
		if err != nil {
			return err
		}
		o.src.Tenants = append(o.src.Tenants, t)
	}
	o.src.TenantFence = tenantFenceAccess
	switch {
	case o.controllerConfig != "":
		cc, err := config.Load(o.controllerConfig)
		if err != nil {
			return fmt.Errorf("--controller-config: %w", err)
		}
		o.src.Controller = controllerAccess(cfg, cc, o.controllerAccount)
	default:
		o.src.Controller = deployedControllerAccess(cfg, o.scope.controllerNamespace)
	}
	return nil
}

// tenantFenceAccess asks a tenant whether the identity of its kubeconfig
// holds what TenantNodeDown needs there to fence.
func tenantFenceAccess(ctx context.Context, t observe.TenantSource) kvdoctor.FenceAccess {
	cs, err := kubernetes.NewForConfig(t.Config)
	if err != nil {
		return kvdoctor.FenceAccess{Err: err.Error()}
	}
	ds, err := controller.TenantFenceAccessOf(ctx, cs)
	if err != nil {
		return kvdoctor.FenceAccess{Err: err.Error()}
	}
	fa := kvdoctor.FenceAccess{Missing: []string{}}
	for _, d := range ds {
		fa.Missing = append(fa.Missing, d.Grant)
	}
	return fa
}

// controllerLabels select the controller's Deployment (config/manager and
// the chart alike).
var controllerLabels = map[string]string{"app.kubernetes.io/name": "tether", "app.kubernetes.io/component": "controller"}

// deployedControllerAccess finds the controller's Deployment in namespace
// ns and checks its service account against the configuration its
// ConfigMap holds (config.yaml); where there is no such Deployment, there
// is nothing to check (nil). A Deployment whose configuration cannot be
// read is a line saying so.
func deployedControllerAccess(cfg *rest.Config, ns string) func(context.Context) *kvdoctor.ControllerAccess {
	return func(ctx context.Context) *kvdoctor.ControllerAccess {
		c, err := clients.New(cfg)
		if err != nil {
			return &kvdoctor.ControllerAccess{Account: "in namespace " + ns, Err: err.Error()}
		}
		var ds appsv1.DeploymentList
		if err := c.List(ctx, &ds, client.InNamespace(ns), client.MatchingLabels(controllerLabels)); err != nil || len(ds.Items) == 0 {
			return nil
		}
		spec := ds.Items[0].Spec.Template.Spec
		account := ns + ":" + cmp.Or(spec.ServiceAccountName, "default")
		fail := func(why string) *kvdoctor.ControllerAccess {
			return &kvdoctor.ControllerAccess{Account: "system:serviceaccount:" + account,
				Err: fmt.Sprintf("the configuration of Deployment %s/%s could not be read: %s (or pass --controller-config)", ns, ds.Items[0].Name, why)}
		}
		var cmName string
		for _, v := range spec.Volumes {
			if v.ConfigMap != nil {
				cmName = v.ConfigMap.Name
			}
		}
		if cmName == "" {
			return fail("it mounts no ConfigMap")
		}
		var cm corev1.ConfigMap
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: cmName}, &cm); err != nil {
			return fail(err.Error())
		}
		cc, err := config.Parse([]byte(cm.Data["config.yaml"]))
		if err != nil {
			return fail("ConfigMap " + cmName + ": " + err.Error())
		}
		return controllerAccess(cfg, cc, account)(ctx)
	}
}

// controllerAccess asks, as the doctor's caller, whether the account
// NAMESPACE:NAME holds what cc needs.
func controllerAccess(cfg *rest.Config, cc *config.Config, account string) func(context.Context) *kvdoctor.ControllerAccess {
	ns, name, _ := strings.Cut(account, ":")
	user := "system:serviceaccount:" + ns + ":" + name
	return func(ctx context.Context) *kvdoctor.ControllerAccess {
		a := &kvdoctor.ControllerAccess{Account: user, Fences: len(cc.Tenants) > 0 && cc.Enabled(check.TenantNodeDown) && !cc.DryRun}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			a.Err = err.Error()
			return a
		}
		groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
		ds, asked, err := controller.AccessOf(ctx, cs, cc, ns, user, groups)
		if err != nil {
			a.Err = err.Error()
			return a
		}
		a.Asked = asked
		for _, d := range ds {
			where := "cluster-wide"
			if d.Namespace != "" {
				where = "in namespace " + d.Namespace
			}
			a.Missing = append(a.Missing, kvdoctor.MissingGrant{Feature: d.Feature, Grant: d.Grant, Where: where, Fix: d.Fix, Optional: d.Optional})
		}
		return a
	}
}

// Run gathers, decides and prints.
func (o *doctorOptions) Run(ctx context.Context) error {
	f, err := kvdoctor.Gather(ctx, o.src)
	if err != nil {
		return err
	}
	return printDoctor(o.stdout, o.scope.output, kvdoctor.Decide(f))
}

// printDoctor writes the lines and returns the doctor's exit code.
func printDoctor(w io.Writer, format string, lines []drift.Line) error {
	if lines == nil {
		lines = []drift.Line{}
	}
	switch format {
	case "json", "yaml":
		if err := encode(w, format, lines); err != nil {
			return err
		}
	default:
		counts := map[drift.Status]int{}
		for _, l := range lines {
			counts[l.Status]++
			text := fmt.Sprintf("%-4s  %s: %s.", l.Status, l.Subject, strings.TrimSuffix(l.Why, "."))
			if l.Fix != "" {
				text += " Fix: " + strings.TrimSuffix(l.Fix, ".") + "."
			}
			if _, err := fmt.Fprintln(w, text); err != nil {
				return err
			}
		}
		fmt.Fprintf(w, "\n%d OK, %d WARN, %d FAIL\n", counts[drift.StatusOK], counts[drift.StatusWarn], counts[drift.StatusFail])
	}
	if code := drift.DoctorExit(lines); code != ExitOK {
		return exitError{code}
	}
	return nil
}

// newOpenStackDoctor is `tether openstack doctor`: what tether's repairs
// on OpenStack depend on, checked line by line.
func newOpenStackDoctor() *cobra.Command {
	o := &osDoctorOptions{}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check what the repairs depend on: releases, microversions, admin rights, Cinder's attachment guard, Nova's service token",
		Long: `Checks what tether's OpenStack repairs depend on and says, per line, OK, WARN or
FAIL: Nova's and Cinder's releases (from their maximum microversions), the
microversions tether needs (compute 2.89, block-storage 3.44), the admin rights,
whether Cinder's guard of attachments Nova uses is on (CVE-2023-2088), and
whether Nova can detach under it (it must send its service token; a Nova that
does not cannot detach at all). Nova's configuration cannot be read through
the API: the service-token line decides from Nova's recent detach actions,
and is WARN when they prove nothing.
It changes nothing. --probe-attachment-guard VOLUME_ID (an available volume
with no attachments) proves the guard with one os-detach of an attachment ID
that does not exist: Cinder refuses it when the guard is on, and has nothing
to detach when it is off.

` + doctorExitHelp,
		Args: cobra.NoArgs,
	}
	fs := cmd.Flags()
	fs.StringVar(&o.cloud, "os-cloud", os.Getenv("OS_CLOUD"), "the cloud in clouds.yaml (default $OS_CLOUD)")
	fs.StringVarP(&o.output, "output", "o", "table", "output format: table, json or yaml")
	fs.StringVar(&o.gather.GuardVolume, "probe-attachment-guard", "", "prove Cinder's attachment guard with this available volume that has no attachments")
	fs.IntVar(&o.gather.Servers, "servers", 50, "read the instance actions of at most this many servers, the most recently updated first")
	return bind(cmd, o)
}

// osDoctorOptions are `tether openstack doctor`'s.
type osDoctorOptions struct {
	cloud, output string
	gather        osdoctor.Options

	// Set by Complete.
	clients *osobserve.Clients
	stdout  io.Writer
}

// Validate checks the flags alone.
func (o *osDoctorOptions) Validate() error {
	switch o.output {
	case "table", "json", "yaml":
	default:
		return fmt.Errorf("--output %q is not supported here: use table, json or yaml", o.output)
	}
	if o.gather.Servers <= 0 {
		return fmt.Errorf("--servers must be positive, got %d", o.gather.Servers)
	}
	if o.cloud == "" {
		return fmt.Errorf("no cloud named: pass --os-cloud NAME or set OS_CLOUD, naming a cloud of your clouds.yaml")
	}
	return nil
}

// Complete connects to the cloud.
func (o *osDoctorOptions) Complete(cmd *cobra.Command) error {
	o.stdout = cmd.OutOrStdout()
	c, err := osobserve.Connect(cmd.Context(), osobserve.ConnectOptions{Cloud: o.cloud})
	o.clients = c
	return err
}

// Run gathers, decides and prints.
func (o *osDoctorOptions) Run(ctx context.Context) error {
	return printDoctor(o.stdout, o.output, osdoctor.Decide(osdoctor.Gather(ctx, o.clients, o.gather)))
}
