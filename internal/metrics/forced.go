package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// ForcedDetach counts forced steps on stale VolumeAttachments, by action
// (DeleteVolumeAttachment, RemoveAttacherFinalizer) and reason (the fencing
// evidence: out-of-service, node-gone).
var ForcedDetach = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "tether_forced_detach_total",
	Help: "Forced steps on stale VolumeAttachments (bypassing the attacher's confirmation), by action and reason.",
}, []string{"action", "reason"})

// Reasons of ForcedDetach: the fencing evidence.
const (
	FencedOutOfService = "out-of-service"
	FencedNodeGone     = "node-gone"
)

func init() { crmetrics.Registry.MustRegister(ForcedDetach) }
