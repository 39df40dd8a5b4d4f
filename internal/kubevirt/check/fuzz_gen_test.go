package check

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// gen turns fuzz bytes into a snapshot and a policy. Names come from small
// pools so that objects collide and refer to each other; every optional
// field is sometimes nil. Reading past the end yields zeros.
type gen struct {
	b []byte
	i int
}

func (g *gen) byte() byte {
	if g.i >= len(g.b) {
		return 0
	}
	v := g.b[g.i]
	g.i++
	return v
}

func (g *gen) bool() bool  { return g.byte()&1 == 1 }
func (g *gen) n(k int) int { return int(g.byte()) % k }
func (g *gen) of(pool ...string) string {
	return pool[g.n(len(pool))]
}

var (
	poolNS      = []string{"default", "default", "other", ""}
	poolName    = []string{"a", "b", "c", ""}
	poolVolume  = []string{"v1", "v2", "pvc-1", ""}
	poolUID     = []string{"u1", "u2", "", "u3"}
	poolPod     = []string{"hp-volume-a", "hp-volume-b", "hp-volume-c", ""}
	poolPhase   = []string{"Ready", "Ready", "Ready", "Detaching", "AttachedToNode", "", "MountedToPod", "Ready"}
	poolVMPhase = []string{"Running", "Running", "Running", "Scheduled", "Failed", ""}
	// Tenant node names: some are VM names, some are not.
	poolTenantNode = []string{"a", "b", "w-0", "w-1"}
	// Finalizers that hold PVCs, DataVolumes, VMs and pods on real clusters.
	poolFinalizer = []string{"kubernetes.io/pvc-protection", "tether.dev/in-use", "foregroundDeletion", "kubevirt.io/virtualMachineControllerFinalize"}
)

func (g *gen) time() *metav1.Time {
	if !g.bool() {
		return nil
	}
	t := metav1.NewTime(fixture.Epoch().Add(time.Duration(g.n(120)) * time.Minute))
	return &t
}

func (g *gen) meta(names []string, seen map[snapshot.Key]bool) (metav1.ObjectMeta, bool) {
	m := metav1.ObjectMeta{Namespace: g.of(poolNS...), Name: g.of(names...), UID: types.UID(g.of(poolUID...))}
	k := snapshot.Key{Namespace: m.Namespace, Name: m.Name}
	if seen[k] {
		return m, false
	}
	seen[k] = true
	if g.n(4) == 0 {
		m.DeletionTimestamp = g.time()
	}
	if m.DeletionTimestamp != nil {
		// Kubernetes removes an object whose deletion is requested once it
		// has no finalizer left, so every Terminating object listed holds at
		// least one: held by protection, by a controller, or by tether.
		m.Finalizers = []string{g.of(poolFinalizer...)}
	}
	if g.n(4) != 0 {
		m.CreationTimestamp = metav1.NewTime(fixture.Epoch().Add(time.Duration(g.n(200)) * time.Minute))
	}
	if g.bool() {
		m.Labels = map[string]string{"cluster": g.of("c1", "c2")}
	}
	controller := false
	for i := g.n(3); i > 0; i-- {
		ref := g.ownerRef()
		if ref.Controller != nil && *ref.Controller {
			if controller {
				// The API server accepts at most one controller reference.
				no := false
				ref.Controller = &no
			}
			controller = true
		}
		m.OwnerReferences = append(m.OwnerReferences, ref)
	}
	return m, true
}

func (g *gen) ownerRef() metav1.OwnerReference {
	ref := metav1.OwnerReference{
		APIVersion: g.of("kubevirt.io/v1", "", "example.com/v1", "v1"),
		Kind:       g.of("VirtualMachine", "VirtualMachine", "VirtualMachineInstance", "Pod", "VirtualMachineInstanceReplicaSet"),
		Name:       g.of(poolName...),
		UID:        types.UID(g.of(poolUID...)),
	}
	switch g.n(4) {
	case 0:
		no := false
		ref.Controller = &no
	case 1:
	default:
		yes := true
		ref.Controller = &yes
	}
	return ref
}

func (g *gen) volumes() []kubevirtv1.Volume {
	var out []kubevirtv1.Volume
	for i := g.n(4); i > 0; i-- {
		v := kubevirtv1.Volume{Name: g.of(poolVolume...)}
		switch g.n(3) {
		case 0:
			v.PersistentVolumeClaim = &kubevirtv1.PersistentVolumeClaimVolumeSource{Hotpluggable: g.bool()}
			v.PersistentVolumeClaim.ClaimName = g.of(poolVolume...)
		case 1:
			v.DataVolume = &kubevirtv1.DataVolumeSource{Name: g.of(poolVolume...), Hotpluggable: g.bool()}
		}
		out = append(out, v)
	}
	return out
}

