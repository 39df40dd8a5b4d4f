// Package v1beta1 declares the shape of VirtualMachineTemplate that
// kubevirt.io/kubevirt compiles against. Nothing in tether's test world
// creates or reads these objects.
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kubevirt.io/virt-template-api/core"
)

// GroupVersion is template.kubevirt.io/v1beta1.
var GroupVersion = schema.GroupVersion{Group: core.GroupName, Version: "v1beta1"}

// ConditionReady is the condition type a usable template carries.
const ConditionReady = "Ready"

// Parameter is one named template parameter with its default value.
type Parameter struct {
	Name  string `json:"name"`
	Value string `json:"value,omitempty"`
}

// VirtualMachineTemplateSpec holds the templated VirtualMachine.
type VirtualMachineTemplateSpec struct {
	VirtualMachine *runtime.RawExtension `json:"virtualMachine,omitempty"`
	Parameters     []Parameter           `json:"parameters,omitempty"`
}

// VirtualMachineTemplateStatus holds the template's conditions.
type VirtualMachineTemplateStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// VirtualMachineTemplate is a namespaced template of a VirtualMachine.
type VirtualMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VirtualMachineTemplateSpec   `json:"spec"`
	Status VirtualMachineTemplateStatus `json:"status,omitempty"`
}

// DeepCopy returns an independent copy.
func (t *VirtualMachineTemplate) DeepCopy() *VirtualMachineTemplate {
	if t == nil {
		return nil
	}
	out := &VirtualMachineTemplate{TypeMeta: t.TypeMeta}
	t.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if t.Spec.VirtualMachine != nil {
		out.Spec.VirtualMachine = t.Spec.VirtualMachine.DeepCopy()
	}
	out.Spec.Parameters = append([]Parameter(nil), t.Spec.Parameters...)
	for _, c := range t.Status.Conditions {
		var cc metav1.Condition
		c.DeepCopyInto(&cc)
		out.Status.Conditions = append(out.Status.Conditions, cc)
	}
	return out
}

// DeepCopyObject makes VirtualMachineTemplate a runtime.Object.
func (t *VirtualMachineTemplate) DeepCopyObject() runtime.Object { return t.DeepCopy() }
