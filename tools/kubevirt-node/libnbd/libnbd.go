// Package libnbd stands in for the Go bindings of libnbd
// (libguestfs.org/libnbd), which kubevirt.io/kubevirt v1.9.0 requires but the
// Go module proxy refuses to serve (403). It declares only the names
// kubevirt.io/kubevirt/pkg/storage/nbdclient uses, which virt-launcher links
// for changed-block tracking of backups. The test world never takes a
// backup: every call here fails with ErrUnavailable, so a launcher built with
// it reports the feature as unavailable instead of misbehaving.
package libnbd

import "errors"

// ErrUnavailable is what every call returns.
var ErrUnavailable = errors.New("libnbd: not available in this build (tether's replacement module)")

// The meta contexts nbdclient asks the server for.
const (
	CONTEXT_BASE_ALLOCATION   = "base:allocation"
	CONTEXT_QEMU_DIRTY_BITMAP = "qemu:dirty-bitmap:"
)

// State holds the flags of an extent, as in libnbd's LIBNBD_STATE_*.
type State uint32

// The extent flags nbdclient tests. STATE_DIRTY shares its value with
// STATE_HOLE, as in libnbd: their meaning depends on the meta context.
const (
	STATE_HOLE  State = 1
	STATE_ZERO  State = 2
	STATE_DIRTY State = 1
)

// LibnbdExtent is one extent of a block-status reply.
type LibnbdExtent struct {
	Length uint64
	Flags  uint64
}

// ExtentCallback64 receives the extents of a block-status reply.
type ExtentCallback64 func(metacontext string, offset uint64, entries []LibnbdExtent, error *int) int

// BlockStatus64Optargs are BlockStatus64's optional arguments.
type BlockStatus64Optargs struct{}

// PreadOptargs are Pread's optional arguments.
type PreadOptargs struct{}

// Libnbd is a handle; Create never returns one.
type Libnbd struct{}

// Create fails: there is no libnbd in this build.
func Create() (*Libnbd, error) { return nil, ErrUnavailable }

// Close does nothing.
func (h *Libnbd) Close() error { return nil }

// AddMetaContext fails.
func (h *Libnbd) AddMetaContext(string) error { return ErrUnavailable }

// CanMetaContext fails.
func (h *Libnbd) CanMetaContext(string) (bool, error) { return false, ErrUnavailable }

// ConnectUnix fails.
func (h *Libnbd) ConnectUnix(string) error { return ErrUnavailable }

// GetSize fails.
func (h *Libnbd) GetSize() (uint64, error) { return 0, ErrUnavailable }

// SetExportName fails.
func (h *Libnbd) SetExportName(string) error { return ErrUnavailable }

// Pread fails.
func (h *Libnbd) Pread([]byte, uint64, *PreadOptargs) error { return ErrUnavailable }

// BlockStatus64 fails.
func (h *Libnbd) BlockStatus64(uint64, uint64, ExtentCallback64, *BlockStatus64Optargs) error {
	return ErrUnavailable
}
