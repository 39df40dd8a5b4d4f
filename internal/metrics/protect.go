package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Results of the protection admission webhook (label result of Admission).
const (
	// AdmissionAllowed: the write adds references, none to an object being
	// deleted.
	AdmissionAllowed = "allowed"
	// AdmissionRefused: the write adds a reference to an object being
	// deleted.
	AdmissionRefused = "refused"
	// AdmissionUnknown: the request or a referenced object could not be
	// read, and the write was let through (fail open).
	AdmissionUnknown = "unknown"
)

// Admission counts the VM writes the protection webhook looked up, by
// result. Writes that add no reference are not counted.
var Admission = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "tether_protect_admission_total",
	Help: "VM writes reviewed by the protection webhook that add a PVC or DataVolume reference, by result (allowed, refused, unknown: let through unread).",
}, []string{"result"})

func init() {
	crmetrics.Registry.MustRegister(Admission, ProtectionDeleting, ProtectionDeletingOldest)
	// Every result exists from the start at 0, so that a rate or an
	// increase sees the first review.
	for _, r := range []string{AdmissionAllowed, AdmissionRefused, AdmissionUnknown} {
		Admission.WithLabelValues(r)
	}
}

// States of an object being deleted that keeps the tether.dev/in-use
// finalizer (label state of ProtectionDeleting).
const (
	// DeletingPostponed: a VM still uses it; its deletion waits for the VM,
	// as intended.
	DeletingPostponed = "postponed"
	// DeletingReleasing: no VM uses it; the finalizer is due for release
	// once protection.releaseDelay has passed since the deletion.
	DeletingReleasing = "releasing"
)

var (
	// ProtectionDeleting is the number of objects being deleted that keep
	// the tether.dev/in-use finalizer, by kind and state, recounted from
	// the controller's cache.
	ProtectionDeleting = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tether_protection_deleting",
		Help: "Objects being deleted that keep the tether.dev/in-use finalizer, by kind and state (postponed: a VM uses it; releasing: no VM does, release due).",
	}, []string{"kind", "state"})

	// ProtectionDeletingOldest is the deletion time (Unix seconds) of the
	// oldest of them, by kind and state; a series exists only while there
	// is one.
	ProtectionDeletingOldest = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tether_protection_deleting_oldest_timestamp_seconds",
		Help: "Deletion time (Unix seconds) of the oldest object being deleted that keeps the tether.dev/in-use finalizer, by kind and state (no series when there is none).",
	}, []string{"kind", "state"})
)
