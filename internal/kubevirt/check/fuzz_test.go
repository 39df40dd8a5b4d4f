package check

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// FuzzOrphanHotplugVolume builds random snapshots and policies and checks
// the safety invariants of both checks on every finding; any panic fails.
func FuzzOrphanHotplugVolume(f *testing.F) {
	seeds := [][]byte{
		{},
		{0, 0, 0, 0},
		{3, 1, 1, 1, 1, 1, 1, 1, 3, 1, 0, 0, 1, 1, 1},
		[]byte("tether: never act on a volume in use"),
		[]byte{255, 254, 253, 252, 251, 250, 249, 248, 247, 246, 245, 244, 243, 242, 241, 240},
		[]byte{1, 0, 1, 2, 0, 1, 3, 1, 2, 0, 0, 2, 1, 1, 0, 3, 2, 1, 0, 1, 1, 2, 0, 3, 1, 0, 2, 2, 1, 0, 1, 3},
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, p, now := (&gen{b: data}).build()
		fs := Run(s, p, now)
		again := Run(s, p, now)
		if !reflect.DeepEqual(fs, again) {
			t.Fatalf("Run is not deterministic")
		}
		for _, fd := range fs {
			assertWellFormed(t, fd)
			if !fd.Action.Safe {
				continue
			}
			var why string
			switch fd.Check {
			case OrphanHotplugVolume:
				why = unsafeVolume(s, p, fd)
			case OrphanAttachmentPod:
				why = unsafePod(s, p, now, fd)
			case TenantNodeDown:
				why = unsafeFence(s, p, now, fd)
			}
			if why != "" {
				t.Fatalf("safe %s proposed although %s\nfinding: %+v", fd.Action.Type, why, fd)
			}
		}
	})
}

// unsafeVolume says why the platform forbids removing a hot-plugged volume
// from a VMI, or "" when it allows it. KubeVirt lists a hot-plugged volume
// in status.volumeStatus with hotplugVolume set; removevolume is honoured
// only for a running VMI that is not being deleted and not migrating
// (kvMigrating), and takes effect only once the volume is Ready (an entry
// in any other phase is still being attached or detached). A volume the VMI
// spec no longer lists is already being detached. The tenant's word
// (tenantWantsOrUnknown) and the owner VM (unsafeForOwner) come last.
func unsafeVolume(s *snapshot.Snapshot, p Policy, fd drift.Finding) string {
	vmi := findVMI(s, fd.Namespace, fd.Object.Name)
	if vmi == nil || vmi.UID != fd.Object.UID {
		return "the VMI does not exist"
	}
	var vs *snapshot.VolumeStatus
	for i := range vmi.Status.VolumeStatus {
		if vmi.Status.VolumeStatus[i].Name == fd.Volume && vmi.Status.VolumeStatus[i].HotplugVolume != nil {
			vs = &vmi.Status.VolumeStatus[i]
		}
	}
	if vs == nil {
		return "the VMI lists no such hot-plug volume"
	}
	if why := tetherInScope(p, vmi.Namespace, vmi.Labels, fd.Volume); why != "" {
		return why
	}
	switch {
	case vmi.DeletionTimestamp != nil:
		return "the VMI is terminating"
	case kvMigrating(vmi):
		return "the VMI is migrating"
	case vmi.Status.Phase != kubevirtv1.Running:
		return "the VMI is not running"
	case vs.Phase != kubevirtv1.VolumeReady:
		return "the volume is not Ready"
	case kvVolume(vmi.Spec.Volumes, fd.Volume) == nil:
		return "the VMI spec no longer lists it (detach in progress)"
	}
	if why := tenantWantsOrUnknown(s, vmi, fd.Volume); why != "" {
		return why
	}
	return unsafeForOwner(s, p, vmi, fd)
}

