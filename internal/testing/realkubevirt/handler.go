package realkubevirt

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

var vmiGVR = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}

// Handler plays virt-handler on the kwok Nodes: the part of KubeVirt that
// needs a host (libvirt, mounts). It follows virt-handler's observable
// steps (pkg/virt-handler/vm.go, KubeVirt v1.9.0), one step per pass so
// each phase can be seen:
//
//   - a VMI that virt-controller has Scheduled on one of its nodes starts:
//     phase Running, SELinux context "none", machine type q35;
//   - a hot-plug volume still in the VMI spec whose attachment pod (by the
//     UID virt-controller recorded) runs is mounted (MountedToPod), then
//     attached to the domain (a target, Ready);
//   - a hot-plug volume gone from the spec is detached from the domain
//     (target cleared), then unmounted (UnMountedFromPod), after which
//     virt-controller deletes the attachment pod and the entry;
//   - a deleted VMI's domain is shut down: phase Succeeded.
//
// SetDown stops all of it on a node, as a crashed virt-handler would.
type Handler struct {
	nodes map[string]dynamic.Interface // per node, as that node's handler
	host  kubernetes.Interface
	log   *log.Logger

	mu      sync.Mutex
	down    map[string]bool
	targets map[types.UID]map[string]string // per VMI: volume -> device
}

// SetDown stops (true) or restarts (false) the handler on node.
func (h *Handler) SetDown(node string, down bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.down[node] = down
}

func (h *Handler) isDown(node string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.down[node]
}

// startHandler runs the emulated virt-handler. As on a real cluster, each
// node's virt-handler is a pod there (kubevirt-handler's service account)
// and talks with a token bound to that pod, which carries the node's name:
// virt-api's webhooks let a handler change only VMIs on its own node.
func (k *KubeVirt) startHandler(ctx, runCtx context.Context) error {
	logFile, err := os.Create(filepath.Join(k.LogDir(), "virt-handler.log"))
	if err != nil {
		return err
	}
	k.closers = append(k.closers, logFile)
	h := &Handler{
		nodes: map[string]dynamic.Interface{}, down: map[string]bool{}, targets: map[types.UID]map[string]string{},
		log: log.New(logFile, "", log.LstdFlags|log.Lmicroseconds),
	}
	for _, node := range k.o.Nodes {
		cfg, err := k.handlerConfig(ctx, node)
		if err != nil {
			return err
		}
		if h.nodes[node], err = dynamic.NewForConfig(cfg); err != nil {
			return err
		}
	}
	// What a real virt-handler learns from its host (which attachment pod's
	// volumes are mounted there) is read here with the admin client: the
	// kubevirt-handler role has no access to pods.
	h.host = k.client
	if _, err := h.nodes[k.o.Nodes[0]].Resource(vmiGVR).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return fmt.Errorf("kubevirt-handler cannot list VMIs: %w", err)
	}
	k.Handler = h
	k.loop(runCtx, h.run)
	return nil
}

// handlerConfig creates node's virt-handler pod and returns a client
// configuration with a token bound to it.
func (k *KubeVirt) handlerConfig(ctx context.Context, node string) (*rest.Config, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "virt-handler-" + node, Namespace: Namespace, Labels: map[string]string{"kubevirt.io": "virt-handler"}},
		Spec: corev1.PodSpec{
			NodeName: node, ServiceAccountName: handlerSA,
			Containers: []corev1.Container{{Name: "virt-handler", Image: "quay.io/kubevirt/virt-handler:" + k.Version}},
		},
	}
	got, err := k.client.CoreV1().Pods(Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		got, err = k.client.CoreV1().Pods(Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("virt-handler pod on %s: %w", node, err)
	}
	ttl := int64((48 * time.Hour).Seconds())
	tr, err := k.client.CoreV1().ServiceAccounts(Namespace).CreateToken(ctx, handlerSA, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: &ttl,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: got.Name, UID: got.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for virt-handler on %s: %w", node, err)
	}
	cfg := rest.AnonymousClientConfig(k.o.Config)
	cfg.BearerToken = tr.Status.Token
	cfg.QPS, cfg.Burst = 100, 200
	return cfg, nil
}

func (h *Handler) run(ctx context.Context) { every(ctx, 100*time.Millisecond, h.pass) }

func (h *Handler) pass(ctx context.Context) {
	list, err := h.anyNode().Resource(vmiGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := range list.Items {
		h.sync(ctx, &list.Items[i])
	}
}

// sync takes one step for one VMI and writes the whole object when it
// changed (the real VMI CRD has no status subresource).
func (h *Handler) sync(ctx context.Context, u *unstructured.Unstructured) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, vmi); err != nil {
		return
	}
	node := vmi.Status.NodeName
	dyn := h.nodes[node]
	if dyn == nil || h.isDown(node) {
		return
	}
	changed := false
	switch {
	case vmi.DeletionTimestamp != nil && !vmi.IsFinal():
		vmi.Status.Phase = kubevirtv1.Succeeded
		changed = true
	case vmi.Status.Phase == kubevirtv1.Scheduled:
		vmi.Status.Phase = kubevirtv1.Running
		// What virt-handler reports of a domain started on a host without
		// SELinux; virt-controller copies the context into attachment pods
		// and creates none while it is missing.
		vmi.Status.SelinuxContext = "none"
		if vmi.Status.Machine == nil {
			vmi.Status.Machine = &kubevirtv1.Machine{Type: "q35"}
		}
		changed = true
	case vmi.Status.Phase == kubevirtv1.Running:
		changed = h.stepVolumes(ctx, vmi)
	}
	if !changed {
		return
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(vmi)
	if err != nil {
		return
	}
	// A conflict means someone else wrote first: the next pass retries.
	if _, err := dyn.Resource(vmiGVR).Namespace(vmi.Namespace).Update(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{}); err != nil {
		h.log.Printf("update of VMI %s/%s failed: %v", vmi.Namespace, vmi.Name, err)
	}
}

