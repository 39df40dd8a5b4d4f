package emulator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// FaultConfigMap is the ConfigMap (in the emulator's namespace) from which
// the emulator also takes faults: key "faults" holds a JSON list of Fault;
// key "handlersDown", if present, a JSON list of the nodes whose
// virt-handler is down from now on (all others are up; "[]" brings every
// node back). It is deleted once read.
const FaultConfigMap = "kubevirt-emulator-faults"

// Fault makes the next Count matching subresource calls fail. Filters that
// are empty match everything. Faults are consumed in the order injected; a
// call takes the first fault that matches it.
type Fault struct {
	// Count is how many calls the fault affects; 0 means 1.
	Count int `json:"count,omitempty"`
	// Status is the HTTP status to answer with (default 500), as a
	// metav1.Status body whose reason matches the code.
	Status int `json:"status,omitempty"`
	// Message replaces the default message of the Status body.
	Message string `json:"message,omitempty"`
	// Hang makes the call block until the caller gives up or the emulator
	// stops; a caller still waiting then gets Status (default 504).
	Hang bool `json:"hang,omitempty"`

	// Subresource filters on "addvolume" or "removevolume".
	Subresource string `json:"subresource,omitempty"`
	// Resource filters on "virtualmachines" or "virtualmachineinstances".
	Resource string `json:"resource,omitempty"`
	// Namespace and Name filter on the addressed object.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
}

func (f *Fault) matches(c call) bool {
	return (f.Subresource == "" || f.Subresource == c.sub) &&
		(f.Resource == "" || f.Resource == c.resource) &&
		(f.Namespace == "" || f.Namespace == c.ns) &&
		(f.Name == "" || f.Name == c.name)
}

// call identifies one subresource request.
type call struct{ resource, ns, name, sub string }

type faultSet struct {
	mu     sync.Mutex
	faults []Fault
}

func (s *faultSet) add(faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range faults {
		if f.Count <= 0 {
			f.Count = 1
		}
		if f.Status == 0 && !f.Hang {
			f.Status = http.StatusInternalServerError
		}
		s.faults = append(s.faults, f)
	}
}

// take consumes one use of the first fault matching c.
func (s *faultSet) take(c call) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.faults {
		f := &s.faults[i]
		if !f.matches(c) {
			continue
		}
		got := *f
		if f.Count--; f.Count == 0 {
			s.faults = append(s.faults[:i], s.faults[i+1:]...)
		}
		return got, true
	}
	return Fault{}, false
}

func (s *faultSet) clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

func (s *faultSet) pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, f := range s.faults {
		n += f.Count
	}
	return n
}

// InjectFaults queues faults for the coming subresource calls.
func (e *Emulator) InjectFaults(faults ...Fault) { e.faults.add(faults...) }

// ClearFaults drops all faults not yet used.
func (e *Emulator) ClearFaults() { e.faults.clear() }

// PendingFaults is the number of fault uses still queued.
func (e *Emulator) PendingFaults() int { return e.faults.pending() }

// serveFault answers a call with the fault f.
func (e *Emulator) serveFault(ctx context.Context, w http.ResponseWriter, c call, f Fault) {
	e.log.Info("injecting fault", "resource", c.resource, "namespace", c.ns, "name", c.name,
		"subresource", c.sub, "status", f.Status, "hang", f.Hang)
	if f.Hang {
		select {
		case <-ctx.Done():
		case <-e.stopped:
		}
		if f.Status == 0 {
			f.Status = http.StatusGatewayTimeout
		}
	}
	msg := f.Message
	if msg == "" {
		msg = fmt.Sprintf("injected fault for %s %s/%s/%s", c.sub, c.resource, c.ns, c.name)
	}
	gr := schema.GroupResource{Group: "kubevirt.io", Resource: c.resource}
	serr := apierrors.NewGenericServerResponse(f.Status, http.MethodPut, gr, c.name, msg, 0, false)
	serr.ErrStatus.Message = msg
	writeStatus(w, serr)
}

// faultsFromConfigMap parses the keys "faults" and "handlersDown" of
// FaultConfigMap; down is nil when the key is absent.
func faultsFromConfigMap(cm *corev1.ConfigMap) (faults []Fault, down *[]string, err error) {
	if raw := cm.Data["faults"]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &faults); err != nil {
			return nil, nil, fmt.Errorf("configmap %s/%s: key faults: %w", cm.Namespace, cm.Name, err)
		}
	}
	if raw, ok := cm.Data["handlersDown"]; ok {
		nodes := []string{}
		if err := json.Unmarshal([]byte(raw), &nodes); err != nil {
			return nil, nil, fmt.Errorf("configmap %s/%s: key handlersDown: want a JSON list of node names: %w", cm.Namespace, cm.Name, err)
		}
		down = &nodes
	}
	return faults, down, nil
}