// unsafeForOwner: a VM owns its VMI (kvVMOwned) and re-creates the VMI's
// volumes from spec.template on every start, so a volume the VM spec lists
// is wanted by the VM and may only go through the VM-level API; a VM volume
// request still pending for it is KubeVirt's own hot-plug in progress; a VM
// being deleted takes its VMI with it. The VMI-level API on a VM-owned VMI
// needs the HotplugVolumes gate (kvGateOn). Without tenant evidence, a
// VMI-only hot-plug is removed only on the operator's opt-in, and a
// standalone VMI never.
func unsafeForOwner(s *snapshot.Snapshot, p Policy, vmi *snapshot.VMI, fd drift.Finding) string {
	ref, vmOwned := kvVMOwned(vmi)
	// Only tenants one of whose nodes is certainly the VMI's VM, and whose
	// volume it is, speak for it (drvSaysNotWanted).
	var tenants []string
	vm0 := snapshot.InfraVM{Namespace: vmi.Namespace, Name: vmi.Name}
	for _, t := range tenantsFor(s, vmi.Namespace) {
		if drvSaysNotWanted(&t, vm0, volumeHandles(vmi, fd.Volume)) {
			tenants = append(tenants, t.Name)
		}
	}
	if !vmOwned {
		if len(tenants) == 0 {
			return "the VMI is standalone and no tenant evidence applies"
		}
		return ""
	}
	if fd.Action.Type == VMIRemoveVolume && !kvGateOn(s, kvHotplugGate) {
		return "the VMI-level API needs the HotplugVolumes gate for a VM-owned VMI"
	}
	vm := findVM(s, vmi.Namespace, ref.Name)
	if vm == nil || (ref.UID != "" && vm.UID != "" && ref.UID != vm.UID) {
		// The garbage collector deletes a dependent whose controller owner
		// is gone: nothing is left to remove.
		return "the VM is gone, so the garbage collector deletes the VMI"
	}
	inSpec := vm.Spec.Template != nil && kvVolume(vm.Spec.Template.Spec.Volumes, fd.Volume) != nil
	if kvRequestPending(vm, fd.Volume) {
		return "a VM volume request is pending for it"
	}
	switch {
	case vm.DeletionTimestamp != nil:
		return "the VM is terminating"
	case inSpec && !p.TenantAuthoritative:
		return "the VM spec lists it"
	case inSpec && len(tenants) == 0:
		return "the VM spec lists it and no tenant speaks for the VMI's VM"
	case inSpec && fd.Action.Type != VMRemoveVolume:
		return "the VM spec lists it but the action is not VM-level"
	case len(tenants) == 0 && !p.AllowVMIOnlyDetach:
		return "it is a VMI-only hot-plug without tenant evidence or opt-in"
	}
	return ""
}

// tenantWantsOrUnknown: any tenant that applies to the VMI's namespace and
// may want the volume on the VMI's VM, by the driver's rules (drvMayWant),
// forbids the removal.
func tenantWantsOrUnknown(s *snapshot.Snapshot, vmi *snapshot.VMI, volume string) string {
	vm := snapshot.InfraVM{Namespace: vmi.Namespace, Name: vmi.Name}
	for _, t := range tenantsFor(s, vmi.Namespace) {
		if why := drvMayWant(&t, vm, volumeHandles(vmi, volume)); why != "" {
			return why
		}
	}
	return ""
}

// volumeHandles: the driver names a hot-plugged volume after its DataVolume
// (the tenant PV's volume handle), so the handle may be the volume's name
// or the claim or DataVolume it uses.
func volumeHandles(vmi *snapshot.VMI, volume string) map[string]bool {
	h := map[string]bool{volume: true}
	if c := kvStorageName(kvVolume(vmi.Spec.Volumes, volume)); c != "" {
		h[c] = true
	}
	return h
}

func vaHandle(t snapshot.Tenant, pvName *string, inline *corev1.PersistentVolumeSpec) (string, bool) {
	switch {
	case pvName != nil:
		for _, pv := range t.PVs {
			if pv.Name == *pvName && pv.Spec.CSI != nil && pv.Spec.CSI.VolumeHandle != "" {
				return pv.Spec.CSI.VolumeHandle, true
			}
		}
	case inline != nil && inline.CSI != nil && inline.CSI.VolumeHandle != "":
		return inline.CSI.VolumeHandle, true
	}
	return "", false
}