func (h *Handler) anyNode() dynamic.Interface {
	for _, d := range h.nodes {
		return d
	}
	return nil
}

// stepVolumes moves every volume status one step and sorts them by name,
// as virt-handler does.
func (h *Handler) stepVolumes(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) bool {
	inSpec := map[string]bool{}
	for _, v := range vmi.Spec.Volumes {
		inSpec[v.Name] = true
	}
	changed := false
	var running map[types.UID]bool // read once per pass, on the first hot-plug
	for i := range vmi.Status.VolumeStatus {
		s := &vmi.Status.VolumeStatus[i]
		before := *s
		if s.HotplugVolume == nil {
			if s.Target == "" && inSpec[s.Name] {
				s.Target = h.target(vmi.UID, s.Name, "vd")
			}
		} else {
			if running == nil {
				running = h.runningAttachmentPods(ctx, vmi.Namespace)
			}
			h.stepHotplug(vmi, s, inSpec[s.Name], running)
		}
		changed = changed || before.Phase != s.Phase || before.Target != s.Target
	}
	sorted := sort.SliceIsSorted(vmi.Status.VolumeStatus, func(i, j int) bool {
		return vmi.Status.VolumeStatus[i].Name < vmi.Status.VolumeStatus[j].Name
	})
	if !sorted {
		sort.SliceStable(vmi.Status.VolumeStatus, func(i, j int) bool {
			return vmi.Status.VolumeStatus[i].Name < vmi.Status.VolumeStatus[j].Name
		})
		changed = true
	}
	return changed
}

func (h *Handler) stepHotplug(vmi *kubevirtv1.VirtualMachineInstance, s *kubevirtv1.VolumeStatus, wanted bool, running map[types.UID]bool) {
	switch {
	case s.Target != "" && wanted:
		s.Phase, s.Reason = kubevirtv1.VolumeReady, "VolumeReady"
		s.Message = fmt.Sprintf("Successfully attach hotplugged volume %s to VM", s.Name)
	case s.Target != "":
		// Gone from the spec: the domain detaches the disk first.
		s.Target = ""
		h.forget(vmi.UID, s.Name)
	case wanted && s.Phase == kubevirtv1.HotplugVolumeMounted:
		s.Target = h.target(vmi.UID, s.Name, "sd")
		s.Phase, s.Reason = kubevirtv1.VolumeReady, "VolumeReady"
		s.Message = fmt.Sprintf("Successfully attach hotplugged volume %s to VM", s.Name)
	case wanted && canMount(s.Phase) && s.HotplugVolume.AttachPodUID != "" && running[s.HotplugVolume.AttachPodUID]:
		s.Phase, s.Reason = kubevirtv1.HotplugVolumeMounted, "VolumeMountedToPod"
		s.Message = fmt.Sprintf("Volume %s has been mounted in virt-launcher pod", s.Name)
	case !wanted && canUnmount(s.Phase):
		s.Phase, s.Reason = kubevirtv1.HotplugVolumeUnMounted, "VolumeUnMountedFromPod"
		s.Message = fmt.Sprintf("Volume %s has been unmounted from virt-launcher pod", s.Name)
	}
}

// canMount and canUnmount are the phases virt-handler moves from
// (pkg/virt-handler/vm.go canUpdateToMounted, canUpdateToUnmounted).
func canMount(p kubevirtv1.VolumePhase) bool {
	return p == kubevirtv1.VolumeBound || p == kubevirtv1.VolumePending || p == kubevirtv1.HotplugVolumeAttachedToNode
}

func canUnmount(p kubevirtv1.VolumePhase) bool {
	return p == kubevirtv1.VolumeReady || p == kubevirtv1.HotplugVolumeMounted || p == kubevirtv1.HotplugVolumeAttachedToNode
}

// runningAttachmentPods are the UIDs of the namespace's attachment pods
// that run: only their volumes are mounted on the host (virt-controller
// records a pod's UID once it is ready).
func (h *Handler) runningAttachmentPods(ctx context.Context, ns string) map[types.UID]bool {
	out := map[types.UID]bool{}
	pods, err := h.host.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io=hotplug-disk"})
	if err != nil {
		return out
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out[p.UID] = true
		}
	}
	return out
}

// target gives the volume a device name, stable for the VMI's life.
func (h *Handler) target(vmi types.UID, vol, prefix string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.targets[vmi]
	if m == nil {
		m = map[string]string{}
		h.targets[vmi] = m
	}
	if t, ok := m[vol]; ok {
		return t
	}
	used := map[string]bool{}
	for _, t := range m {
		used[t] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		if t := prefix + string(c); !used[t] {
			m[vol] = t
			return t
		}
	}
	return prefix + "z"
}

func (h *Handler) forget(vmi types.UID, vol string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.targets[vmi], vol)
}

// SetHandlerDown stops (true) or restarts (false) virt-handler on node.
func (k *KubeVirt) SetHandlerDown(node string, down bool) { k.Handler.SetDown(node, down) }
