package check

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/protect/inuse"
	"github.com/tether-dev/tether/internal/testing/fixture"
)

// TestLeanObjectsDecideAlike: the controller's caches hold lean objects
// (snapshot.Lean), the live re-check before an action reads whole ones, and
// both must lead to the same findings. Over random worlds of the shared
// generator, extended with a storage view and cluttered with what real
// objects carry besides (annotations, domain specs, containers, conditions,
// images, ...), every check runs on the world as read and on the same world
// with every object made lean; the findings must be identical, byte for
// byte.
//
// The test knows nothing of what Lean keeps: it compares outcomes only, so
// a field Lean drops that a check reads shows up as a difference.
func TestLeanObjectsDecideAlike(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 3))
	n := 6000
	if testing.Short() {
		n = 1000
	}
	withFindings, byCheck := 0, map[string]int{}
	for i := 0; i < n; i++ {
		data := leanInput(rng)
		world, p, now := leanWorld(data)
		clutter(world, rand.New(rand.NewPCG(uint64(i), 11)))
		fs := Run(snapshot.New(*world), p, now)
		full := findingsJSON(t, fs)
		lean := findingsJSON(t, Run(snapshot.New(*leaned(world)), p, now))
		if !bytes.Equal(full, lean) {
			t.Fatalf("input %x: the findings differ once the objects are lean\nwhole objects: %s\nlean objects:  %s", data, full, lean)
		}
		if len(fs) > 0 {
			withFindings++
		}
		if why := controllerReadsDiffer(world, leaned(world)); why != "" {
			t.Fatalf("input %x: %s", data, why)
		}
		for _, f := range fs {
			byCheck[f.Check+"/"+string(f.Action.Type)+"/"+string(f.Action.BlockedBy)]++
			byCheck[f.Check]++
		}
	}
	if withFindings < n/4 {
		t.Errorf("only %d of %d worlds had findings: the comparison proves little", withFindings, n)
	}
	for _, c := range Names() {
		if byCheck[c] == 0 && !testing.Short() {
			t.Errorf("no world had a %s finding", c)
		}
	}
	t.Logf("%d of %d worlds had findings; %d kinds of outcome; by check: %v", withFindings, n, len(byCheck), byCheck)
}

// TestLeanIsIdempotentOnClutteredWorlds: leaning a lean world changes
// nothing (an informer may apply its transform to an object twice).
func TestLeanIsIdempotentOnClutteredWorlds(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 5))
	for i := 0; i < 300; i++ {
		data := leanInput(rng)
		world, _, _ := leanWorld(data)
		clutter(world, rand.New(rand.NewPCG(uint64(i), 13)))
		once := leaned(world)
		twice := leaned(once)
		a, _ := json.Marshal(once)
		b, _ := json.Marshal(twice)
		if !bytes.Equal(a, b) {
			t.Fatalf("input %x: Lean is not idempotent\nonce:  %s\ntwice: %s", data, a, b)
		}
	}
}

// controllerReadsDiffer compares what the controller decides from the
// objects outside check.Run: whether a VM is starting up (the "on restart"
// mode) and what a VM depends on (protection).
func controllerReadsDiffer(full, lean *snapshot.Snapshot) string {
	vmi := func(s *snapshot.Snapshot, ns, name string) *snapshot.VMI {
		for i := range s.VMIs {
			if s.VMIs[i].Namespace == ns && s.VMIs[i].Name == name {
				return &s.VMIs[i]
			}
		}
		return nil
	}
	for i := range full.VMs {
		a, b := &full.VMs[i], &lean.VMs[i]
		if x, y := StartingUp(a, vmi(full, a.Namespace, a.Name)), StartingUp(b, vmi(lean, b.Namespace, b.Name)); x != y {
			return fmt.Sprintf("VM %s/%s: StartingUp is %t on the whole objects, %t on the lean ones", a.Namespace, a.Name, x, y)
		}
		if x, y := fmt.Sprint(inuse.Dependents(a)), fmt.Sprint(inuse.Dependents(b)); x != y {
			return fmt.Sprintf("VM %s/%s: it depends on %s, but on %s once lean", a.Namespace, a.Name, x, y)
		}
	}
	return ""
}

