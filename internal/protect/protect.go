// Package protect keeps the tether.dev/in-use finalizer on the objects a
// KubeVirt VM depends on — its PVCs and DataVolumes, even while the VM is
// stopped and has no pod, and the instancetype/preference
// ControllerRevisions it references — so that they cannot be deleted
// underneath it.
//
// The decisions are the pure rules of package inuse (Dependents, Users,
// Decide, ReleaseTiming). The reconciler feeds them from informer caches
// and confirms every release with a live LIST first: a VM created just
// before a deletion may still be missing from the cache. The admission
// webhook of VM writes and `tether protect` apply the same rules.
package protect
