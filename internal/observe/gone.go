package observe

import (
	"context"
	"fmt"
	"strings"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
	"github.com/tether-dev/tether/internal/check"
)

// MaxBlindGap is the longest gap in the controller's observations over which
// its durable "node gone since" record (a StaleVolumeAttachment Finding's
// status.nodeGoneSince) is still used: over a longer gap the node may have
// come back and gone again unseen.
const MaxBlindGap = 3 * time.Minute

// NodesGoneFromRecords returns, per Node name, since when it can be taken to
// have been missing, from the open StaleVolumeAttachment records the
// controller keeps. Only the time the writer actually watched the node
// missing counts: from status.nodeGoneSince (not before the record was
// created) to status.lastObserved, both read on the writer's clock, and
// credited back from now; the unobserved time since lastObserved is not.
// A record is used only when it was observed within MaxBlindGap of now, is
// named as the controller names it, and is owned by one of vas (the live
// VolumeAttachments) whose node is the record's spec.node: a stray or
// hand-made record counts for nothing. Of several records of one node, the
// longest observation counts.
func NodesGoneFromRecords(recs []*v1alpha1.Finding, vas []storagev1.VolumeAttachment, now time.Time) map[string]time.Time {
	nodeOf := make(map[types.UID]string, len(vas))
	for i := range vas {
		nodeOf[vas[i].UID] = vas[i].Spec.NodeName
	}
	out := map[string]time.Time{}
	for _, rec := range recs {
		st, node := rec.Status, rec.Spec.Node
		if rec.Spec.Check != check.StaleVolumeAttachment || node == "" || st.NodeGoneSince == nil || st.LastObserved == nil ||
			st.Phase == v1alpha1.PhaseResolved || st.ResolvedAt != nil ||
			rec.Name != strings.ToLower(rec.Spec.Check)+"-"+rec.Spec.ID || !ownedByVAOn(rec, nodeOf, node) {
			continue
		}
		if now.Sub(st.LastObserved.Time) > MaxBlindGap {
			continue
		}
		from := st.NodeGoneSince.Time
		if created := rec.CreationTimestamp.Time; from.Before(created) {
			from = created
		}
		watched := st.LastObserved.Time.Sub(from)
		if watched < 0 {
			watched = 0
		}
		since := now.Add(-watched)
		if cur, ok := out[node]; !ok || since.Before(cur) {
			out[node] = since
		}
	}
	return out
}

func ownedByVAOn(rec *v1alpha1.Finding, nodeOf map[types.UID]string, node string) bool {
	for _, o := range rec.OwnerReferences {
		if o.Kind == check.KindVolumeAttachment && nodeOf[o.UID] == node {
			return true
		}
	}
	return false
}

// readGoneRecords fills s.NodesGoneSince from the controller's records. A
// cluster without the Finding CRD has none; one the caller may not read
// them in gets a warning (how long nodes have been gone stays unknown).
func readGoneRecords(ctx context.Context, c client.Client, vas []storagev1.VolumeAttachment, warn func(string)) map[string]time.Time {
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
	return NodesGoneFromRecords(recs, vas, time.Now())
}