func findingsJSON(t *testing.T, fs []drift.Finding) []byte {
	t.Helper()
	out, err := json.Marshal(fs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// leanInput is the generator's input for one random world of leanWorld.
func leanInput(rng *rand.Rand) []byte {
	data := make([]byte, 384+rng.IntN(640))
	for j := range data {
		data[j] = byte(rng.Uint32())
	}
	return data
}

// leanWorld is buildDangling's world (VMs, VMIs, attachment pods, claims,
// DataVolumes, tenants) with a storage view: pods on nodes, Nodes, PVs,
// VolumeAttachments, CSIDrivers and gone nodes. When the policy names a
// check, it names all of them, so that every check runs.
func leanWorld(data []byte) (*snapshot.Snapshot, Policy, time.Time) {
	cut := len(data) * 2 / 3
	base, p, now := buildDangling(data[:cut])
	s := *base
	if len(p.Checks) > 0 {
		p.Checks = Names()
	}
	g := &gen{b: data[cut:]}
	p.Storage.ForceDetach = g.bool()
	if g.bool() {
		p.Storage.FenceGoneNodesAfter = time.Duration(1+g.n(30)) * time.Minute
	}
	leanStorage(g, &s)
	if g.bool() { // nothing guards attachment pods against a drain (DrainEvictsHotplug)
		s.EvictionGuard = snapshot.EvictionGuard{Read: true, Found: true}
		vmi := fixture.VMI("vm-drained", fixture.InNamespace("drain"), fixture.WithHotplug("pvc-1"))
		pod := fixture.AttachmentPod("hp-volume-vm-drained", fixture.InNamespace("drain"), fixture.LaunchedBy(vmi))
		s.VMIs = append(s.VMIs, snapshot.VMIOf(vmi))
		s.AttachmentPods, s.Pods = append(s.AttachmentPods, *pod), append(s.Pods, *pod)
	}
	if g.bool() { // a volume migration's finished source pod (MigrationSourcePodLeftover)
		vmi, pod := volumeMigrated("vm-migrated", fixture.InNamespace("volmig"))
		s.VMIs, s.Pods = append(s.VMIs, snapshot.VMIOf(vmi)), append(s.Pods, *pod)
	}
	// The worlds of the checks of 2025-2026, from the same bytes: tenant
	// VolumeAttachments with their status (PhantomAttach,
	// AttachAlreadyPresent), and VMs with shared claims, interrupted volume
	// migrations and stuck hot-plug phases, in a namespace of their own.
	ta := fixture.Snapshot(tenantAttachGen(data[cut:])...)
	s.VMs, s.VMIs, s.Tenants = append(s.VMs, ta.VMs...), append(s.VMIs, ta.VMIs...), append(s.Tenants, ta.Tenants...)
	rw, _, _ := (&gen{b: data[:cut]}).reportWorld()
	s.VMs, s.VMIs, s.PVCs = append(s.VMs, rw.VMs...), append(s.VMIs, rw.VMIs...), append(s.PVCs, rw.PVCs...)
	s.AttachmentPods = append(s.AttachmentPods, rw.AttachmentPods...)
	s.Pods = append(s.Pods, rw.AttachmentPods...)
	if !s.FeatureGates.Known {
		s.FeatureGates = rw.FeatureGates
	}
	return &s, p, now
}

var (
	poolNode   = []string{"node-1", "node-2", "node-3"}
	poolPV     = []string{"pv-1", "pv-2", "pv-3", "pv-4"}
	poolDriver = []string{fixture.CSIDriverName, fixture.CSIDriverName, "other.csi"}
	poolModes  = [][]corev1.PersistentVolumeAccessMode{{corev1.ReadWriteOnce}, {corev1.ReadWriteOnce}, {corev1.ReadWriteMany}, nil}
)

func (g *gen) at() metav1.Time {
	return metav1.NewTime(fixture.Epoch().Add(time.Duration(g.n(240)) * time.Minute))
}

func leanStorage(g *gen, s *snapshot.Snapshot) {
	s.Pods = append(s.Pods, s.AttachmentPods...)
	seen := map[snapshot.Key]bool{}
	for i := g.n(6); i > 0; i-- {
		m, ok := g.meta([]string{"app-1", "app-2", "app-3", "hp-volume-a"}, seen)
		if !ok {
			continue
		}
		pod := corev1.Pod{ObjectMeta: m}
		if g.n(4) != 0 {
			pod.Spec.NodeName = g.of(poolNode...)
		}
		for j := 1 + g.n(2); j > 0; j-- {
			v := corev1.Volume{Name: g.of(poolVolume...)}
			switch g.n(5) {
			case 0:
				v.Ephemeral = &corev1.EphemeralVolumeSource{}
				if g.bool() {
					// The claim Kubernetes makes for it: <pod>-<volume>.
					claim := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name + "-" + v.Name, UID: types.UID("uid-eph-" + pod.Name)}}
					claim.Spec.VolumeName = g.of(poolPV...)
					s.PVCs = append(s.PVCs, claim)
				}
			case 1:
			default:
				v.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: g.of(poolVolume...)}
			}
			pod.Spec.Volumes = append(pod.Spec.Volumes, v)
		}
		pod.Status.Phase = corev1.PodPhase(g.of("Running", "Running", "Pending", "Succeeded", "Failed", ""))
		s.Pods = append(s.Pods, pod)
	}
	for i := range s.PVCs {
		if g.n(3) != 0 {
			s.PVCs[i].Spec.VolumeName = g.of(poolPV...)
		}
	}
	for _, name := range poolNode {
		if g.n(4) == 0 {
			continue
		}
		node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
		if g.bool() {
			node.CreationTimestamp = g.at()
		}
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionStatus(g.of("True", "True", "False", "Unknown"))}}
		if g.n(3) == 0 {
			node.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}}
		}
		node.Annotations = map[string]string{}
		if g.n(4) != 0 {
			node.Annotations[snapshot.ControllerManagedAttachAnnotation] = "true"
		}
		if g.bool() {
			node.Annotations[snapshot.NodeIDAnnotation] = fmt.Sprintf(`{%q:%q}`, fixture.CSIDriverName, g.of("id-1", "id-2"))
		}
		s.Nodes = append(s.Nodes, node)
	}
	for _, name := range poolPV {
		if g.n(4) == 0 {
			continue
		}
		pv := corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
		if g.n(4) == 0 {
			pv.DeletionTimestamp = g.time()
			if pv.DeletionTimestamp != nil {
				pv.Finalizers = []string{g.of(snapshot.PVProtectionFinalizer, snapshot.AttacherFinalizer(fixture.CSIDriverName))}
			}
		}
		if g.n(4) != 0 {
			pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: g.of(poolNS...), Name: g.of(poolVolume...)}
		}
		pv.Spec.AccessModes = poolModes[g.n(len(poolModes))]
		if g.n(4) != 0 {
			pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: g.of(poolDriver...), VolumeHandle: "h-" + name}
		}
		pv.Status.Phase = corev1.PersistentVolumePhase(g.of("Bound", "Bound", "Released", ""))
		s.PVs = append(s.PVs, pv)
	}
	for i := g.n(5); i > 0; i-- {
		va := storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("va-%d", i), UID: types.UID(fmt.Sprintf("uid-va-%d", i))}}
		va.CreationTimestamp = g.at()
		va.Spec.Attacher = g.of(poolDriver...)
		va.Spec.NodeName = g.of(append(poolNode, "node-gone", "")...)
		if g.n(5) == 0 {
			va.Spec.Source.InlineVolumeSpec = &corev1.PersistentVolumeSpec{}
		} else {
			pv := g.of(poolPV...)
			va.Spec.Source.PersistentVolumeName = &pv
		}
		va.Status.Attached = g.n(3) != 0
		if g.n(4) == 0 {
			va.DeletionTimestamp = g.time()
			if va.DeletionTimestamp != nil {
				va.Finalizers = []string{snapshot.AttacherFinalizer(va.Spec.Attacher)}
			}
		}
		if g.bool() {
			va.Annotations = map[string]string{snapshot.VANodeIDAnnotation: g.of("id-1", "id-2")}
		}
		s.VolumeAttachments = append(s.VolumeAttachments, va)
	}
	if g.bool() {
		coherentAttachment(g, s)
	}
	if g.n(3) == 0 {
		no := false
		s.CSIDrivers = []storagev1.CSIDriver{{ObjectMeta: metav1.ObjectMeta{Name: "other.csi"}, Spec: storagev1.CSIDriverSpec{AttachRequired: &no}}}
	}
	if g.bool() {
		s.NodesGoneSince = map[string]time.Time{"node-gone": fixture.Epoch().Add(time.Duration(g.n(120)) * time.Minute)}
	}
}

