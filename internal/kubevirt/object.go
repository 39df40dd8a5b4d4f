package kubevirt

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tether-dev/tether/internal/drift"
	"github.com/tether-dev/tether/internal/kubevirt/snapshot"
)

// About resolves --object in the latest survey (Resolve): the findings
// about that object.
func (x *Fixer) About(object string) (func(drift.Finding) bool, error) {
	if x.Last == nil {
		return nil, fmt.Errorf("--object %q: nothing observed yet", object)
	}
	ns, name, err := Resolve(x.Last, x.found, object)
	if err != nil {
		return nil, err
	}
	return func(f drift.Finding) bool { return f.Namespace == ns && f.Object.Name == name }, nil
}

// Resolve finds the namespace and name --object means in s and the
// survey's findings: NAMESPACE/NAME as the findings' table shows it,
// /NAME for a cluster-scoped object, or NAME alone where one namespace
// (or the cluster scope) has an object of that name. A VM, its VMI and its
// pods share a name, so a name is one object to the operator whatever its
// kinds. A name nothing read has, or one several namespaces have, is an
// error that says what was read and how to name the object instead: an
// empty plan would read as "no drift about it".
func Resolve(s *snapshot.Snapshot, found []drift.Finding, object string) (ns, name string, err error) {
	name = object
	scoped := false
	if n, m, ok := strings.Cut(object, "/"); ok {
		ns, name, scoped = n, m, true
	}
	if name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("--object %q names nothing: give NAMESPACE/NAME as the findings' table shows it (/NAME for a cluster-scoped object), or a NAME one namespace has", object)
	}
	var where []string
	have := func(n, m string) {
		if m == name && (!scoped || n == ns) && !slices.Contains(where, n) {
			where = append(where, n)
		}
	}
	read := eachObject(s, have)
	for _, f := range found {
		have(f.Namespace, f.Object.Name)
	}
	switch {
	case len(where) == 1:
		return where[0], name, nil
	case len(where) > 1:
		slices.Sort(where)
		return "", "", fmt.Errorf("--object %q is in namespaces %s: pass NAMESPACE/%s", object, strings.Join(where, ", "), name)
	}
	scope := "every namespace"
	switch {
	case scoped && ns == "":
		scope = "the cluster scope"
	case scoped:
		scope = "namespace " + ns
	}
	return "", "", fmt.Errorf("--object %q: nothing read in %s is named %s (read: %s; --checks and --namespace narrow what is read); check it with `kubectl get vm,vmi,pvc -A --field-selector metadata.name=%s`",
		object, scope, name, read, name)
}

// eachObject calls have with the namespace and name of every object s
// holds and says how many of each kind it read.
func eachObject(s *snapshot.Snapshot, have func(ns, name string)) string {
	var read []string
	read = named(read, s.VMs, "VMs", have)
	read = named(read, s.VMIs, "VMIs", have)
	read = named(read, s.PVCs, "PVCs", have)
	read = named(read, s.DataVolumes, "DataVolumes", have)
	read = named(read, s.AttachmentPods, "attachment pods", have)
	read = named(read, s.Pods, "pods", have)
	read = named(read, s.Nodes, "nodes", have)
	read = named(read, s.VolumeAttachments, "VolumeAttachments", have)
	read = named(read, s.PVs, "PVs", have)
	if len(read) == 0 {
		return "nothing"
	}
	return strings.Join(read, ", ")
}

// named calls have with the namespace and name of each of items and adds
// their count to read.
func named[T any, P interface {
	*T
	GetNamespace() string
	GetName() string
}](read []string, items []T, kind string, have func(ns, name string)) []string {
	for i := range items {
		o := P(&items[i])
		have(o.GetNamespace(), o.GetName())
	}
	if len(items) > 0 {
		read = append(read, fmt.Sprintf("%d %s", len(items), kind))
	}
	return read
}
