// Package engine is empty: kubevirt.io/kubevirt requires this module, but
// neither virt-api nor virt-controller imports any of its packages.
package engine
