package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// StrandedFinalizers is the number of objects that carry the
// tether.dev/in-use finalizer outside what the controller protects and that
// it did not release, by namespace, kind and reason (InUse, NoPatchRight,
// ReleaseFailed). The command label is the command that releases every
// tether finalizer of the namespace.
var StrandedFinalizers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "tether_protection_stranded_finalizers",
	Help: "Objects keeping the tether.dev/in-use finalizer outside the protected scope, by namespace, kind, reason and the command that releases them.",
}, []string{"namespace", "kind", "reason", "command"})

func init() { crmetrics.Registry.MustRegister(StrandedFinalizers) }
