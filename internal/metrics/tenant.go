package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// TenantUp is 1 while a tenant cluster's evidence counts: its caches
	// have synced and its API has not failed recently. 0 holds every
	// finding the tenant concerns (Blocked, reason TenantUnreachable).
	TenantUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tether_tenant_up",
		Help: "1 while a tenant cluster's evidence is usable (caches synced, no recent API failure), else 0.",
	}, []string{"tenant"})

	// TenantErrors counts the failed requests, lists and watches of a
	// tenant cluster's informers.
	TenantErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tether_tenant_errors_total",
		Help: "Failed requests, lists and watches against a tenant cluster's API.",
	}, []string{"tenant"})

	// TenantNodesFenced is the number of a tenant's nodes that carry the
	// out-of-service taint tether put there (TenantNodeDown): their infra
	// VMs are down and their pods and volumes were released.
	TenantNodesFenced = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tether_tenant_nodes_fenced",
		Help: "Tenant nodes carrying the out-of-service taint tether added because their infra VM is down.",
	}, []string{"tenant"})

	// TenantNodesUnfencing is the number of a tenant's nodes in each step
	// of lifting tether's fence: UnfenceCordoned (cordoned, the taint still
	// on: something of the node is still being released, or the taint's
	// removal comes next) and UnfenceSettling (the taint gone, the node
	// kept cordoned while the controllers' caches catch up).
	TenantNodesUnfencing = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tether_tenant_nodes_unfencing",
		Help: "Tenant nodes tether is un-fencing, by step: cordoned (taint still on) or settling (taint gone, still cordoned).",
	}, []string{"tenant", "step"})
)

// The steps of tether_tenant_nodes_unfencing.
const (
	UnfenceCordoned = "cordoned"
	UnfenceSettling = "settling"
)

func init() {
	crmetrics.Registry.MustRegister(TenantUp, TenantErrors, TenantNodesFenced, TenantNodesUnfencing)
}
