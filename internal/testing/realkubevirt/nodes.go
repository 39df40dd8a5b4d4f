package realkubevirt

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/tether-dev/tether/internal/testing/controlplane"
)

// kwokAnnotation marks the Nodes kwok manages (and only those).
const kwokAnnotation = "kwok.x-k8s.io/node"

// PodHold is the annotation (value "true") that makes kwok leave a pod
// alone, and the finalizer that keeps it in the API once deleted: see
// HoldPod.
const PodHold = "realkubevirt.tether.dev/hold"

// startNodes starts kwok, creates the Nodes it manages (labelled
// schedulable for KubeVirt, as virt-handler labels its node) and starts the
// binder. It returns once every Node is Ready.
func (k *KubeVirt) startNodes(ctx, runCtx context.Context) error {
	kc := filepath.Join(k.o.Dir, "pki", "admin.kubeconfig")
	if err := controlplane.WriteKubeconfig(kc, k.o.Config); err != nil {
		return err
	}
	p, err := k.run("kwok",
		"--kubeconfig="+kc,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+kwokAnnotation+"=fake",
		"--cidr=10.244.0.1/16",
		"--node-ip=127.0.0.1",
		"--server-address=",
		// Deprecated in kwok v0.7.0 in favour of stages, which would have to
		// restate kwok's default pod stages; still honoured (pod_controller.go need).
		"--disregard-status-with-annotation-selector="+PodHold+"=true",
	)
	if err != nil {
		return err
	}
	for _, name := range k.o.Nodes {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"type": "kwok",
				// What virt-handler's node labeller sets on a healthy amd64 host;
				// virt-controller selects nodes for launcher pods by these.
				"kubevirt.io/schedulable": "true", "machine-type.node.kubevirt.io/q35": "true",
			},
			Annotations: map[string]string{kwokAnnotation: "fake"},
		}}
		if _, err := k.client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating node %s: %w", name, err)
		}
	}
	if err := p.WaitFor(ctx, k.nodesReady); err != nil {
		return err
	}
	k.loop(runCtx, k.bindLoop)
	k.loop(runCtx, k.provisionLoop)
	return nil
}

// HoldPod keeps the pod in the API after it is deleted (true), as any
// finalizer on it does, until let go (false): it adds (removes) the
// finalizer PodHold and the annotation that tells kwok to leave the pod
// alone, because kwok, unlike a kubelet, strips every finalizer of a
// deleted pod. While held the pod keeps its status. virt-controller deletes
// attachment pods with a grace period of 0, so without a finalizer they
// leave the API at once. It works in any world (where no kwok runs, the
// annotation is inert).
func HoldPod(ctx context.Context, c kubernetes.Interface, namespace, name string, hold bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := c.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Finalizers = slices.DeleteFunc(p.Finalizers, func(f string) bool { return f == PodHold })
		delete(p.Annotations, PodHold)
		if hold {
			p.Finalizers = append(p.Finalizers, PodHold)
			metav1.SetMetaDataAnnotation(&p.ObjectMeta, PodHold, "true")
		}
		_, err = c.CoreV1().Pods(namespace).Update(ctx, p, metav1.UpdateOptions{})
		return err
	})
}