// unsafePod says why deleting a hot-plug attachment pod is not allowed, or
// "". virt-handler mounts a hot-plugged disk into the VMI through its
// attachment pod: while a VMI's status names the pod (attachPodName, and
// UID when both are known), lists a claim the pod mounts, or migrates to it
// (migrationState.targetAttachmentPodUID), the pod is in use. A pod being
// deleted is already going; a young pod may not be in the status yet
// (tether's minimum age); deletion is tether's opt-in.
func unsafePod(s *snapshot.Snapshot, p Policy, now time.Time, fd drift.Finding) string {
	pod := findPod(s, fd.Namespace, fd.Object.Name)
	minAge := p.MinAttachmentPodAge
	if minAge == 0 {
		minAge = DefaultMinAttachmentPodAge
	}
	switch {
	case pod == nil || pod.UID != fd.Object.UID:
		return "the pod does not exist"
	case !p.DeleteAttachmentPods:
		return "deletion was not requested"
	case !inNamespaces(p, pod.Namespace):
		return "the namespace is out of scope"
	case pod.DeletionTimestamp != nil:
		return "the pod is terminating"
	case pod.CreationTimestamp.IsZero() || now.Sub(pod.CreationTimestamp.Time) < minAge:
		return "the pod is too young"
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && !strings.HasPrefix(v.Name, p.Scope.VolumePrefix) {
			return "a pod volume is out of the prefix scope"
		}
	}
	owner := podOwnerVMI(s, pod)
	if p.Scope.Selector != nil && !p.Scope.Selector.Empty() && (owner == nil || !p.Scope.Selector.Matches(labels.Set(owner.Labels))) {
		return "the pod's VMI is not selected"
	}
	if owner != nil && (owner.DeletionTimestamp != nil || kvMigrating(owner)) {
		return "its VMI is terminating or migrating"
	}
	return podStillUsed(s, pod)
}

func podStillUsed(s *snapshot.Snapshot, pod *corev1.Pod) string {
	claims := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claims[v.PersistentVolumeClaim.ClaimName] = true
		}
	}
	for i := range s.VMIs {
		vmi := &s.VMIs[i]
		if vmi.Namespace != pod.Namespace {
			continue
		}
		if ms := vmi.Status.MigrationState; ms != nil && pod.UID != "" && ms.TargetAttachmentPodUID == pod.UID {
			return "a VMI migrates to it"
		}
		for j := range vmi.Status.VolumeStatus {
			vs := &vmi.Status.VolumeStatus[j]
			if hp := vs.HotplugVolume; hp != nil && hp.AttachPodName == pod.Name && (hp.AttachPodUID == "" || pod.UID == "" || hp.AttachPodUID == pod.UID) {
				return "VMI " + vmi.Name + " references it"
			}
			for _, c := range kvStatusClaims(vmi, vs) {
				if claims[c] {
					return "VMI " + vmi.Name + " still lists its claim " + c
				}
			}
		}
	}
	return ""
}

func podOwnerVMI(s *snapshot.Snapshot, pod *corev1.Pod) *snapshot.VMI {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return nil
	}
	for i := range s.VMIs {
		vmi := &s.VMIs[i]
		if vmi.Namespace != pod.Namespace {
			continue
		}
		if ref.Kind == "VirtualMachineInstance" && vmi.Name == ref.Name && (ref.UID == "" || vmi.UID == "" || vmi.UID == ref.UID) {
			return vmi
		}
		if _, ok := vmi.Status.ActivePods[ref.UID]; ok && ref.Kind == "Pod" && ref.UID != "" {
			return vmi
		}
	}
	return nil
}

func findPod(s *snapshot.Snapshot, ns, name string) *corev1.Pod {
	for i := range s.AttachmentPods {
		if s.AttachmentPods[i].Namespace == ns && s.AttachmentPods[i].Name == name {
			return &s.AttachmentPods[i]
		}
	}
	return nil
}

