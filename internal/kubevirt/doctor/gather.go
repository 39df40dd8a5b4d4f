package doctor

import (
	"context"
	"errors"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/clients"
	"github.com/tether-dev/tether/internal/kubevirt/check"
	"github.com/tether-dev/tether/internal/kubevirt/observe"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/kubevirt/virtapi"
)

// Sources say where the gatherer reads.
type Sources struct {
	// Config is the infra cluster.
	Config *rest.Config
	// Namespace scopes the VMIs and VMs probed and read for route
	// evidence; "" is every namespace.
	Namespace string
	// Node, when set, is the node about to be drained: the doctor names
	// the VMIs a drain of it takes hot-plugs from.
	Node string
	// Tenants are the tenant clusters to check.
	Tenants []observe.TenantSource
	// Controller, when set, asks whether the controller's account holds
	// what its configuration needs; it is called with the infra config.
	Controller func(ctx context.Context) *ControllerAccess
	// TenantFence, when set, asks a reachable tenant whether the identity
	// of its kubeconfig may fence there.
	TenantFence func(ctx context.Context, t observe.TenantSource) FenceAccess
}

// absentName is the name probed when no object of a kind is in scope.
const absentName = "tether-doctor-absent"

// Gather reads the facts. It only reads, and asks virt-api for dry runs of
// removing a volume no VMI has; what it cannot read it records as unknown.
// The error is for a configuration no client can be built from.
func Gather(ctx context.Context, src Sources) (Facts, error) {
	c, err := clients.New(src.Config)
	if err != nil {
		return Facts{}, err
	}
	var f Facts
	f.Gates, f.GatesError = gates(ctx, c)
	f.HCO = hco(ctx, c)
	var vms kubevirtv1.VirtualMachineList
	var vmis kubevirtv1.VirtualMachineInstanceList
	if err := errors.Join(c.List(ctx, &vms, client.InNamespace(src.Namespace)), c.List(ctx, &vmis, client.InNamespace(src.Namespace))); err != nil {
		// Probe names that do not exist: the gate check still answers.
		f.ScopeError = err.Error()
		vms.Items, vmis.Items = nil, nil
	}
	sub, err := virtapi.NewSubresourceClient(src.Config)
	if err != nil {
		return Facts{}, err
	}
	f.Probes = probes(ctx, sub, src.Namespace, vmis.Items)
	for _, t := range src.Tenants {
		read := observe.ReadTenant(ctx, t, observe.Options{})
		dt := Tenant{Read: read}
		if read.Reachable {
			dt.Route = DriverRoute(vms.Items, vmis.Items, &read)
			dt.DriverVersion, dt.VersionNote = driverVersion(ctx, c, t)
			if src.TenantFence != nil {
				fa := src.TenantFence(ctx, t)
				dt.Fence = &fa
			}
		}
		f.Tenants = append(f.Tenants, dt)
	}
	f.Unpersisted = unpersisted(vms.Items, vmis.Items, f)
	if src.Node != "" {
		f.Drain = drain(ctx, c, src, vmis.Items, f)
	}
	f.Kube = kube(ctx, c)
	if src.Controller != nil {
		f.Controller = src.Controller(ctx)
	}
	return f, nil
}

// drain reads what a drain of src.Node takes from guests: the Node, the
// attachment pods in scope, virt-api-validator, and, of the VMIs already
// listed, those check.FindDrainRisks names on that node.
func drain(ctx context.Context, c client.Reader, src Sources, vmis []kubevirtv1.VirtualMachineInstance, f Facts) *Drain {
	d := &Drain{Node: src.Node, Gates: f.Gates, Guard: observe.EvictionGuard(ctx, c)}
	var node corev1.Node
	switch err := c.Get(ctx, client.ObjectKey{Name: src.Node}, &node); {
	case err == nil:
		d.NodeFound = true
	case !apierrors.IsNotFound(err):
		d.NodeErr = err.Error()
	}
	if f.ScopeError != "" {
		d.Err = f.ScopeError
		return d
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(src.Namespace), client.MatchingLabels{snapshot.AttachmentPodLabel: snapshot.AttachmentPodLabelValue}); err != nil {
		d.Err = "the attachment pods could not be listed: " + err.Error()
		return d
	}
	s := snapshot.Snapshot{FeatureGates: f.Gates, EvictionGuard: d.Guard, AttachmentPods: pods.Items}
	for i := range vmis {
		s.VMIs = append(s.VMIs, snapshot.VMIOf(&vmis[i]))
	}
	for _, r := range check.FindDrainRisks(check.NewInput(snapshot.New(s), check.DefaultPolicy(), time.Now())) {
		if r.Node != src.Node {
			continue
		}
		d.VMIs = append(d.VMIs, DrainVMI{VMI: r.VMI.Namespace + "/" + r.VMI.Name, Pods: strings.Join(r.PodNames(), ", "),
			Volumes: strings.Join(r.Volumes(), ", "), Strategy: r.Strategy, Migratable: string(r.Migratable)})
	}
	return d
}

