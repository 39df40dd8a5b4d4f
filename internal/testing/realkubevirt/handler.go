package realkubevirt

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
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

	"github.com/tether-dev/tether/internal/testing/virthandler"
)

var vmiGVR = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}

// Handler runs the emulated virt-handler (package virthandler, the same
// steps the emulator takes) on the kwok Nodes: the part of KubeVirt that
// needs a host (libvirt, mounts). Each node's handler writes with its own
// identity; SetDown stops it on a node, as a crashed virt-handler would.
type Handler struct {
	nodes map[string]dynamic.Interface // per node, as that node's handler
	host  kubernetes.Interface
	log   *log.Logger

	down virthandler.Switch
	held virthandler.Switch // VMIs (namespace/name) whose migration does not converge

	mu     sync.Mutex
	exited map[types.UID]bool // migrations whose source launcher has ended
}

// SetDown stops (true) or restarts (false) the handler on node.
func (h *Handler) SetDown(node string, down bool) { h.down.SetDown(node, down) }

// HoldMigration keeps (true) the memory copy of the VMI's live migration
// from converging, as a guest dirtying memory faster than the link copies
// it would: the migration stays Running, the VMI on its source node, until
// it is let go (false).
func (h *Handler) HoldMigration(namespace, name string, hold bool) {
	h.held.SetDown(namespace+"/"+name, hold)
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
		nodes:  map[string]dynamic.Interface{},
		exited: map[types.UID]bool{},
		log:    log.New(logFile, "", log.LstdFlags|log.Lmicroseconds),
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

// sync takes, for one VMI, the step of the handler on the node it runs on
// (its VMI controller, and the source side of a migration leaving that
// node), else the step of the handler on a migration's target node, and
// writes the whole object as that node's handler when it changed (the real
// VMI CRD has no status subresource). One write per pass: the other node
// acts on the next pass, as two handlers racing on the same VMI would take
// turns through conflicts.
func (h *Handler) sync(ctx context.Context, u *unstructured.Unstructured) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, vmi); err != nil {
		return
	}
	if node := vmi.Status.NodeName; h.nodes[node] != nil && !h.down.Down(node) {
		var host virthandler.Mounted
		if vmi.Status.Phase == kubevirtv1.Running && vmi.DeletionTimestamp == nil && hasHotplug(vmi) {
			host = h.mounted(ctx, vmi)
		}
		if virthandler.Step(vmi, host, nil) || virthandler.MigrationSource(vmi, node) {
			h.write(ctx, node, vmi)
			return
		}
	}
	if ms := vmi.Status.MigrationState; ms != nil && virthandler.MigratedAway(vmi, ms.SourceNode) && !h.down.Down(ms.SourceNode) {
		h.launcherExits(ctx, vmi, ms.SourceNode)
	}
	if node := vmi.Labels[kubevirtv1.MigrationTargetNodeNameLabel]; h.nodes[node] != nil && !h.down.Down(node) {
		host := virthandler.TargetHost{
			Address:   migrationAddress,
			Ports:     virthandler.DefaultTargetPorts(),
			Converged: !h.held.Down(vmi.Namespace + "/" + vmi.Name),
		}
		if virthandler.MigrationTarget(vmi, node, host) {
			h.write(ctx, node, vmi)
		}
	}
}

// launcherExits ends the VMI's virt-launcher pods on node once its domain
// migrated away: the launcher process exits and the kubelet reports the
// pod Succeeded (written here with the admin client, as the host's part).
func (h *Handler) launcherExits(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, node string) {
	key := vmi.Status.MigrationState.MigrationUID
	h.mu.Lock()
	done := h.exited[key]
	h.mu.Unlock()
	if done {
		return
	}
	pods, err := h.host.CoreV1().Pods(vmi.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: kubevirtv1.AppLabel + "=virt-launcher," + kubevirtv1.CreatedByLabel + "=" + string(vmi.UID),
		FieldSelector: "spec.nodeName=" + node,
	})
	if err != nil {
		return
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if err := h.complete(ctx, p); err != nil {
			h.log.Printf("ending launcher pod %s/%s on %s: %v", p.Namespace, p.Name, node, err)
			return
		}
		h.log.Printf("launcher pod %s/%s on %s ended: its domain migrated to %s", p.Namespace, p.Name, node, vmi.Status.NodeName)
	}
	h.mu.Lock()
	h.exited[key] = true
	h.mu.Unlock()
}

// complete reports the pod's containers exited with 0, as the kubelet does.
func (h *Handler) complete(ctx context.Context, p *corev1.Pod) error {
	now := metav1.Now()
	p.Status.Phase = corev1.PodSucceeded
	for i := range p.Status.ContainerStatuses {
		c := &p.Status.ContainerStatuses[i]
		c.Ready, c.Started = false, nil
		c.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: now}}
	}
	for i := range p.Status.Conditions {
		if c := &p.Status.Conditions[i]; c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
			c.Status, c.LastTransitionTime = corev1.ConditionFalse, now
		}
	}
	_, err := h.host.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return err
}

// migrationAddress is where a target's migration proxy listens: kwok gives
// every Node the address 127.0.0.1.
const migrationAddress = "127.0.0.1"

// write updates the VMI as node's handler. A conflict means someone else
// wrote first: the next pass retries.
func (h *Handler) write(ctx context.Context, node string, vmi *kubevirtv1.VirtualMachineInstance) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(vmi)
	if err != nil {
		return
	}
	if _, err := h.nodes[node].Resource(vmiGVR).Namespace(vmi.Namespace).Update(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{}); err != nil {
		h.log.Printf("update of VMI %s/%s by the handler on %s failed: %v", vmi.Namespace, vmi.Name, node, err)
	}
}

func (h *Handler) anyNode() dynamic.Interface {
	for _, d := range h.nodes {
		return d
	}
	return nil
}

func hasHotplug(vmi *kubevirtv1.VirtualMachineInstance) bool {
	for _, s := range vmi.Status.VolumeStatus {
		if s.HotplugVolume != nil {
			return true
		}
	}
	return false
}

// mounted is what the VMI's host has mounted: its attachment pods that run
// there. What a real virt-handler learns from its host is read here with
// the admin client (the kubevirt-handler role has no access to pods).
func (h *Handler) mounted(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) virthandler.Mounted {
	pods, err := h.host.CoreV1().Pods(vmi.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io=hotplug-disk"})
	if err != nil {
		return nil
	}
	var onNode []*corev1.Pod
	for i := range pods.Items {
		if pods.Items[i].Spec.NodeName == vmi.Status.NodeName {
			onNode = append(onNode, &pods.Items[i])
		}
	}
	return virthandler.MountedBy(onNode)
}

// SetHandlerDown stops (true) or restarts (false) virt-handler on node.
func (k *KubeVirt) SetHandlerDown(node string, down bool) { k.Handler.SetDown(node, down) }