// coherentAttachment adds what the random objects above rarely line up: a
// claim bound to an exclusive CSI PV, attached to one node, and pods using
// the claim on that node or another (a multi-attach wait, a holder on a
// node that is gone or fenced).
func coherentAttachment(g *gen, s *snapshot.Snapshot) {
	if len(s.PVCs) == 0 {
		s.PVCs = append(s.PVCs, corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "v1", UID: "uid-pvc-c"}})
	}
	pvc := &s.PVCs[g.n(len(s.PVCs))]
	pvc.Spec.VolumeName = "pv-c"
	pv := corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-c", UID: "uid-pv-c"}}
	pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: pvc.Namespace, Name: pvc.Name}
	pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: fixture.CSIDriverName, VolumeHandle: "h-c"}
	pv.Status.Phase = corev1.VolumeBound
	s.PVs = append(s.PVs, pv)
	name := "pv-c"
	va := storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va-c", UID: "uid-va-c", CreationTimestamp: g.at()}}
	va.Spec.Attacher, va.Spec.NodeName, va.Spec.Source.PersistentVolumeName = fixture.CSIDriverName, g.of(append(poolNode, "node-gone")...), &name
	va.Status.Attached = g.n(4) != 0
	s.VolumeAttachments = append(s.VolumeAttachments, va)
	for i := 1 + g.n(3); i > 0; i-- {
		pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: g.of(pvc.Namespace, pvc.Namespace, "other"), Name: fmt.Sprintf("user-%d", i), UID: types.UID(fmt.Sprintf("uid-user-%d", i)),
			CreationTimestamp: metav1.NewTime(fixture.Epoch().Add(-time.Hour))}}
		pod.Spec.NodeName = g.of(append(poolNode, "node-gone")...)
		pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}}
		pod.Status.Phase = corev1.PodPhase(g.of("Running", "Running", "Pending", "Succeeded"))
		if g.n(4) == 0 {
			pod.DeletionTimestamp = g.time()
		}
		s.Pods = append(s.Pods, pod)
	}
}