func (k *KubeVirt) nodesReady(ctx context.Context) bool {
	for _, name := range k.o.Nodes {
		n, err := k.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil || !nodeReady(n) {
			return false
		}
	}
	return true
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// bindLoop is a minimal scheduler: every 100 ms it binds pods that wait for
// the default scheduler to the first kwok Node that their node selector,
// required node affinity and required pod anti-affinity on the hostname
// allow (virt-controller gives a migration's target launcher pod one
// against the VMI's other pods, migration.go:889-911, so that it lands on
// another node). Like the scheduler's VolumeBinding plugin, it leaves a pod
// unscheduled while a claim it mounts is not Bound ("pod has unbound
// immediate PersistentVolumeClaims"; the provisioner here binds immediately,
// so every claim is of immediate binding). It ignores resources and taints,
// which no test here exercises.
func (k *KubeVirt) bindLoop(ctx context.Context) { every(ctx, 100*time.Millisecond, k.bindPass) }

func (k *KubeVirt) bindPass(ctx context.Context) {
	pods, err := k.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName="})
	if err != nil {
		return
	}
	nodes, err := k.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
	if err != nil {
		return
	}
	var bound []corev1.Pod
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.DeletionTimestamp != nil || (pod.Spec.SchedulerName != "" && pod.Spec.SchedulerName != corev1.DefaultSchedulerName) {
			continue
		}
		if !k.claimsBound(ctx, pod) {
			continue
		}
		if bound == nil && hasPodAntiAffinity(pod) {
			all, err := k.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
			if err != nil {
				return
			}
			bound = all.Items
		}
		if node := placeFor(pod, nodes.Items, bound); node != "" {
			b := &corev1.Binding{
				ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
				Target:     corev1.ObjectReference{Kind: "Node", Name: node},
			}
			_ = k.client.CoreV1().Pods(pod.Namespace).Bind(ctx, b, metav1.CreateOptions{})
		}
	}
}

// claimsBound reports whether every claim the pod mounts is Bound.
func (k *KubeVirt) claimsBound(ctx context.Context, pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		c, err := k.client.CoreV1().PersistentVolumeClaims(pod.Namespace).Get(ctx, v.PersistentVolumeClaim.ClaimName, metav1.GetOptions{})
		if err != nil || c.Status.Phase != corev1.ClaimBound {
			return false
		}
	}
	return true
}

// placeFor picks the first node whose labels satisfy the pod's nodeSelector
// and every required node-affinity term it can read (In/NotIn/Exists on
// node labels; terms are ORed, expressions ANDed, as the scheduler does),
// and that runs none of the pods its required anti-affinity on the
// hostname names.
func placeFor(pod *corev1.Pod, nodes []corev1.Node, pods []corev1.Pod) string {
	for _, n := range nodes {
		set := labels.Set(n.Labels)
		if !labels.SelectorFromSet(pod.Spec.NodeSelector).Matches(set) {
			continue
		}
		if repelled(pod, n.Name, pods) {
			continue
		}
		if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			if !anyTermMatches(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, set) {
				continue
			}
		}
		return n.Name
	}
	return ""
}

func anyTermMatches(terms []corev1.NodeSelectorTerm, set labels.Set) bool {
	for _, t := range terms {
		ok := true
		for _, e := range t.MatchExpressions {
			v, has := set[e.Key]
			switch e.Operator {
			case corev1.NodeSelectorOpIn:
				ok = ok && has && contains(e.Values, v)
			case corev1.NodeSelectorOpNotIn:
				ok = ok && !(has && contains(e.Values, v))
			case corev1.NodeSelectorOpExists:
				ok = ok && has
			case corev1.NodeSelectorOpDoesNotExist:
				ok = ok && !has
			default:
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func hasPodAntiAffinity(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	return a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0
}

// repelled reports whether a required anti-affinity term of pod on the
// hostname matches a pod of its namespace (or of the term's namespaces)
// that is bound to node and not finished.
func repelled(pod *corev1.Pod, node string, pods []corev1.Pod) bool {
	if !hasPodAntiAffinity(pod) {
		return false
	}
	for _, term := range pod.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if term.TopologyKey != corev1.LabelHostname {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		if err != nil {
			continue
		}
		namespaces := term.Namespaces
		if len(namespaces) == 0 {
			namespaces = []string{pod.Namespace}
		}
		for i := range pods {
			o := &pods[i]
			if o.Spec.NodeName != node || o.UID == pod.UID || !contains(namespaces, o.Namespace) ||
				o.Status.Phase == corev1.PodSucceeded || o.Status.Phase == corev1.PodFailed {
				continue
			}
			if sel.Matches(labels.Set(o.Labels)) {
				return true
			}
		}
	}
	return false
}
