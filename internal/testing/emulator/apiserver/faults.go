package apiserver

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

// Faults is the queue of faults not yet used; it is safe for concurrent
// use.
type Faults struct {
	mu     sync.Mutex
	faults []Fault
}

// Add queues faults for the coming subresource calls.
func (s *Faults) Add(faults ...Fault) {
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
func (s *Faults) take(c call) (Fault, bool) {
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

// Clear drops all faults not yet used.
func (s *Faults) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// Pending is the number of fault uses still queued.
func (s *Faults) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, f := range s.faults {
		n += f.Count
	}
	return n
}

// serveFault answers a call with the fault f.
func (s *Server) serveFault(ctx context.Context, w http.ResponseWriter, c call, f Fault) {
	s.log.Info("injecting fault", "resource", c.resource, "namespace", c.ns, "name", c.name,
		"subresource", c.sub, "status", f.Status, "hang", f.Hang)
	if f.Hang {
		select {
		case <-ctx.Done():
		case <-s.stopped:
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

// FaultsFromConfigMap parses the keys "faults" and "handlersDown" of
// FaultConfigMap; down is nil when the key is absent.
func FaultsFromConfigMap(cm *corev1.ConfigMap) (faults []Fault, down *[]string, err error) {
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
