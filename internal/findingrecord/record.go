// Package findingrecord is the contract of the controller's Finding records that
// readers other than the controller rely on: how a record is named, and
// which records are evidence of since when a Node has been gone.
//
// It must never decide about findings (that is package check) nor write a
// record (that is the controller's record keeper).
package findingrecord

import "strings"

// The names of the check and of the subject kind whose records carry
// node-gone evidence; record_test.go holds them equal to package check's.
const (
	staleVolumeAttachment = "StaleVolumeAttachment"
	kindVolumeAttachment  = "VolumeAttachment"
)

// Name is a Finding record's object name: the check, lower-cased, and the
// finding's id, both stable for one condition.
func Name(check, id string) string {
	return strings.ToLower(check) + "-" + id
}
