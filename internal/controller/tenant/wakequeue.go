package tenant

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// WakeQueue holds the VMIs (or tenant nodes) that tenant changes woke, each
// once, until the leader's hot-plug (or fence) controller takes them. The tenant watches run on every
// replica, the controller only on the leader: a handler therefore never
// waits for a reader, and what a standby holds is bounded by the number of
// distinct VMIs, however many tenant events arrive.
type WakeQueue struct {
	mu      sync.Mutex
	pending map[types.NamespacedName]struct{}
	// wake holds one token while something is pending.
	wake chan struct{}
	// out is the controller's channel source.
	out chan event.GenericEvent
	// object is the event's object for a key.
	object func(types.NamespacedName) client.Object
}

// NewWakeQueue returns an empty queue of VMIs, for the hot-plug controller.
func NewWakeQueue() *WakeQueue {
	return newWakeQueue(func(k types.NamespacedName) client.Object {
		return &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}
	})
}

// NewNodeWakeQueue returns an empty queue of tenant nodes, for the fence
// controller: a key's namespace is the tenant's name, its name the node's
// (the tenant's Nodes are cluster-scoped there).
func NewNodeWakeQueue() *WakeQueue {
	return newWakeQueue(func(k types.NamespacedName) client.Object {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}
	})
}

func newWakeQueue(object func(types.NamespacedName) client.Object) *WakeQueue {
	return &WakeQueue{
		pending: map[types.NamespacedName]struct{}{},
		wake:    make(chan struct{}, 1),
		out:     make(chan event.GenericEvent, 1024),
		object:  object,
	}
}

// add notes the VMIs with these keys as woken; it never blocks.
func (q *WakeQueue) add(keys []metav1.ObjectMeta) {
	if len(keys) == 0 {
		return
	}
	q.mu.Lock()
	for _, k := range keys {
		q.pending[types.NamespacedName{Namespace: k.Namespace, Name: k.Name}] = struct{}{}
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default: // a token is already there
	}
}

// take returns and forgets what is pending.
func (q *WakeQueue) take() []types.NamespacedName {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(q.pending))
	for k := range q.pending {
		out = append(out, k)
	}
	clear(q.pending)
	return out
}

// size is how many VMIs are pending.
func (q *WakeQueue) size() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending)
}

// Start forwards the woken VMIs to the controller until ctx ends. It is a
// manager runnable that needs leader election: it runs only where the
// controller that drains out runs.
func (q *WakeQueue) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-q.wake:
		}
		for _, k := range q.take() {
			ev := event.GenericEvent{Object: q.object(k)}
			select {
			case q.out <- ev:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// Out is the channel the hot-plug controller takes the woken VMIs from (a
// channel source).
func (q *WakeQueue) Out() <-chan event.GenericEvent { return q.out }
