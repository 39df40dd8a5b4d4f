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

func init() { crmetrics.Registry.MustRegister(Admission) }
