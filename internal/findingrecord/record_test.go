package findingrecord

import (
	"testing"

	"github.com/tether-dev/tether/internal/kubevirt/check"
)

// The record contract names checks as package check does.
func TestNamesAreCheckNames(t *testing.T) {
	if staleVolumeAttachment != check.StaleVolumeAttachment || kindVolumeAttachment != check.KindVolumeAttachment {
		t.Fatalf("record names %q/%q, check names %q/%q", staleVolumeAttachment, kindVolumeAttachment, check.StaleVolumeAttachment, check.KindVolumeAttachment)
	}
	if got := Name(check.StaleVolumeAttachment, "abc"); got != "stalevolumeattachment-abc" {
		t.Fatalf("Name = %q", got)
	}
}