// leaned returns a deep copy of s with every object made lean.
func leaned(s *snapshot.Snapshot) *snapshot.Snapshot {
	out := *s
	out.VMs, out.VMIs = leanAll(s.VMs), leanAll(s.VMIs)
	out.AttachmentPods, out.Pods = leanAll(s.AttachmentPods), leanAll(s.Pods)
	out.PVCs, out.DataVolumes = leanAll(s.PVCs), leanAll(s.DataVolumes)
	out.Nodes, out.PVs, out.VolumeAttachments = leanAll(s.Nodes), leanAll(s.PVs), leanAll(s.VolumeAttachments)
	return &out
}

// leanAll returns lean deep copies of objs.
func leanAll[T any, P interface {
	*T
	DeepCopyInto(*T)
}](objs []T) []T {
	if objs == nil {
		return nil
	}
	out := make([]T, len(objs))
	for i := range objs {
		P(&objs[i]).DeepCopyInto(&out[i])
		snapshot.Lean(P(&out[i]))
	}
	return out
}

// clutter fills, in place, what real objects carry besides what the
// generator sets: the metadata every object has, and per kind the fields a
// cluster fills in (KubeVirt's domain and guest status, the kubelet's
// container statuses and node images, CDI's progress, ...). Some of it is
// read by the checks (container states, VM conditions): then both worlds
// carry it.
//
// A VM or VMI is cluttered as read, then made what the checks read of it
// (snapshot.VMOf, VMIOf), as observe and the controller do; clutter
// returns them as read.
func clutter(s *snapshot.Snapshot, r *rand.Rand) (vms []kubevirtv1.VirtualMachine, vmis []kubevirtv1.VirtualMachineInstance) {
	for i := range s.VMs {
		vm := s.VMs[i].Typed()
		clutterVM(&vm, r)
		vms = append(vms, vm)
		s.VMs[i] = snapshot.VMOf(&vm)
	}
	for i := range s.VMIs {
		vmi := s.VMIs[i].Typed()
		clutterVMI(&vmi, r)
		vmis = append(vmis, vmi)
		s.VMIs[i] = snapshot.VMIOf(&vmi)
	}
	for _, pods := range [][]corev1.Pod{s.AttachmentPods, s.Pods} {
		for i := range pods {
			clutterPod(&pods[i], r)
		}
	}
	for i := range s.PVCs {
		pvc := &s.PVCs[i]
		clutterMeta(&pvc.ObjectMeta, r)
		pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}
		sc := "standard"
		pvc.Spec.StorageClassName = &sc
		pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "golden"}
		pvc.Status.Phase = corev1.ClaimBound
		pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}
		pvc.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionFalse, Message: "resize done"}}
	}
	for i := range s.DataVolumes {
		dv := &s.DataVolumes[i]
		clutterMeta(&dv.ObjectMeta, r)
		dv.Spec.Source = &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: "https://images.example.com/fedora.qcow2"}}
		dv.Spec.Storage = &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")}}}
		dv.Status.Progress = "42.0%"
		dv.Status.RestartCount = int32(r.IntN(3))
		dv.Status.Conditions = []cdiv1.DataVolumeCondition{{Type: cdiv1.DataVolumeBound, Status: corev1.ConditionTrue, Message: "PVC Bound", Reason: "Bound"}}
	}
	for i := range s.Nodes {
		node := &s.Nodes[i]
		clutterMeta(&node.ObjectMeta, r)
		node.Annotations["node.alpha.kubernetes.io/ttl"] = "0"
		node.Annotations["kubeadm.alpha.kubernetes.io/cri-socket"] = "unix:///run/containerd/containerd.sock"
		node.Spec.PodCIDR = "10.244.1.0/24"
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: "node-role.kubernetes.io/worker", Effect: corev1.TaintEffectPreferNoSchedule})
		node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi")}
		node.Status.Allocatable = node.Status.Capacity
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.10"}}
		node.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: "v1.36.3", OSImage: "Fedora CoreOS"}
		node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Message: "kubelet has sufficient memory"})
		for j := 0; j < 20; j++ {
			node.Status.Images = append(node.Status.Images, corev1.ContainerImage{Names: []string{fmt.Sprintf("quay.io/example/image-%d@sha256:%064d", j, j)}, SizeBytes: int64(1 << 20 * j)})
		}
	}
	for i := range s.PVs {
		pv := &s.PVs[i]
		clutterMeta(&pv.ObjectMeta, r)
		pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}
		pv.Spec.MountOptions = []string{"noatime"}
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}}
		if pv.Spec.CSI != nil {
			pv.Spec.CSI.VolumeAttributes = map[string]string{"storage.kubernetes.io/csiProvisionerIdentity": "1700000000000-8081-" + pv.Spec.CSI.Driver}
			pv.Spec.CSI.NodeStageSecretRef = &corev1.SecretReference{Name: "ceph-secret", Namespace: "rook"}
		}
		pv.Status.Message, pv.Status.Reason = "released by claim", "Released"
	}
	for i := range s.VolumeAttachments {
		va := &s.VolumeAttachments[i]
		clutterMeta(&va.ObjectMeta, r)
		va.Status.AttachmentMetadata = map[string]string{"devicePath": "/dev/sdb"}
		if r.IntN(4) == 0 {
			va.Status.AttachError = &storagev1.VolumeError{Message: "rpc error: timed out"}
		}
	}
	return vms, vmis
}

