// Package core names the template.kubevirt.io API group.
package core

// GroupName is the API group of VirtualMachineTemplate.
const GroupName = "template.kubevirt.io"

// Resource names of VirtualMachineTemplate.
const (
	SingularResourceName = "virtualmachinetemplate"
	PluralResourceName   = "virtualmachinetemplates"
)