// gates reads the KubeVirt CR as observe.Gates does, keeping the error.
func gates(ctx context.Context, c client.Reader) (snapshot.FeatureGates, string) {
	var kvs kubevirtv1.KubeVirtList
	if err := c.List(ctx, &kvs); err != nil {
		return snapshot.FeatureGates{}, err.Error()
	}
	if len(kvs.Items) == 0 {
		return snapshot.FeatureGates{}, "there is no KubeVirt object"
	}
	return observe.Gates(ctx, c), ""
}

// hco lists HyperConverged objects; an API that is not served means no
// HCO.
func hco(ctx context.Context, c client.Reader) HCO {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("hco.kubevirt.io/v1beta1")
	l.SetKind("HyperConvergedList")
	err := c.List(ctx, l)
	switch {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return HCO{Known: true}
	case err != nil:
		return HCO{Err: err.Error()}
	case len(l.Items) == 0:
		return HCO{Known: true}
	}
	return HCO{Known: true, Present: true, Name: l.Items[0].GetNamespace() + "/" + l.Items[0].GetName()}
}

// probes asks virt-api to dry-run removing ProbeVolume through each route:
// from a VM-owned VMI (and its VM), a standalone VMI, and a name that does
// not exist where the scope has none.
func probes(ctx context.Context, sub rest.Interface, ns string, vmis []kubevirtv1.VirtualMachineInstance) []Probe {
	var owned, standalone *kubevirtv1.VirtualMachineInstance
	for i := range vmis {
		v := &vmis[i]
		if v.DeletionTimestamp != nil {
			continue
		}
		if o := metav1.GetControllerOf(v); o != nil && o.Kind == "VirtualMachine" {
			if owned == nil || (owned.Status.Phase != kubevirtv1.Running && v.Status.Phase == kubevirtv1.Running) {
				owned = v
			}
		} else if standalone == nil || (standalone.Status.Phase != kubevirtv1.Running && v.Status.Phase == kubevirtv1.Running) {
			standalone = v
		}
	}
	absentNS := ns
	if absentNS == "" {
		absentNS = metav1.NamespaceDefault
	}
	target := func(v *kubevirtv1.VirtualMachineInstance, vmName bool) (string, string, bool) {
		switch {
		case v == nil:
			return absentNS, absentName, false
		case vmName:
			return v.Namespace, metav1.GetControllerOf(v).Name, true
		}
		return v.Namespace, v.Name, true
	}
	var out []Probe
	for _, p := range []struct {
		route Route
		kind  virtapi.Kind
		vmi   *kubevirtv1.VirtualMachineInstance
	}{{RouteVM, virtapi.VM, owned}, {RouteVMIOwned, virtapi.VMI, owned}, {RouteVMIStandalone, virtapi.VMI, standalone}} {
		pns, name, exists := target(p.vmi, p.kind == virtapi.VM)
		err := virtapi.RemoveVolume(ctx, sub, p.kind, pns, name, &kubevirtv1.RemoveVolumeOptions{Name: ProbeVolume, DryRun: virtapi.DryRunAll})
		out = append(out, probeOf(p.route, pns+"/"+name, exists, err))
	}
	return out
}