func tenantsFor(s *snapshot.Snapshot, ns string) []snapshot.Tenant {
	var out []snapshot.Tenant
	for _, t := range s.Tenants {
		if t.Namespace == "" || t.Namespace == ns {
			out = append(out, t)
		}
	}
	return out
}

// unsafeFence says why fencing (or un-fencing) the tenant Node is not
// allowed, or "" when it is. Non-graceful node shutdown is for a node that
// is really down (Kubernetes docs, "Non-graceful node shutdown"): the
// Node's providerID must name the infra VM, that VM must have no VMI or a
// final one (Succeeded, Failed) and no run strategy or request that starts
// another (it is gone, Halted, Manual without a Start request, or its
// VMI Succeeded under RerunOnFailure or ended under Once), and the Node must
// have been NotReady for the grace and carry no out-of-service taint yet.
// The taint is removed only where tether's record says it added it, the
// VMI is Running and the Node Ready.
func unsafeFence(s *snapshot.Snapshot, p Policy, now time.Time, fd drift.Finding) string {
	var node *snapshot.TenantNode
	var tenant *snapshot.Tenant
	for i := range s.Tenants {
		for j := range s.Tenants[i].Nodes {
			if s.Tenants[i].Name == fd.Cluster && s.Tenants[i].Nodes[j].Name == fd.Object.Name {
				tenant, node = &s.Tenants[i], &s.Tenants[i].Nodes[j]
			}
		}
	}
	if node == nil || !tenant.Reachable {
		return "the tenant node was not read"
	}
	// The node names its VM by providerID (kubevirt://<vm>), by the
	// infra-VM annotation, or by its CSI node ID (<namespace>/<vm>).
	name, _ := strings.CutPrefix(node.ProviderID, snapshot.ProviderIDPrefix)
	if name == "" {
		name = node.InfraVMName
	}
	if ns, vm, ok := strings.Cut(node.CSINodeID, "/"); name == "" && ok && ns == fd.Namespace {
		name = vm
	}
	if name == "" && vm0(s, fd.Namespace, node.Name) {
		name = node.Name // tied by its name to a VM that exists
	}
	if name == "" {
		return "the node names no VM (nor is a VM of its name known)"
	}
	vm, vmi := findVM(s, fd.Namespace, name), findVMI(s, fd.Namespace, name)
	final := vmi == nil || vmi.Status.Phase == kubevirtv1.Succeeded || vmi.Status.Phase == kubevirtv1.Failed
	if fd.Action.Type == RemoveOutOfServiceTaint || fd.Action.Type == UncordonTenantNode {
		return unsafeUnfence(node, vmi, p, now, fd.Action.Type)
	}
	switch {
	case !final:
		return "the VMI exists and is not final"
	case node.OutOfService:
		return "the node is already out of service"
	case node.Ready == corev1.ConditionTrue || now.Sub(node.ReadySince) < p.withDefaults().FenceAfter:
		return "the node has not been NotReady for the grace"
	case vm == nil || vm.DeletionTimestamp != nil:
		return ""
	}
	for _, r := range vm.Status.StateChangeRequests {
		if r.Action == kubevirtv1.StartRequest {
			return "a start is requested"
		}
	}
	strategy := kubevirtv1.RunStrategyHalted
	switch {
	case vm.Spec.Running != nil && *vm.Spec.Running:
		strategy = kubevirtv1.RunStrategyAlways
	case vm.Spec.RunStrategy != nil && vm.Spec.Running == nil:
		strategy = *vm.Spec.RunStrategy
	}
	switch {
	case strategy == kubevirtv1.RunStrategyHalted, strategy == kubevirtv1.RunStrategyManual:
		return ""
	case strategy == kubevirtv1.RunStrategyRerunOnFailure && vmi != nil && vmi.Status.Phase == kubevirtv1.Succeeded:
		return ""
	case strategy == kubevirtv1.RunStrategyOnce && vmi != nil:
		return ""
	}
	return "the VM's run strategy " + string(strategy) + " starts a new VMI"
}

