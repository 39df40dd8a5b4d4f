package observe

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/check"
)

// MaxBlindGap is the longest gap in the controller's observations over which
// its durable "node gone since" record (a StaleVolumeAttachment Finding's
// status.nodeGoneSince) is trusted: over a longer gap the node may have come
// back and gone again unseen, and how long it has been gone is unknown.
const MaxBlindGap = 3 * time.Minute

// NodesGoneFromRecords returns, per Node name, since when the controller has
// seen it missing, from the open StaleVolumeAttachment records it keeps.
// It only ever under-states: a time before the record existed, or in the
// future, is clamped; a record not refreshed within MaxBlindGap of now is
// not trusted; of several records of one node the earliest time counts.
func NodesGoneFromRecords(recs []*v1alpha1.Finding, now time.Time) map[string]time.Time {
	out := map[string]time.Time{}
	for _, rec := range recs {
		st := rec.Status
		if rec.Spec.Check != check.StaleVolumeAttachment || rec.Spec.Node == "" || st.NodeGoneSince == nil ||
			st.Phase == v1alpha1.PhaseResolved || st.ResolvedAt != nil {
			continue
		}
		if st.LastObserved == nil || now.Sub(st.LastObserved.Time) > MaxBlindGap {
			continue
		}
		t := st.NodeGoneSince.Time
		if created := rec.CreationTimestamp.Time; !created.IsZero() && t.Before(created) {
			t = created
		}
		if t.After(now) {
			t = now
		}
		if cur, ok := out[rec.Spec.Node]; !ok || t.Before(cur) {
			out[rec.Spec.Node] = t
		}
	}
	return out
}

// readGoneRecords fills s.NodesGoneSince from the controller's records. A
// cluster without the Finding CRD has none; one the caller may not read
// them in gets a warning (how long nodes have been gone stays unknown).
func readGoneRecords(ctx context.Context, c client.Client, warn func(string)) map[string]time.Time {
	var list v1alpha1.FindingList
	if err := c.List(ctx, &list, client.MatchingLabels{v1alpha1.LabelCheck: check.StaleVolumeAttachment}); err != nil {
		switch {
		case isNoKind(err):
		case apierrors.IsForbidden(err):
			warn("cannot list findings.tether.dev (forbidden): since when nodes have been gone is unknown, and the --fence-gone-nodes-after rule fences nothing; grant list on findings.tether.dev")
		default:
			warn(fmt.Sprintf("cannot read the controller's Finding records (%v): since when nodes have been gone is unknown", err))
		}
		return nil
	}
	recs := make([]*v1alpha1.Finding, len(list.Items))
	for i := range list.Items {
		recs[i] = &list.Items[i]
	}
	return NodesGoneFromRecords(recs, time.Now())
}