func (g *gen) vm(seen map[snapshot.Key]bool) (kubevirtv1.VirtualMachine, bool) {
	m, ok := g.meta(poolName, seen)
	vm := kubevirtv1.VirtualMachine{ObjectMeta: m}
	if g.n(4) != 0 {
		vm.Spec.Template = &kubevirtv1.VirtualMachineInstanceTemplateSpec{}
		vm.Spec.Template.Spec.Volumes = g.volumes()
		if g.bool() {
			v := kubevirtv1.Volume{Name: g.of(poolVolume...)}
			v.PersistentVolumeClaim = &kubevirtv1.PersistentVolumeClaimVolumeSource{Hotpluggable: true}
			v.PersistentVolumeClaim.ClaimName = v.Name
			vm.Spec.Template.Spec.Volumes = append(vm.Spec.Template.Spec.Volumes, v)
		}
	}
	for i := g.n(3); i > 0; i-- {
		var r kubevirtv1.VirtualMachineVolumeRequest
		switch g.n(3) {
		case 0:
			r.AddVolumeOptions = &kubevirtv1.AddVolumeOptions{Name: g.of(poolVolume...)}
		case 1:
			r.RemoveVolumeOptions = &kubevirtv1.RemoveVolumeOptions{Name: g.of(poolVolume...)}
		}
		vm.Status.VolumeRequests = append(vm.Status.VolumeRequests, r)
	}
	return vm, ok
}

func (g *gen) vmi(seen map[snapshot.Key]bool, vms []snapshot.VM) (kubevirtv1.VirtualMachineInstance, bool) {
	var m metav1.ObjectMeta
	var vm *snapshot.VM
	ok := false
	if len(vms) > 0 && g.bool() {
		// Coherent: the VMI of an existing VM, as the VM controller makes it.
		vm = &vms[g.n(len(vms))]
		k := snapshot.Key{Namespace: vm.Namespace, Name: vm.Name}
		m, ok = metav1.ObjectMeta{Namespace: vm.Namespace, Name: vm.Name, UID: types.UID(g.of(poolUID...))}, !seen[k]
		seen[k] = true
		yes := true
		m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: vm.Name, UID: vm.UID, Controller: &yes}}
	} else {
		m, ok = g.meta(poolName, seen)
	}
	vmi := kubevirtv1.VirtualMachineInstance{ObjectMeta: m}
	vmi.Spec.Volumes = g.volumes()
	vmi.Status.Phase = kubevirtv1.VirtualMachineInstancePhase(g.of(poolVMPhase...))
	names := map[string]bool{}
	for i := g.n(4); i > 0; i-- {
		vs := kubevirtv1.VolumeStatus{Name: g.of(poolVolume...), Phase: kubevirtv1.VolumePhase(g.of(poolPhase...))}
		if names[vs.Name] {
			continue // the API keeps one status per volume
		}
		names[vs.Name] = true
		if g.n(4) != 0 {
			vs.HotplugVolume = &kubevirtv1.HotplugVolumeStatus{AttachPodName: g.of(poolPod...), AttachPodUID: types.UID(g.of(poolUID...))}
		}
		if g.bool() {
			vs.PersistentVolumeClaimInfo = &kubevirtv1.PersistentVolumeClaimInfo{ClaimName: g.of(poolVolume...)}
		}
		vmi.Status.VolumeStatus = append(vmi.Status.VolumeStatus, vs)
		if g.bool() {
			// Coherent: the spec volume a real hot-plug has.
			v := kubevirtv1.Volume{Name: vs.Name}
			v.PersistentVolumeClaim = &kubevirtv1.PersistentVolumeClaimVolumeSource{Hotpluggable: true}
			v.PersistentVolumeClaim.ClaimName = vs.Name
			vmi.Spec.Volumes = append(vmi.Spec.Volumes, v)
		}
	}
	if vm != nil && vm.Spec.Template != nil && len(vmi.Status.VolumeStatus) > 0 && g.bool() {
		// Coherent: the VM spec lists a hot-plugged volume (addvolume --persist).
		v := kubevirtv1.Volume{Name: vmi.Status.VolumeStatus[0].Name}
		v.PersistentVolumeClaim = &kubevirtv1.PersistentVolumeClaimVolumeSource{Hotpluggable: true}
		v.PersistentVolumeClaim.ClaimName = v.Name
		vm.Spec.Template.Spec.Volumes = append(vm.Spec.Template.Spec.Volumes, v)
	}
	if g.n(4) == 0 {
		vmi.Status.MigrationState = &kubevirtv1.VirtualMachineInstanceMigrationState{
			Completed: g.bool(), Failed: g.bool(), StartTimestamp: g.time(),
			TargetAttachmentPodUID: types.UID(g.of(poolUID...)),
		}
	}
	if g.bool() {
		vmi.Status.ActivePods = map[types.UID]string{types.UID(g.of(poolUID...)): "node-1"}
	}
	return vmi, ok
}