func vm0(s *snapshot.Snapshot, ns, name string) bool { return findVM(s, ns, name) != nil }

func findVMI(s *snapshot.Snapshot, ns, name string) *snapshot.VMI {
	for i := range s.VMIs {
		if s.VMIs[i].Namespace == ns && s.VMIs[i].Name == name {
			return &s.VMIs[i]
		}
	}
	return nil
}

func findVM(s *snapshot.Snapshot, ns, name string) *snapshot.VM {
	for i := range s.VMs {
		if s.VMs[i].Namespace == ns && s.VMs[i].Name == name {
			return &s.VMs[i]
		}
	}
	return nil
}

// TestRandomSnapshotsKeepInvariants runs the fuzz body over seeded random
// inputs in every plain test run, and checks that the generator reaches
// every safe action, so that the invariants are not vacuous.
func TestRandomSnapshotsKeepInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[drift.ActionType]int{}
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for i := 0; i < n; i++ {
		data := make([]byte, 64+rng.IntN(192))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		s, p, now := (&gen{b: data}).build()
		for _, fd := range Run(s, p, now) {
			assertWellFormed(t, fd)
			if !fd.Action.Safe {
				continue
			}
			seen[fd.Action.Type]++
			why := unsafeVolume(s, p, fd)
			switch fd.Check {
			case OrphanAttachmentPod:
				why = unsafePod(s, p, now, fd)
			case TenantNodeDown:
				why = unsafeFence(s, p, now, fd)
			}
			if why != "" {
				t.Fatalf("input %x: safe %s proposed although %s\nfinding: %+v", data, fd.Action.Type, why, fd)
			}
		}
	}
	for _, a := range []drift.ActionType{VMIRemoveVolume, VMRemoveVolume, DeleteAttachmentPod, TaintOutOfService} {
		if seen[a] == 0 && !testing.Short() {
			t.Errorf("the generator never reached a safe %s", a)
		}
	}
	t.Logf("safe actions seen: %v", seen)
}

// unsafeUnfence says why lifting tether's fence from node (the taint's
// removal, or the uncordon after it) is not allowed, or "". KEP-2268
// (non-graceful node shutdown): the out-of-service taint is removed only
// after the node's pods are gone and its volumes detached, and only once
// the node is back (its VM runs, its kubelet posts Ready); the taint is
// tether's to remove only where tether's record says it added it.
// kubernetes#142331: the pod GC and attach/detach controllers read the taint
// from their caches, so the node stays unschedulable until they must have
// seen it go (Policy.UnfenceSettle after tether recorded its removal); a
// cordon is tether's to lift only where its record says tether made it,
// and never under the taint. A record of a cordon someone already lifted
// may always go.
func unsafeUnfence(node *snapshot.TenantNode, vmi *snapshot.VMI, p Policy, now time.Time, action drift.ActionType) string {
	if action == UncordonTenantNode {
		switch {
		case node.OutOfService:
			return "the node carries the out-of-service taint"
		case node.CordonedBy == "":
			return "tether did not cordon the node"
		case !node.Unschedulable:
			return "" // only tether's record is left
		case node.UnfencedAt.IsZero() || now.Sub(node.UnfencedAt) < p.withDefaults().UnfenceSettle:
			return "the taint went too recently (or at an unknown time)"
		}
	} else if node.FencedBy == "" || !node.OutOfService {
		return "tether did not add the taint"
	}
	switch {
	case vmi == nil || vmi.Status.Phase != kubevirtv1.Running:
		return "the VMI does not run"
	case node.Ready != corev1.ConditionTrue:
		return "the node is not Ready"
	case node.Release == nil:
		return "what of the node is being released is unknown"
	case len(node.Release.Attachments) > 0 || len(node.Release.Pods) > 0:
		return "something of the node is still being released"
	}
	return ""
}
