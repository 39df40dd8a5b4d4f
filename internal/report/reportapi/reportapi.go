// Package reportapi names the policy report APIs tether writes: their
// group/version, kinds and resources. The configuration checks a chosen API
// against it, the report builder and the controller's writer write with it;
// it imports nothing of the project, so the configuration does not depend
// on the report builder to know the names.
package reportapi

import "fmt"

// API is a policy report API group/version.
type API string

// The supported APIs.
const (
	WGPolicy    API = "wgpolicyk8s.io/v1alpha2"
	OpenReports API = "openreports.io/v1alpha1"
)

// Default is the API written when none is chosen: the one Kyverno writes
// unless started with --openreportsEnabled, and every Policy Reporter reads.
const Default = WGPolicy

// All lists the supported APIs, the default first.
func All() []API { return []API{WGPolicy, OpenReports} }

// Parse checks that s names a supported API; "" is the default.
func Parse(s string) (API, error) {
	a := API(s).OrDefault()
	for _, ok := range All() {
		if a == ok {
			return a, nil
		}
	}
	return "", fmt.Errorf("report API %q is not supported: use %s (default) or %s", s, WGPolicy, OpenReports)
}

// OrDefault is a, or Default when a is empty (a configuration that names no
// API).
func (a API) OrDefault() API {
	if a == "" {
		return Default
	}
	return a
}

// Kinds returns the namespaced and the cluster-scoped report kind of a.
func (a API) Kinds() (namespaced, cluster string) {
	if a == OpenReports {
		return "Report", "ClusterReport"
	}
	return "PolicyReport", "ClusterPolicyReport"
}

// Resources returns the plural resource names of a's two kinds.
func (a API) Resources() (namespaced, cluster string) {
	if a == OpenReports {
		return "reports", "clusterreports"
	}
	return "policyreports", "clusterpolicyreports"
}

// Group is a's API group.
func (a API) Group() string {
	if a == OpenReports {
		return "openreports.io"
	}
	return "wgpolicyk8s.io"
}

// Version is a's API version.
func (a API) Version() string {
	if a == OpenReports {
		return "v1alpha1"
	}
	return "v1alpha2"
}
