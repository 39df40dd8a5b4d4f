package findingrecord

import (
	"context"
	"fmt"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tether-dev/tether/api/v1alpha1"
)

// MaxBlindGap is the longest gap in the controller's observations over which
// its durable "node gone since" record (a StaleVolumeAttachment Finding's
// status.nodeGoneSince) is still used: over a longer gap the node may have
// come back and gone again unseen.
const MaxBlindGap = 3 * time.Minute

// NodesGone returns, per Node name, since when it can be taken to
// have been missing, from the open StaleVolumeAttachment records the
// controller keeps in its namespace ns. Only the time the writer actually
// watched the node missing counts: from status.nodeGoneSince (not before the
// record was created) to status.lastObserved, both read on the writer's
// clock, and credited back from now; the unobserved time since lastObserved
// is not. Of several records of one node, the longest observation counts.
//
// A record is evidence only when all of these hold, and the second result
// says why each other record of the check was not used:
//   - it is in ns (records elsewhere can be written by namespace users);
//   - its status was written by the controller's field manager alone
//     (v1alpha1.Finding.StatusWrittenBy: no hand edit);
//   - none of its times (firstObserved, lastObserved, nodeGoneSince) lies
//     after now (a clock ahead, or a forged time);
//   - it was observed within MaxBlindGap of now;
//   - it is named as the controller names it and owned by one of vas (the
//     live VolumeAttachments) whose node is the record's spec.node.
func NodesGone(recs []*v1alpha1.Finding, vas []storagev1.VolumeAttachment, ns string, now time.Time) (map[string]time.Time, []string) {
	nodeOf := make(map[types.UID]string, len(vas))
	for i := range vas {
		nodeOf[vas[i].UID] = vas[i].Spec.NodeName
	}
	out := map[string]time.Time{}
	var ignored []string
	for _, rec := range recs {
		st, node := rec.Status, rec.Spec.Node
		if rec.Spec.Check != staleVolumeAttachment || node == "" || st.NodeGoneSince == nil || st.LastObserved == nil ||
			st.Phase == v1alpha1.PhaseResolved || st.ResolvedAt != nil {
			continue // not a record of a gone node
		}
		if why := goneRecordDistrust(rec, nodeOf, ns, now); why != "" {
			ignored = append(ignored, fmt.Sprintf("Finding %s/%s (node %s) is not used as evidence that the node is gone: %s", rec.Namespace, rec.Name, node, why))
			continue
		}
		if now.Sub(st.LastObserved.Time) > MaxBlindGap {
			continue // stale: the controller stopped watching
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
	return out, ignored
}

// goneRecordDistrust says why a node-gone record is no evidence, or "".
func goneRecordDistrust(rec *v1alpha1.Finding, nodeOf map[types.UID]string, ns string, now time.Time) string {
	st := rec.Status
	switch {
	case rec.Namespace != ns:
		return fmt.Sprintf("it is not in the controller's namespace %s", ns)
	case rec.Name != Name(rec.Spec.Check, rec.Spec.ID):
		return "it is not named as the controller names its records"
	case !ownedByVAOn(rec, nodeOf, rec.Spec.Node):
		return "it is not owned by a live VolumeAttachment on that node"
	case !rec.StatusWrittenBy(v1alpha1.FieldManager):
		return fmt.Sprintf("its status was written by %v, not only by the controller's field manager %s", rec.StatusWriters(), v1alpha1.FieldManager)
	}
	if t := st.FutureTime(now); t != "" {
		return fmt.Sprintf("its %s lies in the future", t)
	}
	return ""
}

func ownedByVAOn(rec *v1alpha1.Finding, nodeOf map[types.UID]string, node string) bool {
	for _, o := range rec.OwnerReferences {
		if o.Kind == kindVolumeAttachment && nodeOf[o.UID] == node {
			return true
		}
	}
	return false
}

// ReadNodesGone reads the controller's records in namespace ns and returns
// NodesGone of them, for a snapshot's NodesGoneSince. A cluster without the
// Finding CRD has none; one the caller may not read them in gets a warning
// (how long nodes have been gone stays unknown).
func ReadNodesGone(ctx context.Context, c client.Reader, ns string, vas []storagev1.VolumeAttachment, warn func(string)) map[string]time.Time {
	var list v1alpha1.FindingList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelCheck: staleVolumeAttachment}); err != nil {
		switch {
		case meta.IsNoMatchError(err):
		case apierrors.IsForbidden(err):
			warn(fmt.Sprintf("cannot list findings.tether.dev in namespace %s (forbidden): since when nodes have been gone is unknown, and the --fence-gone-nodes-after rule fences nothing; grant list on findings.tether.dev there", ns))
		default:
			warn(fmt.Sprintf("cannot read the controller's Finding records (%v): since when nodes have been gone is unknown", err))
		}
		return nil
	}
	recs := make([]*v1alpha1.Finding, len(list.Items))
	for i := range list.Items {
		recs[i] = &list.Items[i]
	}
	since, ignored := NodesGone(recs, vas, ns, time.Now())
	for _, w := range ignored {
		warn(w)
	}
	return since
}
