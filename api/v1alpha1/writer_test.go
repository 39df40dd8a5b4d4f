package v1alpha1

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func entry(manager, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
}

func TestStatusWrittenBy(t *testing.T) {
	spec := `{"f:metadata":{"f:labels":{}},"f:spec":{"f:id":{}}}`
	status := `{"f:status":{"f:lastObserved":{},"f:phase":{}}}`
	cases := []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    bool
	}{
		{"no managed fields (e.g. a test client that drops them)", nil, false},
		{"only spec written, no status yet", []metav1.ManagedFieldsEntry{entry(FieldManager, spec)}, false},
		{"status written by the controller", []metav1.ManagedFieldsEntry{entry(FieldManager, spec), entry(FieldManager, status)}, true},
		{"spec by someone else, status by the controller", []metav1.ManagedFieldsEntry{entry("kubectl-create", spec), entry(FieldManager, status)}, true},
		{"status edited by hand afterwards", []metav1.ManagedFieldsEntry{entry(FieldManager, status), entry("kubectl-edit", `{"f:status":{"f:lastObserved":{}}}`)}, false},
		{"status written only by another manager", []metav1.ManagedFieldsEntry{entry("kubectl-patch", status)}, false},
		{"undecodable entry of another manager", []metav1.ManagedFieldsEntry{entry(FieldManager, status), entry("x", `not json`)}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &Finding{ObjectMeta: metav1.ObjectMeta{ManagedFields: c.entries}}
			if got := f.StatusWrittenBy(FieldManager); got != c.want {
				t.Errorf("StatusWrittenBy = %v, want %v", got, c.want)
			}
		})
	}
}
