package protect

import (
	"context"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
	"github.com/tether-dev/tether/internal/metrics"
	"github.com/tether-dev/tether/internal/protect/inuse"
)

// deletingGauge recounts, from the cache every interval, the objects being
// deleted that keep the finalizer: postponed (a VM uses them) or releasing
// (none does; the reconciler releases them once the release delay has
// passed). A releasing object that stays is a release backlog: the
// controller is down, not leader anywhere, or cannot patch.
type deletingGauge struct {
	cache    client.Reader
	kinds    []inuse.Kind
	interval time.Duration
}

// Start implements manager.Runnable.
func (g deletingGauge) Start(ctx context.Context) error {
	t := time.NewTicker(g.interval)
	defer t.Stop()
	for {
		g.count(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection: every replica reports what its cache holds.
func (g deletingGauge) NeedLeaderElection() bool { return false }

type deletingLabels struct {
	kind  inuse.Kind
	state string
}

func (g deletingGauge) count(ctx context.Context) {
	var vms kubevirtv1.VirtualMachineList
	if err := g.cache.List(ctx, &vms); err != nil {
		return
	}
	byNS := map[string][]snapshot.VM{}
	for i := range vms.Items {
		vm := &vms.Items[i]
		byNS[vm.Namespace] = append(byNS[vm.Namespace], snapshot.VMOf(vm))
	}
	n := map[deletingLabels]int{}
	oldest := map[deletingLabels]time.Time{}
	for _, k := range g.kinds {
		list, objects := newList(k)
		if err := g.cache.List(ctx, list); err != nil {
			return
		}
		for _, o := range objects() {
			dt := o.GetDeletionTimestamp()
			if dt == nil || !inuse.HasFinalizer(o) {
				continue
			}
			l := deletingLabels{k, metrics.DeletingReleasing}
			if len(inuse.Users(inuse.Ref{Kind: k, Namespace: o.GetNamespace(), Name: o.GetName()}, o, byNS[o.GetNamespace()])) > 0 {
				l.state = metrics.DeletingPostponed
			}
			n[l]++
			if t, ok := oldest[l]; !ok || dt.Time.Before(t) {
				oldest[l] = dt.Time
			}
		}
	}
	metrics.ProtectionDeletingOldest.Reset()
	for _, k := range g.kinds {
		for _, s := range []string{metrics.DeletingPostponed, metrics.DeletingReleasing} {
			l := deletingLabels{k, s}
			metrics.ProtectionDeleting.WithLabelValues(string(k), s).Set(float64(n[l]))
			if t, ok := oldest[l]; ok {
				metrics.ProtectionDeletingOldest.WithLabelValues(string(k), s).Set(float64(t.Unix()))
			}
		}
	}
}
