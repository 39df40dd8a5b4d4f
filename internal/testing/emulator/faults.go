package emulator

import "github.com/tether-dev/tether/internal/testing/emulator/apiserver"

// FaultConfigMap is the ConfigMap (in the emulator's namespace) from which
// the emulator also takes faults: key "faults" holds a JSON list of Fault;
// key "handlersDown", if present, a JSON list of the nodes whose
// virt-handler is down from now on (all others are up; "[]" brings every
// node back). It is deleted once read.
const FaultConfigMap = "kubevirt-emulator-faults"

// Fault makes the next Count matching subresource calls fail (see
// apiserver.Fault).
type Fault = apiserver.Fault

// InjectFaults queues faults for the coming subresource calls.
func (e *Emulator) InjectFaults(faults ...Fault) { e.faults.Add(faults...) }

// ClearFaults drops all faults not yet used.
func (e *Emulator) ClearFaults() { e.faults.Clear() }

// PendingFaults is the number of fault uses still queued.
func (e *Emulator) PendingFaults() int { return e.faults.Pending() }