func (g *gen) pod(seen map[snapshot.Key]bool) (corev1.Pod, bool) {
	m, ok := g.meta(poolPod, seen)
	pod := corev1.Pod{ObjectMeta: m}
	for i := g.n(3); i > 0; i-- {
		v := corev1.Volume{Name: g.of(poolVolume...)}
		if g.n(4) != 0 {
			v.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: g.of(poolVolume...)}
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, v)
	}
	return pod, ok
}

// tenantNode builds a tenant Node as Cluster API's KubeVirt provider, an
// operator or the driver's node plugin may leave it: each way of naming its
// infra VM present or not, agreeing or not; node names may or may not be
// VM names.
func (g *gen) tenantNode(name string) snapshot.TenantNode {
	n := snapshot.TenantNode{Name: name}
	vm := g.of(poolName...)
	if g.n(3) != 0 {
		n.ProviderID = "kubevirt://" + vm
		n.ClusterNamespace = g.of(poolNS...)
	}
	if g.n(4) == 0 {
		n.InfraVMName, n.InfraVMNamespace = g.of(vm, vm, "b"), g.of(poolNS...)
	}
	if g.n(3) == 0 {
		n.CSINodeID = g.of(poolNS...) + "/" + g.of(vm, vm, vm, "c")
	}
	for j := g.n(3); j > 0; j-- {
		n.InUse = append(n.InUse, g.of(poolVolume...))
	}
	// The Ready condition follows from what was drawn (no draw of its own,
	// so the worlds of the other checks stay as they were): silent long
	// ago, Ready, or NotReady long ago.
	switch len(n.InUse) {
	case 0:
		n.Ready = corev1.ConditionUnknown
	case 1:
		n.Ready = corev1.ConditionTrue
	default:
		n.Ready = corev1.ConditionFalse
	}
	return n
}

func (g *gen) tenant(i int) snapshot.Tenant {
	t := snapshot.Tenant{Name: string(rune('s' + i)), Namespace: g.of("", "default", "other"), Reachable: g.n(3) != 0,
		Driver: g.of("", "", snapshot.KubevirtCSIAttacher, "other.csi"), DriverMissing: g.n(6) == 0, MatchNodesByName: g.bool()}
	for j := g.n(4); j > 0; j-- {
		pv := g.of("pv-1", "pv-2", "pv-3")
		va := storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va"}}
		if g.n(4) == 0 {
			va.DeletionTimestamp = g.time()
		}
		va.Spec.Attacher = g.of(snapshot.KubevirtCSIAttacher, snapshot.KubevirtCSIAttacher, "other.csi")
		va.Spec.NodeName = g.of(poolTenantNode...)
		if g.n(4) == 0 {
			va.Annotations = map[string]string{"csi.alpha.kubernetes.io/node-id": g.of(poolNS...) + "/" + g.of(poolName...)}
		}
		switch g.n(3) {
		case 0:
			va.Spec.Source.PersistentVolumeName = &pv
		case 1:
			va.Spec.Source.InlineVolumeSpec = &corev1.PersistentVolumeSpec{}
			if g.bool() {
				va.Spec.Source.InlineVolumeSpec.CSI = &corev1.CSIPersistentVolumeSource{VolumeHandle: g.of(poolVolume...)}
			}
		}
		t.VolumeAttachments = append(t.VolumeAttachments, va)
	}
	for _, name := range poolTenantNode {
		if g.n(4) != 0 {
			t.Nodes = append(t.Nodes, g.tenantNode(name))
		}
	}
	for j := g.n(4); j > 0; j-- {
		pv := corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: g.of("pv-1", "pv-2", "pv-3")}}
		if g.n(4) != 0 {
			pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: g.of(snapshot.KubevirtCSIAttacher, snapshot.KubevirtCSIAttacher, "other.csi"), VolumeHandle: g.of(poolVolume...)}
		}
		t.PVs = append(t.PVs, pv)
	}
	return t
}

func (g *gen) policy() Policy {
	p := Policy{
		AllowVMIOnlyDetach:   g.bool(),
		TenantAuthoritative:  g.bool(),
		DeleteAttachmentPods: g.bool(),
		MinAttachmentPodAge:  time.Duration(g.n(4)) * time.Minute,
	}
	switch g.n(4) {
	case 1:
		p.Scope.Namespaces = []string{"default"}
	case 2:
		p.Scope.Namespaces = []string{"other", ""}
	}
	switch g.n(4) {
	case 1:
		p.Scope.Selector = labels.SelectorFromSet(labels.Set{"cluster": "c1"})
	case 2:
		p.Scope.Selector = labels.Everything()
	}
	p.Scope.VolumePrefix = g.of("", "", "pvc-", "v")
	return p
}