// probeOf records an answer.
func probeOf(r Route, subject string, exists bool, err error) Probe {
	p := Probe{Route: r, Subject: subject, Exists: exists, Code: 202}
	if err == nil {
		return p
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Code != 0 {
		p.Code, p.Message = int(st.Status().Code), st.Status().Message
		return p
	}
	p.Code, p.Err = 0, err.Error()
	return p
}

// driverVersion reads the image tags of the tenant's KubeVirt CSI driver:
// its controller (a Deployment in the tenant's infra namespace of the
// infra cluster, where the driver's controller usually runs and hot-plugs
// from) and its node plugin (a DaemonSet in the tenant), where the
// identities may list them. The second value says what could not be read.
func driverVersion(ctx context.Context, infra client.Reader, t observe.TenantSource) (string, string) {
	var found, notes []string
	if t.Namespace != "" {
		var deps appsv1.DeploymentList
		switch err := infra.List(ctx, &deps, client.InNamespace(t.Namespace)); {
		case err != nil:
			notes = append(notes, "the infra Deployments in "+t.Namespace+" could not be listed")
		default:
			for _, d := range deps.Items {
				if tag, ok := driverTag(d.Spec.Template.Spec); ok {
					found = append(found, "controller "+tag+" (Deployment "+t.Namespace+"/"+d.Name+")")
				}
			}
		}
	}
	c, err := clients.New(t.Config)
	if err != nil {
		return strings.Join(found, ", "), err.Error()
	}
	var dss appsv1.DaemonSetList
	switch err := c.List(ctx, &dss); {
	case apierrors.IsForbidden(err):
		notes = append(notes, "the tenant's identity may not list DaemonSets")
	case err != nil:
		notes = append(notes, "the tenant's DaemonSets could not be listed: "+err.Error())
	default:
		for _, ds := range dss.Items {
			if tag, ok := driverTag(ds.Spec.Template.Spec); ok {
				found = append(found, "node plugin "+tag+" (DaemonSet "+ds.Namespace+"/"+ds.Name+")")
			}
		}
	}
	if len(found) == 0 && len(notes) == 0 {
		notes = append(notes, "no Deployment or DaemonSet runs a kubevirt-csi-driver image")
	}
	return strings.Join(found, ", "), strings.Join(notes, "; ")
}

// driverTag is the tag of a kubevirt-csi-driver image in spec ("untagged"
// for none).
func driverTag(spec corev1.PodSpec) (string, bool) {
	for _, ct := range spec.Containers {
		if !strings.Contains(ct.Image, "kubevirt-csi-driver") {
			continue
		}
		if i := strings.LastIndex(ct.Image, ":"); i > strings.LastIndex(ct.Image, "/") {
			return ct.Image[i+1:], true
		}
		return "untagged", true
	}
	return "", false
}

// kube reads the kube-controller-manager pod's flags and the Nodes'
// out-of-service taints.
func kube(ctx context.Context, c client.Reader) Kube {
	var k Kube
	var pods corev1.PodList
	switch err := c.List(ctx, &pods, client.InNamespace(metav1.NamespaceSystem), client.MatchingLabels{"component": "kube-controller-manager"}); {
	case err != nil:
		k.ControllerManagerNote = "listing pods in kube-system: " + err.Error()
	case len(pods.Items) == 0:
		k.ControllerManagerNote = "no pod labelled component=kube-controller-manager in kube-system (a managed or out-of-cluster control plane)"
	default:
		for _, ct := range pods.Items[0].Spec.Containers {
			k.ControllerManagerArgs = append(append(k.ControllerManagerArgs, ct.Command...), ct.Args...)
		}
		k.ControllerManagerFound = true
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		k.NodesError = err.Error()
		return k
	}
	k.NodesRead = true
	for _, n := range nodes.Items {
		for _, t := range n.Spec.Taints {
			if t.Key == snapshot.OutOfServiceTaint {
				k.OutOfService = append(k.OutOfService, TaintedNode{Name: n.Name, Ready: snapshot.NodeReady(&n) == corev1.ConditionTrue})
				break
			}
		}
	}
	return k
}

// unpersisted lists, from what the doctor read, the hot-plugs that
// KubeVirt's declarative hot-plug sync removes from running VMIs, with the
// same decision as the UnpersistedHotplug check and the tenants' word on
// who made them.
func unpersisted(vms []kubevirtv1.VirtualMachine, vmis []kubevirtv1.VirtualMachineInstance, f Facts) []Unpersisted {
	s := snapshot.Snapshot{FeatureGates: f.Gates}
	for i := range vms {
		s.VMs = append(s.VMs, snapshot.VMOf(&vms[i]))
	}
	for i := range vmis {
		s.VMIs = append(s.VMIs, snapshot.VMIOf(&vmis[i]))
	}
	for _, t := range f.Tenants {
		s.Tenants = append(s.Tenants, t.Read)
	}
	in := check.NewInput(snapshot.New(s), check.DefaultPolicy(), time.Now())
	var out []Unpersisted
	for _, u := range check.FindUnpersisted(in) {
		if check.NobodyWants(in, u) {
			continue // an orphan: the sync taking it loses nothing
		}
		out = append(out, Unpersisted{VMI: u.VMI.Namespace + "/" + u.VMI.Name, Volume: u.Volume.Name, Claim: check.ClaimFact(u.Volume), Who: check.WhoHotplugged(in, u)})
	}
	return out
}
