package controller

import (
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/tether-dev/tether/api/v1alpha1"
)

// statusEqual compares two statuses as they would be stored.
func statusEqual(a, b v1alpha1.FindingStatus) bool {
	return equality.Semantic.DeepEqual(a, b)
}
