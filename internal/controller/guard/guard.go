// Package guard is the controller's anomaly guard: it refuses to act when
// the picture the controller acts from looks wrong.
package guard

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	toolscache "k8s.io/client-go/tools/cache"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/controller/tenant"
	"github.com/tether-dev/tether/internal/findingrecord"
	"github.com/tether-dev/tether/internal/kubevirt"
	"github.com/tether-dev/tether/internal/metrics"
	"github.com/tether-dev/tether/internal/plan"
)

// Interval is how often the anomaly guard looks at the picture.
const Interval = 15 * time.Second

// Guard is the controller's anomaly guard (issue: refuse when the
// world looks wrong). On the leader, every guardInterval, it counts from
// the caches what the controller acts from (its VMIs, each tenant's
// VolumeAttachments of its driver and the hot-plugs of the VMIs it serves,
// the findings safe to act on), compares with the counts it last recorded
// in the guard record (findingrecord.Guard), and trips the guard when the
// picture turned wrong: then no process that records into the namespace
// acts (records.Keeper) until an operator resets it. It reads no API
// beyond the caches, and writes the record only when what the comparison
// reads changed.
type Guard struct {
	Cache client.Reader
	// Informers gives the VMI informer whose events keep the guard's
	// tally (the manager's cache).
	Informers Informers
	Live      client.Client
	Namespace string
	Tenants   []*tenant.Watch
	Guard     plan.Guard
	Log       logr.Logger
	Now       func() time.Time
	Every     time.Duration
}

// Informers gives an informer of a kind (controller-runtime's cache).
type Informers interface {
	GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error)
}

// Start implements manager.Runnable (on the leader).
func (g Guard) Start(ctx context.Context) error {
	tally, stop, err := g.tally(ctx)
	if err != nil {
		return err
	}
	defer stop()
	t := time.NewTicker(g.Every)
	defer t.Stop()
	for {
		if err := g.look(ctx, tally); err != nil {
			g.Log.Error(err, "the anomaly guard could not look; it looks again", "every", g.Every.String())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// tally registers a Tally with the VMI informer and returns it once it
// has seen every VMI the informer held (a look before would miss some),
// with the function that unregisters it.
func (g Guard) tally(ctx context.Context) (*Tally, func(), error) {
	inf, err := g.Informers.GetInformer(ctx, &kubevirtv1.VirtualMachineInstance{})
	if err != nil {
		return nil, nil, fmt.Errorf("the anomaly guard's VMI informer: %w", err)
	}
	tally := NewTally()
	reg, err := inf.AddEventHandler(tally)
	if err != nil {
		return nil, nil, fmt.Errorf("the anomaly guard's VMI informer: %w", err)
	}
	stop := func() { _ = inf.RemoveEventHandler(reg) }
	if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		stop()
		return nil, nil, ctx.Err()
	}
	return tally, stop, nil
}

// look is one comparison: trip on reasons, record counts that changed.
func (g Guard) look(ctx context.Context, tally *Tally) error {
	st, err := findingrecord.Guard(ctx, g.Cache, g.Namespace)
	if err != nil {
		return err
	}
	now, err := g.count(ctx, tally)
	if err != nil {
		return err
	}
	if reasons := Reasons(st.Last, now); len(reasons) > 0 && !st.Tripped {
		msg := "acting stopped: the picture looks wrong: " + strings.Join(reasons, "; ") +
			fmt.Sprintf("; check it with `tether audit`, then run `tether controller reset-guard -n %s`", g.Namespace)
		if err := findingrecord.TripGuard(ctx, g.Live, g.Namespace, g.Now(), msg); err != nil {
			return err
		}
		metrics.AnomalyGuardTripped.Set(1)
		g.Log.Info("anomaly guard tripped; acting stopped until an operator resets it", "guard", g.Namespace+"/"+findingrecord.GuardName, "reasons", reasons)
	}
	if st.Last == nil || shape(*st.Last) != shape(now) {
		return findingrecord.RecordCounts(ctx, g.Live, g.Namespace, now)
	}
	return nil
}

// count reads the counts: of the VMIs from the tally, of the records from
// the cache, objects shared, not copied.
func (g Guard) count(ctx context.Context, tally *Tally) (findingrecord.Counts, error) {
	c := findingrecord.Counts{TenantAttachments: map[string]int{}, Hotplugs: map[string]int{}}
	c.VMIs = tally.VMIs()
	subjects := c.VMIs
	for _, tw := range g.Tenants {
		if !tw.Up(g.Now()) {
			continue // unknown: its last counts stand
		}
		c.TenantAttachments[tw.Name()] = tw.Attachments()
		subjects += len(tw.NodeNames())
		c.Hotplugs[tw.Name()] = tally.Hotplugs(tw.Applies)
	}
	var recs v1alpha1.FindingList
	if err := g.Cache.List(ctx, &recs, client.UnsafeDisableDeepCopy); err != nil {
		return c, err
	}
	for i := range recs.Items {
		rec := &recs.Items[i]
		if !findingrecord.NoFinding(rec) && rec.Status.SafeSince != nil && !findingrecord.Finished(rec) {
			c.Safe++
		}
	}
	c.Limit = g.Guard.Limit(subjects)
	return c, nil
}

// Reasons says why the picture now looks wrong after last (nil: the
// first look of a controller in this namespace); nil when it does not. The
// guard trips on a change, so that a picture an operator accepted (by
// resetting the guard) does not trip it again:
//   - a tenant lists no VolumeAttachment of its driver while the VMIs it
//     serves hold at least kubevirt.AnomalyFloor hot-plugs, and it listed
//     some before (or this is the first look: the one-shot anomaly);
//   - the VMIs went from at least kubevirt.AnomalyFloor to none;
//   - the findings safe to act on passed the limit (they were within it,
//     or this is the first look).
func Reasons(last *findingrecord.Counts, now findingrecord.Counts) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(now.TenantAttachments)) {
		vas, hot := now.TenantAttachments[name], now.Hotplugs[name]
		before, known := 0, false
		if last != nil {
			before, known = last.TenantAttachments[name]
		}
		if vas == 0 && hot >= kubevirt.AnomalyFloor && (!known || before > 0) {
			was := ""
			if known {
				was = fmt.Sprintf(" (it listed %d before)", before)
			}
			out = append(out, fmt.Sprintf("tenant %q lists no VolumeAttachment of its driver%s, while the VMIs it serves hold %d hot-plugged volumes", name, was, hot))
		}
	}
	if last != nil && last.VMIs >= kubevirt.AnomalyFloor && now.VMIs == 0 {
		out = append(out, fmt.Sprintf("the controller's caches hold no VMI, where they held %d", last.VMIs))
	}
	if now.Safe > now.Limit && (last == nil || last.Safe <= last.Limit) {
		out = append(out, fmt.Sprintf("%d findings are safe to act on at once, more than the limit of %d: a half-read world looks like mass drift", now.Safe, now.Limit))
	}
	return out
}

// shape is what guardReasons reads of counts: whether each tenant lists
// attachments, whether there are VMIs, whether the safe findings are over
// the limit. The record is rewritten only when it changes.
func shape(c findingrecord.Counts) string {
	var b strings.Builder
	fmt.Fprintf(&b, "vmis>=%v safe>limit=%v", c.VMIs >= kubevirt.AnomalyFloor, c.Safe > c.Limit)
	for _, name := range slices.Sorted(maps.Keys(c.TenantAttachments)) {
		fmt.Fprintf(&b, " %s:%v", name, c.TenantAttachments[name] > 0)
	}
	return b.String()
}