func clutterMeta(m *metav1.ObjectMeta, r *rand.Rand) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = `{"apiVersion":"v1","kind":"Thing","metadata":{"name":"` + m.Name + `"}}`
	m.Annotations["example.com/owner-team"] = "storage"
	m.GenerateName = m.Name + "-"
	m.Generation = int64(1 + r.IntN(5))
	m.ResourceVersion = fmt.Sprint(1000 + r.IntN(9000))
	m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{}}`)}}}
}

// otherVolume is a volume of a kind no check reads the source of, named
// from the generator's pool half of the time, so that a name collides with
// the volumes the checks look for.
func otherVolume(r *rand.Rand) kubevirtv1.Volume {
	name := []string{"cloudinitdisk", "containerdisk", "v1", "pvc-1"}[r.IntN(4)]
	v := kubevirtv1.Volume{Name: name}
	switch r.IntN(6) {
	case 4:
		// Storage, but not of a kind the checks decide about.
		v.Ephemeral = &kubevirtv1.EphemeralVolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "golden", ReadOnly: true}}
	case 5:
		v.MemoryDump = &kubevirtv1.MemoryDumpVolumeSource{PersistentVolumeClaimVolumeSource: kubevirtv1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "dump"}, Hotpluggable: true}}
	case 0:
		v.CloudInitNoCloud = &kubevirtv1.CloudInitNoCloudSource{UserData: "#cloud-config\npassword: fedora\nchpasswd: { expire: False }\n"}
	case 1:
		v.ContainerDisk = &kubevirtv1.ContainerDiskSource{Image: "quay.io/containerdisks/fedora:41"}
	case 2:
		v.ConfigMap = &kubevirtv1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}
	default:
		v.EmptyDisk = &kubevirtv1.EmptyDiskSource{Capacity: resource.MustParse("1Gi")}
	}
	return v
}

func clutterDomain(spec *kubevirtv1.VirtualMachineInstanceSpec, r *rand.Rand) {
	if r.IntN(3) == 0 {
		spec.Volumes = append(spec.Volumes, otherVolume(r))
	}
	for _, v := range spec.Volumes {
		d := kubevirtv1.Disk{Name: v.Name, DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}}
		// A serial the virtio bus cuts (TruncatedDiskSerial), or one it keeps.
		switch r.IntN(6) {
		case 0:
			d.Serial = "pvc-7286dfe6-7c44-4057-a8f4-362cc1e7468c"
		case 1:
			d.Serial = "short-serial"
		}
		spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, d)
	}
	spec.Domain.Devices.Interfaces = []kubevirtv1.Interface{{Name: "default", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}}}}
	spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}
	spec.Domain.CPU = &kubevirtv1.CPU{Cores: 2}
	spec.Networks = []kubevirtv1.Network{{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}}
	spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
	spec.Tolerations = []corev1.Toleration{{Key: "example.com/dedicated", Operator: corev1.TolerationOpExists}}
	spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}}
	spec.Hostname = "guest"
	grace := int64(180)
	spec.TerminationGracePeriodSeconds = &grace
}

func clutterVM(vm *kubevirtv1.VirtualMachine, r *rand.Rand) {
	clutterMeta(&vm.ObjectMeta, r)
	if t := vm.Spec.Template; t != nil {
		t.ObjectMeta.Annotations = map[string]string{"vm.kubevirt.io/flavor": "small"}
		if r.IntN(2) == 0 {
			t.ObjectMeta.Labels = map[string]string{"kubevirt.io/domain": vm.Name, "cluster": []string{"c1", "c2"}[r.IntN(2)]}
		}
		clutterDomain(&t.Spec, r)
	}
	for i := range vm.Spec.DataVolumeTemplates {
		d := &vm.Spec.DataVolumeTemplates[i]
		d.Labels = map[string]string{"app": "vm"}
		d.Spec.Source = &cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{}}
	}
	switch r.IntN(4) {
	case 0:
		rs := []kubevirtv1.VirtualMachineRunStrategy{kubevirtv1.RunStrategyAlways, kubevirtv1.RunStrategyHalted, kubevirtv1.RunStrategyRerunOnFailure, kubevirtv1.RunStrategyOnce}[r.IntN(4)]
		vm.Spec.RunStrategy = &rs
	case 1:
		running := r.IntN(2) == 0
		vm.Spec.Running = &running
	}
	if r.IntN(3) == 0 {
		vm.Spec.Instancetype = &kubevirtv1.InstancetypeMatcher{Name: "u1.medium", RevisionName: vm.Name + "-u1.medium-1"}
		vm.Spec.Preference = &kubevirtv1.PreferenceMatcher{Name: "fedora", RevisionName: vm.Name + "-fedora-1"}
		vm.Status.InstancetypeRef = &kubevirtv1.InstancetypeStatusRef{Name: "u1.medium", ControllerRevisionRef: &kubevirtv1.ControllerRevisionRef{Name: vm.Name + "-u1.medium-2"}}
	}
	st := &vm.Status
	st.Created, st.Ready = true, r.IntN(2) == 0
	st.ObservedGeneration, st.DesiredGeneration = 3, 3
	st.PrintableStatus = []kubevirtv1.VirtualMachinePrintableStatus{kubevirtv1.VirtualMachineStatusRunning, kubevirtv1.VirtualMachineStatusStopped, ""}[r.IntN(3)]
	st.Conditions = append(st.Conditions, kubevirtv1.VirtualMachineCondition{Type: kubevirtv1.VirtualMachineReady, Status: corev1.ConditionTrue, Reason: "Ready"},
		kubevirtv1.VirtualMachineCondition{Type: "LiveMigratable", Status: corev1.ConditionFalse, Message: "cannot migrate VMI: PVC is not shared"})
	if r.IntN(3) == 0 {
		st.Conditions = append(st.Conditions, kubevirtv1.VirtualMachineCondition{Type: kubevirtv1.VirtualMachineFailure, Status: corev1.ConditionTrue, Reason: "HotPlugVolumeError", Message: "failed to hot-plug"})
	}
	st.VolumeSnapshotStatuses = []kubevirtv1.VolumeSnapshotStatus{{Name: "rootdisk", Enabled: true}}
	st.RunStrategy = kubevirtv1.RunStrategyAlways
	if r.IntN(4) == 0 {
		st.StateChangeRequests = []kubevirtv1.VirtualMachineStateChangeRequest{{Action: kubevirtv1.StartRequest}}
	}
}

func clutterVMI(vmi *kubevirtv1.VirtualMachineInstance, r *rand.Rand) {
	clutterMeta(&vmi.ObjectMeta, r)
	vmi.Annotations["kubevirt.io/latest-observed-api-version"] = "v1"
	clutterDomain(&vmi.Spec, r)
	st := &vmi.Status
	st.Reason = "Scheduled"
	if st.NodeName == "" && r.IntN(2) == 0 {
		st.NodeName = "node-1"
	}
	migratable := []kubevirtv1.VirtualMachineInstanceCondition{{Type: "LiveMigratable", Status: corev1.ConditionFalse, Reason: "DisksNotLiveMigratable", Message: "PVC is not shared"}, {Type: "LiveMigratable", Status: corev1.ConditionTrue}, {}}[r.IntN(3):][:1]
	st.Conditions = append([]kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue}}, migratable...)
	if len(migratable) == 1 && migratable[0].Type == "" {
		st.Conditions = st.Conditions[:1]
	}
	if es := []kubevirtv1.EvictionStrategy{kubevirtv1.EvictionStrategyLiveMigrate, kubevirtv1.EvictionStrategyNone, ""}[r.IntN(3)]; es != "" {
		vmi.Spec.EvictionStrategy = &es
	}
	st.PhaseTransitionTimestamps = []kubevirtv1.VirtualMachineInstancePhaseTransitionTimestamp{{Phase: kubevirtv1.Running, PhaseTransitionTimestamp: metav1.NewTime(fixture.Epoch())}}
	st.Interfaces = []kubevirtv1.VirtualMachineInstanceNetworkInterface{{Name: "default", IP: "10.0.2.2", MAC: "52:54:00:12:34:56", IPs: []string{"10.0.2.2"}}}
	st.GuestOSInfo = kubevirtv1.VirtualMachineInstanceGuestOSInfo{Name: "Fedora Linux", KernelRelease: "6.11.4", ID: "fedora"}
	qos := corev1.PodQOSBurstable
	st.QOSClass = &qos
	st.LauncherContainerImageVersion = "quay.io/kubevirt/virt-launcher:v1.9.0"
	st.Machine = &kubevirtv1.Machine{Type: "pc-q35-rhel9.4.0"}
	st.VirtualMachineRevisionName = "revision-start-vm-1"
	for i := range st.VolumeStatus {
		vs := &st.VolumeStatus[i]
		vs.Target, vs.Size = "sd"+string(rune('a'+i)), 10<<30
		vs.Reason, vs.Message = "VolumeReady", "Successfully attach hotplugged volume "+vs.Name+" to VM"
		if vs.PersistentVolumeClaimInfo != nil {
			vs.PersistentVolumeClaimInfo.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
			vs.PersistentVolumeClaimInfo.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}
			fs := kubevirtv1.Percent("0.055")
			vs.PersistentVolumeClaimInfo.FilesystemOverhead = &fs
		}
	}
	if ms := st.MigrationState; ms != nil {
		ms.TargetNodeAddress = "192.0.2.11"
		ms.TargetDirectMigrationNodePorts = map[string]int{"49152": 0}
		ms.FailureReason = "target pod evicted"
		ms.VMIMConfigurationOptions = &kubevirtv1.VMIMConfigurationOptions{}
		ms.SourceState = &kubevirtv1.VirtualMachineInstanceMigrationSourceState{}
		if r.IntN(2) == 0 {
			ms.SourceNode, ms.TargetNode, ms.MigrationUID = "node-1", "node-2", "m-1"
		}
	}
}

func clutterPod(pod *corev1.Pod, r *rand.Rand) {
	clutterMeta(&pod.ObjectMeta, r)
	pod.Spec.Containers = []corev1.Container{{Name: "hotplug-disk", Image: "quay.io/kubevirt/virt-launcher:v1.9.0", Command: []string{"/bin/sh", "-c", "tail -f /dev/null"},
		VolumeMounts: []corev1.VolumeMount{{Name: "kube-api-access", MountPath: "/var/run/secrets"}}}}
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
	pod.Spec.Tolerations = []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
	pod.Spec.ServiceAccountName = "default"
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}}}}}})
	if r.IntN(4) == 0 {
		// A name the checks look for, on a volume that is not a claim.
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "v1", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	st := &pod.Status
	st.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	st.HostIP, st.PodIP = "192.0.2.10", "10.244.1.7"
	st.PodIPs = []corev1.PodIP{{IP: "10.244.1.7"}}
	st.QOSClass = corev1.PodQOSBurstable
	start := metav1.NewTime(fixture.Epoch())
	st.StartTime = &start
	state := func() corev1.ContainerState {
		switch r.IntN(4) {
		case 0:
			return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 5m0s restarting failed container"}}
		case 1:
			return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", Message: "killed",
				FinishedAt: metav1.NewTime(fixture.Epoch().Add(time.Duration(r.IntN(240)) * time.Minute)), ContainerID: "containerd://abc"}}
		}
		return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}}
	}
	if r.IntN(3) != 0 {
		started := true
		st.ContainerStatuses = []corev1.ContainerStatus{{Name: "hotplug-disk", State: state(), Ready: true, RestartCount: 2, Image: "quay.io/kubevirt/virt-launcher:v1.9.0",
			ImageID: "quay.io/kubevirt/virt-launcher@sha256:0123", ContainerID: "containerd://0123", Started: &started,
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: "previous run"}}}}
		st.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init", State: state(), Image: "busybox"}}
	}
}