// build reads a whole scenario from the bytes.
func (g *gen) build() (*snapshot.Snapshot, Policy, time.Time) {
	var s snapshot.Snapshot
	seenVM, seenVMI, seenPod := map[snapshot.Key]bool{}, map[snapshot.Key]bool{}, map[snapshot.Key]bool{}
	for i := g.n(4); i > 0; i-- {
		if vm, ok := g.vm(seenVM); ok {
			s.VMs = append(s.VMs, snapshot.VMOf(&vm))
		}
	}
	for i := g.n(5); i > 0; i-- {
		if vmi, ok := g.vmi(seenVMI, s.VMs); ok {
			s.VMIs = append(s.VMIs, snapshot.VMIOf(&vmi))
		}
	}
	for i := g.n(4); i > 0; i-- {
		if pod, ok := g.pod(seenPod); ok {
			s.AttachmentPods = append(s.AttachmentPods, pod)
		}
	}
	for i := g.n(3); i > 0; i-- {
		s.Tenants = append(s.Tenants, g.tenant(i))
	}
	s.FeatureGates = snapshot.FeatureGates{Known: g.n(3) != 0, KubeVirtVersion: "v1.9.0", Phase: "Deployed"}
	if g.bool() {
		s.FeatureGates.Enabled = []string{snapshot.HotplugVolumesGate}
	}
	p := g.policy()
	now := fixture.Epoch().Add(time.Duration(g.n(240)) * time.Minute)
	if g.n(4) == 1 {
		g.coherentHotplug(&s)
	}
	return snapshot.New(s), p, now
}

// coherentHotplug adds, when its name is free, a running VM-owned VMI with
// one Ready hot-plug that both the VMI and the VM spec list, and a
// reachable tenant with a Node of the VMI's name: the world in which a
// VM-level removal can be right, which the random objects above reach only
// rarely. The rest of the bytes still vary it.
func (g *gen) coherentHotplug(s *snapshot.Snapshot) {
	name, volume := g.of(poolName[:3]...), g.of(poolVolume[:3]...)
	for _, vm := range s.VMs {
		if vm.Namespace == "default" && vm.Name == name {
			return
		}
	}
	for _, vmi := range s.VMIs {
		if vmi.Namespace == "default" && vmi.Name == name {
			return
		}
	}
	hot := kubevirtv1.Volume{Name: volume}
	hot.PersistentVolumeClaim = &kubevirtv1.PersistentVolumeClaimVolumeSource{Hotpluggable: true}
	hot.PersistentVolumeClaim.ClaimName = volume
	vm := kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: "u-coherent"}}
	vm.Spec.Template = &kubevirtv1.VirtualMachineInstanceTemplateSpec{}
	vm.Spec.Template.Spec.Volumes = []kubevirtv1.Volume{hot}
	if g.bool() {
		vm.Spec.Template.Spec.Volumes = nil // a VMI-only hot-plug
	}
	yes := true
	vmi := kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: "u-coherent-vmi",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: name, UID: vm.UID, Controller: &yes}}}}
	vmi.Spec.Volumes = []kubevirtv1.Volume{hot}
	vmi.Status.Phase = kubevirtv1.Running
	vmi.Status.VolumeStatus = []kubevirtv1.VolumeStatus{{Name: volume, Phase: kubevirtv1.VolumeReady,
		HotplugVolume: &kubevirtv1.HotplugVolumeStatus{AttachPodName: "hp-volume-z", AttachPodUID: "u-hp"}}}
	t := snapshot.Tenant{Name: "coherent", Namespace: g.of("default", ""), Reachable: true}
	if g.bool() {
		t = g.tenant(len(s.Tenants) + 1) // with whatever else a tenant may hold
		t.Reachable, t.DriverMissing = true, false
	}
	t.Nodes = append(t.Nodes, snapshot.TenantNode{Name: "w-" + name, ProviderID: "kubevirt://" + name, ClusterNamespace: "default"})
	pv := corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + volume}}
	pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: t.CSIDriver(), VolumeHandle: volume}
	t.PVs = append(t.PVs, pv)
	s.VMs, s.VMIs, s.Tenants = append(s.VMs, snapshot.VMOf(&vm)), append(s.VMIs, snapshot.VMIOf(&vmi)), append(s.Tenants, t)
}
